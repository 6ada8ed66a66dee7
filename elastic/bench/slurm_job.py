"""Slurm on a cluster's controller, over SSH: submitting batch jobs and job arrays, reading sacct.

Everything goes over SSH to the controller with the experiment's ssh_config, so the same code
runs against the local testbed and CloudLab. A failed command raises
:class:`~elastic.errors.RemoteError`, one that does not finish in time
:class:`~elastic.errors.RemoteTimeout`; both name the host and the command.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from elastic import sacct as sacct_text
from elastic.errors import RemoteError, RemoteTimeout
from elastic.remote import ssh
from elastic.slurm_time import parse_duration

TERMINAL = sacct_text.FINISHED_STATES
RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING"}

# The accounting fields every dataset row carries (sacct -o), in this order.
SACCT_FIELDS = (
    "JobID",
    "State",
    "ExitCode",
    "Elapsed",
    "ElapsedRaw",
    "TotalCPU",
    "MaxRSS",
    "AllocCPUS",
    "NodeList",
    "ConsumedEnergyRaw",
    "Submit",
    "Start",
    "End",
)


@dataclass(frozen=True)
class Remote:
    ssh_config: Path
    host: str

    def run(self, command: str, stdin: str | None = None, timeout: float = 300) -> str:
        return ssh.run(self.ssh_config, self.host, command, stdin=stdin, timeout=timeout)

    def run_bytes(self, command: str, data: bytes, timeout: float = 600) -> bytes:
        """``command`` with ``data`` on stdin; its stdout as bytes (a tar stream)."""
        return ssh.run_bytes(self.ssh_config, self.host, command, data, timeout=timeout)


@dataclass(frozen=True)
class JobResult:
    job_id: str
    state: str
    exit_code: str
    elapsed_s: float
    nodelist: str


def as_user(user: str, command: str) -> str:
    return f"runuser -u {shlex.quote(user)} -- sh -c {shlex.quote(command)}"


def submit(remote: Remote, user: str, workdir: str, script: str, *options: str) -> str:
    """``sbatch`` the script (on stdin) as ``user`` in ``workdir``; returns the job id."""
    extra = "".join(f" {shlex.quote(o)}" for o in options)
    command = f"sbatch --parsable --chdir={shlex.quote(workdir)}{extra}"
    out = remote.run(as_user(user, command), stdin=script).strip()
    job_id = out.split(";")[0]
    if not job_id.isdigit():
        raise RemoteError(
            f"{remote.host}: sbatch did not return a job id: {out!r}",
            host=remote.host,
            command=command,
            returncode=0,
            output=out,
        )
    return job_id


def parse_sacct(text: str, fields: Iterable[str] = SACCT_FIELDS) -> dict[str, dict[str, str]]:
    """``sacct -n -P -o FIELDS`` output as JobID -> {field: value}."""
    rows: dict[str, dict[str, str]] = {}
    for row in sacct_text.parse(text, fields, strict=False):
        row["State"] = sacct_text.state(row.get("State", ""))
        rows[row["JobID"]] = row
    return rows


def sacct(remote: Remote, job_ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """Allocation lines (-X) of the jobs or arrays, by JobID (``123`` or ``123_4``)."""
    ids = ",".join(job_ids)
    if not ids:
        return {}
    out = remote.run(f"sacct -X -n -P -j {ids} -o {','.join(SACCT_FIELDS)}")
    return parse_sacct(out)


@dataclass(frozen=True)
class StepUsage:
    """What sacct knows of a job's steps: whether all ended, their CPU time and largest RSS."""

    settled: bool  # the batch step is recorded and every step has ended
    total_cpu_s: float | None
    max_rss: str | None


def sacct_steps(remote: Remote, job_ids: Iterable[str]) -> dict[str, StepUsage]:
    """Per job (``123`` or ``123_4``): usage summed over its steps.

    slurmdbd records a job's end before its steps' usage, so the allocation line can read
    TotalCPU 0 for a moment after the job ended; a job is ``settled`` once its batch step is
    recorded and every step has ended.
    """
    ids = ",".join(job_ids)
    if not ids:
        return {}
    fields = ("JobID", "State", "TotalCPU", "MaxRSS")
    out = remote.run(f"sacct -n -P -j {ids} -o {','.join(fields)}")
    steps: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in sacct_text.parse(out, fields, strict=False):
        job, sep, step = row["JobID"].partition(".")
        if sep:
            state = sacct_text.state(row["State"])
            steps.setdefault(job, []).append((step, state, row["TotalCPU"], row["MaxRSS"]))
    usage: dict[str, StepUsage] = {}
    for job, items in steps.items():
        settled = any(step == "batch" for step, *_ in items) and all(
            state in TERMINAL for _, state, _, _ in items
        )
        cpu = [parse_duration(t) for _, _, t, _ in items]
        rss = [(parse_size_bytes(r), r) for _, _, _, r in items]
        known = [(v, r) for v, r in rss if v is not None]
        usage[job] = StepUsage(
            settled,
            sum(c for c in cpu if c is not None) if any(c is not None for c in cpu) else None,
            max(known)[1] if known else None,
        )
    return usage


def parse_size_bytes(text: str) -> float | None:
    """sacct sizes (``1234K``, ``5M``, ``0``) in bytes; None when empty."""
    text = text.strip()
    if not text:
        return None
    units = {"K": 1024.0, "M": 1024.0**2, "G": 1024.0**3, "T": 1024.0**4}
    scale = units.get(text[-1].upper())
    try:
        return float(text[:-1]) * scale if scale else float(text)
    except ValueError:
        return None


def wait(
    remote: Remote,
    job_id: str,
    timeout: float = 1800,
    on_state: Callable[[str], None] | None = None,
    poll_s: float = 2,
) -> JobResult:
    """Wait for one job's end (sacct knows finished jobs; squeue only live ones)."""
    deadline = time.monotonic() + timeout
    state = "PENDING"
    while time.monotonic() < deadline:
        row = sacct(remote, [job_id]).get(job_id)
        if row:
            state = row["State"]
            if on_state:
                on_state(state)
            if state in TERMINAL:
                return JobResult(
                    job_id,
                    state,
                    row["ExitCode"],
                    float(row["ElapsedRaw"] or 0),
                    row["NodeList"],
                )
        time.sleep(poll_s)
    raise RemoteTimeout(
        f"{remote.host}: job {job_id} still {state} after {timeout:.0f}s",
        host=remote.host,
        command=f"sacct -j {job_id}",
        timeout_s=timeout,
    )
