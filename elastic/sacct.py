"""Slurm's accounting as ``sacct`` prints it for programs: the one parser of its parsable form.

``sacct -n -P -o F1,F2,...`` prints one line per job, run or step, its fields in the order asked
for, separated by ``|``, with no header. Every reader of sacct in ptc (the benchmarks' rows and
steps, the overhead taxonomy, the ledger) asks for its own fields and reads them here, so there
is one parser of that form. It lives at the package's root, as ``elastic.slurm_time`` does, so
that ``elastic.bench``, ``elastic.slurm`` and ``elastic.ledger`` import it without importing each
other.

With ``SLURM_TIME_FORMAT=%s`` (:data:`EPOCH`) sacct prints times as epoch seconds and
``Unknown`` (or ``None``) for a time it does not know, such as the start of a pending job or the
end of a running one: :func:`epoch` reads both. A state may carry who did it (``CANCELLED by
0``): :func:`state` keeps the word.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from elastic.errors import InputError

EPOCH = "SLURM_TIME_FORMAT=%s"  # the environment that makes sacct print times as epoch seconds
# The states a job ends in (sacct's and scontrol's words): Slurm runs it no more from one.
FINISHED_STATES = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
     "PREEMPTED", "TIMEOUT"}
)  # fmt: skip


def command(fields: Sequence[str], *options: str) -> str:
    """The shell command printing ``fields`` of the jobs ``options`` select, parsable, times
    as epoch seconds."""
    return " ".join([EPOCH, "sacct", "-n", "-P", *options, "-o", ",".join(fields)])


def parse(text: str, fields: Iterable[str], *, strict: bool = True) -> list[dict[str, str]]:
    """Each line of ``sacct -n -P -o FIELDS`` as {field: value}, in sacct's order, every line
    kept (``sacct -D`` prints one per run of a requeued job). A line with another number of
    fields raises InputError naming its number, or is skipped when not ``strict``."""
    names = list(fields)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != len(names):
            if strict:
                raise InputError(
                    f"sacct line {number}: expected {len(names)} fields "
                    f"({','.join(names)}), got {line!r}"
                )
            continue
        rows.append(dict(zip(names, parts, strict=True)))
    return rows


def state(value: str) -> str:
    """A job's state without who caused it: ``CANCELLED by 0`` is ``CANCELLED``."""
    words = value.split()
    return words[0] if words else ""


def epoch(value: str) -> float | None:
    """A time sacct printed under :data:`EPOCH`; None for one it does not know (``Unknown``,
    ``None``, empty). Raises InputError naming the value for anything else."""
    text = value.strip()
    if text in ("", "Unknown", "None"):
        return None
    try:
        return float(int(text))
    except ValueError:
        raise InputError(
            f"sacct time {value!r} is not epoch seconds (was SLURM_TIME_FORMAT=%s set?)"
        ) from None


def count(value: str, field: str) -> int:
    """A whole number sacct printed (ElapsedRaw, NNodes); InputError naming ``field``."""
    try:
        number = int(value.strip())
    except ValueError:
        raise InputError(f"sacct field {field}: {value!r} is not a whole number") from None
    if number < 0:
        raise InputError(f"sacct field {field}: {value!r} is negative")
    return number
