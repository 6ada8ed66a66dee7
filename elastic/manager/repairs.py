"""Node repairs on the manager's state: who repairs a node now, and how long a failing one waits.

A partition's Slurm client runs a repair loop on its controller (``elastic.slurm.repair``): a
node the health check drained, or one DOWN for a cause the loop knows, is drained, given a fresh
disk, configured and returned. Two controllers can run that loop at once for a while (a failover
with the old one still up), so a repair starts only with a claim on the node here, in the
replicated store: a lease in the claimant's name that lapses if it dies mid-repair. Its outcome
is recorded here too: a failed repair backs the node's next one off (doubling up to a cap), and
it counts towards the partition's protected mode like a failed resume; while the partition is
protected no repair starts (a repair is a resume of sorts).

Functions of the state alone (no store, no clock): ``elastic.manager.core.Manager`` calls them
inside its compare-and-swap writes.
"""

from __future__ import annotations

from elastic.manager.model import Partition, Repair
from elastic.manager.protection import REASON_CHARS
from elastic.manager.reclamation import iso


def backoff(failures: int, base: float, cap: float) -> float:
    """Seconds before the next repair of a node whose last ``failures`` repairs failed:
    ``base`` after the first, doubling, never more than ``cap``."""
    if failures <= 0:
        return 0.0
    return float(min(cap, base * 2 ** min(failures - 1, 62)))


def refusal(part: Partition, node: str, holder: str, now: float) -> str:
    """Why ``holder`` may not start repairing ``node`` now; "" when it may."""
    if part.protection.since is not None:
        return f"partition {part.name} is in protected mode"
    repair = part.repairs.get(node)
    if repair is None:
        return ""
    if repair.holder and repair.holder != holder and repair.lease_until > now:
        return f"{repair.holder} is repairing it until {iso(repair.lease_until)}"
    if now < repair.not_before:
        return (
            f"its last {repair.failures} repair(s) failed; the next may start at "
            f"{iso(repair.not_before)}"
        )
    return ""


def claim(part: Partition, node: str, holder: str, cause: str, now: float, lease: float) -> str:
    """``holder`` claims ``node`` for ``lease`` seconds to repair it for ``cause``; "" when it
    has the claim, else why not (nothing changes then)."""
    if why := refusal(part, node, holder, now):
        return why
    repair = part.repairs.setdefault(node, Repair())
    repair.holder, repair.lease_until = holder, now + lease
    repair.started, repair.cause = now, cause[:REASON_CHARS]
    return ""


def holds(part: Partition, node: str, holder: str) -> bool:
    repair = part.repairs.get(node)
    return repair is not None and repair.holder == holder


def finish(part: Partition, node: str, error: str, now: float, base: float, cap: float) -> Repair:
    """The claimed repair of ``node`` ended: ``error`` "" when the node is back. The claim is
    let go; a failure backs the node off, a success clears its run."""
    repair = part.repairs.setdefault(node, Repair())
    repair.holder, repair.lease_until = "", 0.0
    if error:
        repair.failures += 1
        repair.last_error = error[:REASON_CHARS]
        repair.not_before = now + backoff(repair.failures, base, cap)
    else:
        repair.failures, repair.last_error, repair.not_before = 0, "", 0.0
        repair.repaired += 1
    return repair
