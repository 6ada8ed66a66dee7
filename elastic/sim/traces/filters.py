"""The paper's trace filters (§4) and the HTC workload construction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from elastic.errors import InputError
from elastic.sim.traces.model import Trace

DAY_S = 86_400.0


@dataclass(frozen=True)
class FilterStep:
    name: str
    before: int
    after: int


def paper_filters(
    trace: Trace, max_nodes: int, max_runtime: float = DAY_S
) -> tuple[Trace, list[FilterStep]]:
    """Keep jobs that completed, have every needed field, fit on ``max_nodes`` and ran at most
    ``max_runtime`` seconds, in that order. Raises if a filter leaves nothing."""
    if max_nodes < 1:
        raise InputError(f"--max-nodes must be >= 1, got {max_nodes}")
    if len(trace) == 0:
        raise InputError(f"trace {trace.name} has no jobs")
    with np.errstate(invalid="ignore"):
        steps: list[tuple[str, NDArray[np.bool_]]] = [
            ("completed successfully", trace.completed),
            ("no missing fields", ~trace.missing),
            (f"node_count <= {max_nodes}", trace.nodes <= max_nodes),
            (f"runtime <= {max_runtime:g} s", trace.runtime <= max_runtime),
        ]
    keep = np.ones(len(trace), dtype=bool)
    report: list[FilterStep] = []
    for name, mask in steps:
        before = int(keep.sum())
        keep &= mask
        after = int(keep.sum())
        report.append(FilterStep(name, before, after))
        if after == 0:
            raise InputError(
                f"trace {trace.name} is empty after filter '{name}' ({before} jobs before it)"
            )
    return trace.take(keep), report


def shuffled_copies(trace: Trace, copies: int, seed: int) -> Trace:
    """The paper's HTC workload: ``copies`` independently shuffled copies, concatenated.

    Job ids are renumbered 1..n so copies stay distinct."""
    if copies < 1:
        raise InputError(f"--htc-copies must be >= 1, got {copies}")
    rng = np.random.default_rng(seed)
    index = np.concatenate([rng.permutation(len(trace)) for _ in range(copies)])
    out = trace.take(index)
    return Trace(**{**out.__dict__, "job_id": np.arange(1, len(index) + 1, dtype=np.int64)})


def first_jobs(trace: Trace, count: int | None) -> Trace:
    """The first ``count`` jobs in submit order (a contiguous slice of the log)."""
    if count is None or count >= len(trace):
        return trace
    if count < 1:
        raise InputError(f"--limit-jobs must be >= 1, got {count}")
    order = np.argsort(trace.submit, kind="stable")[:count]
    return trace.take(np.sort(order))


def mark_random_fraction(trace: Trace, fraction: float, priority: float, seed: int) -> Trace:
    """Give ``round(fraction * n)`` jobs, drawn with ``seed``, the priority ``priority``.

    For traces without a queue to single out (KTH-SP2, HTC): a documented, seeded stand-in for
    the paper's bigmem class."""
    if not 0 <= fraction <= 1:
        raise InputError(f"--high-fraction must be within [0, 1], got {fraction}")
    count = round(fraction * len(trace))
    chosen = np.random.default_rng(seed).choice(len(trace), size=count, replace=False)
    out = trace.priority.copy()
    out[chosen] = priority
    return trace.with_priority(out)
