"""Slurm's durations in seconds, in every form Slurm prints or reads, and the moments
``scontrol`` prints.

One parser for the queue (``squeue``'s elapsed and remaining time) and the benchmarks
(``sacct``'s TotalCPU). It lives at the package's root so that both ``elastic.slurm`` and
``elastic.bench`` import it without either importing the other.

Slurm writes ``[days-]hours:minutes:seconds`` or ``minutes:seconds`` and reads, as well,
``minutes``, ``days-hours`` and ``days-hours:minutes``: with a day part, the first number after
the dash is always hours (``1-02:03`` is 1 day, 2 hours and 3 minutes); without one, a single
number is minutes and two are minutes and seconds. sacct adds milliseconds to short durations
(``01:02.345``).
"""

from __future__ import annotations

import re
from datetime import datetime

from elastic.errors import InputError

# Words Slurm prints in place of a time: no limit, or none known.
NO_TIME = frozenset({"UNLIMITED", "INFINITE", "NOT_SET", "INVALID", "PARTITION_LIMIT", "N/A", ""})

_FORM = re.compile(r"^(?:(?P<days>\d+)-)?(?P<clock>\d+(?::\d+){0,2})(?P<fraction>\.\d+)?$")


def parse_duration(text: str) -> float | None:
    """``text`` in seconds; None for UNLIMITED, NOT_SET, INVALID, Partition_Limit, N/A or empty.

    Raises InputError naming the value when it is none of Slurm's forms.
    """
    value = text.strip()
    if value.upper() in NO_TIME:
        return None
    m = _FORM.match(value)
    if not m:
        raise InputError(
            f"Slurm time {text!r} is not one of minutes, minutes:seconds, hours:minutes:seconds, "
            "days-hours, days-hours:minutes or days-hours:minutes:seconds"
        )
    parts = [int(p) for p in m["clock"].split(":")]
    if m["days"] is not None:
        hours, minutes, seconds = [*parts, 0, 0][:3]
        if m["fraction"] and len(parts) < 3:
            raise InputError(f"Slurm time {text!r}: a fraction belongs to seconds only")
        total = int(m["days"]) * 86400 + hours * 3600 + minutes * 60 + seconds
    elif len(parts) == 1:
        if m["fraction"]:
            raise InputError(f"Slurm time {text!r}: a fraction belongs to seconds only")
        total = parts[0] * 60
    elif len(parts) == 2:
        total = parts[0] * 60 + parts[1]
    else:
        total = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return float(total) + (float(m["fraction"]) if m["fraction"] else 0.0)


def scontrol_moment(text: str) -> float | None:
    """A moment as ``scontrol show`` prints it (``2026-11-30T21:29:35``, the controller's local
    time), in epoch seconds; None for ``Unknown``, ``None`` and the like."""
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
