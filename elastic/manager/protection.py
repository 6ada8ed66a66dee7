"""Protected mode on the manager's state: a partition whose resumes keep failing stops resuming.

A node that cannot boot or be configured goes back to the pool DOWN, and the next job that wants
it would try it again, and again. ParallelCluster answers that by putting a queue in protected
mode after ten straight boot failures; ptc does the same per partition. Every resume's report
(``ResumeReport``) counts here: each node that failed adds one, any node that came up starts the
count again, and a node whose resume a power down called off (a reclamation took it back) is
not the node's failure and counts for nothing. At ``after`` failures in a row the partition is
protected: its Slurm client stops the partition's jobs from starting (they wait) and refuses
resumes, until the administrator ends it (``ptc elastic unprotect``) or, if one is set, a
cool-down has passed.

Functions of the state alone (no store, no clock): ``elastic.manager.core.Manager`` calls them
inside its compare-and-swap writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from elastic.manager.model import Partition

# How much of a failure's reason the record keeps.
REASON_CHARS = 300


def record(
    part: Partition,
    ready: Sequence[str],
    failed: Mapping[str, str],
    called_off: Sequence[str],
    now: float,
    after: int,
) -> bool:
    """Count one resume's outcome; True when it put the partition in protected mode. ``after``
    0 never protects."""
    p = part.protection
    if ready:
        p.failures = 0
    for node, why in sorted(failed.items()):
        if node in called_off:
            continue
        p.failures += 1
        p.last_failure = f"{node}: {why}"[:REASON_CHARS]
    if p.since is None and after > 0 and p.failures >= after:
        p.since = now
        p.reason = f"{p.failures} node resume(s) failed in a row; the last, {p.last_failure}"[
            :REASON_CHARS
        ]
        return True
    return False


def end(part: Partition, now: float) -> bool:
    """Leave protected mode (the count starts again); False if it was not protected."""
    p = part.protection
    was = p.since is not None
    p.since, p.reason, p.failures = None, "", 0
    if was:
        p.ended = now
    return was


def cooled_down(part: Partition, now: float, cooldown: float) -> bool:
    """Whether a protection has lasted its cool-down (0: none, it lasts until ended)."""
    since = part.protection.since
    return since is not None and cooldown > 0 and now - since >= cooldown
