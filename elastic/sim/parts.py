"""A sweep cut into parts (blocks of policies x grace periods) and the parts put back together.

Every part runs the whole schedule and every snapshot, but only its policies and its grace
periods. A policy's values do not depend on the other policies (each gets a fresh instance,
RANDOM its own seeded generator) nor on which grace periods are counted, so each (policy, GP)
cell of a part holds exactly what the whole sweep holds there, and ``merge`` only has to place
the cells. It checks that the parts agree on the snapshots and cover every cell once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from elastic.errors import InputError, PtcError
from elastic.sim.sweep import SweepResult


@dataclass(frozen=True)
class Part:
    policies: tuple[str, ...]
    grace_periods: tuple[float, ...]

    def describe(self) -> str:
        gps = ",".join(f"{g:g}" for g in self.grace_periods)
        return f"{'+'.join(self.policies)} x GP {gps}"


def split(policies: Sequence[str], grace_periods: Sequence[float], tasks: int) -> list[Part]:
    """At most ``tasks`` parts: policies shared out first, then each policy's grace periods.

    With fewer tasks than policies, each part takes a run of consecutive policies and every
    grace period; with more, each policy gets ``tasks // len(policies)`` parts or one more
    (never more than it has grace periods), each a run of consecutive grace periods.
    """
    if tasks < 1:
        raise InputError(f"--tasks must be >= 1, got {tasks}")
    if not policies or not grace_periods:
        raise InputError("a sweep needs at least one policy and one grace period")
    pols, gps = tuple(policies), tuple(float(g) for g in grace_periods)
    if tasks <= len(pols):
        groups = np.array_split(np.arange(len(pols)), tasks)
        return [Part(tuple(pols[i] for i in g.tolist()), gps) for g in groups]
    parts: list[Part] = []
    for p, policy in enumerate(pols):
        count = tasks // len(pols) + (1 if p < tasks % len(pols) else 0)
        for chunk in np.array_split(np.arange(len(gps)), min(count, len(gps))):
            parts.append(Part((policy,), tuple(gps[i] for i in chunk.tolist())))
    return parts


def merge(
    pieces: Sequence[SweepResult], policies: Sequence[str], grace_periods: Sequence[float]
) -> SweepResult:
    """One sweep from its parts, in the order ``policies`` x ``grace_periods``."""
    if not pieces:
        raise PtcError("no part of the sweep came back")
    pols, gps = tuple(policies), tuple(float(g) for g in grace_periods)
    first = pieces[0]
    shape = (len(pols), len(gps), first.samples)
    wc, wc_high = np.empty(shape), np.empty(shape)
    filled = np.zeros(shape[:2], dtype=np.int64)
    for number, piece in enumerate(pieces):
        if not (
            np.array_equal(piece.times, first.times) and np.array_equal(piece.idle, first.idle)
        ):
            raise PtcError(f"part {number} saw other snapshots than part 0: not one schedule")
        for i, policy in enumerate(piece.policies):
            if policy not in pols:
                raise PtcError(f"part {number} holds policy {policy}, which the sweep has not")
            for j, gp in enumerate(piece.grace_periods):
                if gp not in gps:
                    raise PtcError(f"part {number} holds GP {gp:g} s, which the sweep has not")
                p, g = pols.index(policy), gps.index(gp)
                wc[p, g] = piece.wc[i, j]
                wc_high[p, g] = piece.wc_high[i, j]
                filled[p, g] += 1
    if (filled != 1).any():
        p, g = (int(v[0]) for v in np.nonzero(filled != 1))
        raise PtcError(
            f"{pols[p]} x GP {gps[g]:g} s came back {int(filled[p, g])} times (expected once)"
        )
    return SweepResult(pols, gps, first.times.copy(), first.idle.copy(), wc, wc_high)
