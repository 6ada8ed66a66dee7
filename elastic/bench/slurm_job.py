"""Submitting a batch job through Slurm on a cluster's controller and waiting for its end.

Everything goes over SSH to the controller with the experiment's ssh_config, so the same code
runs against the local testbed and CloudLab.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from elastic.errors import PtcError

TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}


@dataclass(frozen=True)
class Remote:
    ssh_config: Path
    host: str

    def run(self, command: str, stdin: str | None = None, timeout: float = 300) -> str:
        proc = subprocess.run(
            ["ssh", "-F", str(self.ssh_config), self.host, command],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise PtcError(
                f"{self.host}: `{command}` failed ({proc.returncode}): {proc.stderr.strip()}"
            )
        return proc.stdout


@dataclass(frozen=True)
class JobResult:
    job_id: str
    state: str
    exit_code: str
    elapsed_s: float
    nodelist: str


def as_user(user: str, command: str) -> str:
    return f"runuser -u {shlex.quote(user)} -- sh -c {shlex.quote(command)}"


def submit(remote: Remote, user: str, workdir: str, script: str) -> str:
    command = f"sbatch --parsable --chdir={shlex.quote(workdir)}"
    out = remote.run(as_user(user, command), stdin=script).strip()
    job_id = out.split(";")[0]
    if not job_id.isdigit():
        raise PtcError(f"sbatch did not return a job id: {out!r}")
    return job_id


def wait(
    remote: Remote,
    job_id: str,
    timeout: float = 1800,
    on_state: Callable[[str], None] | None = None,
) -> JobResult:
    deadline = time.monotonic() + timeout
    state = "PENDING"
    while time.monotonic() < deadline:
        # sacct knows finished jobs (accounting); squeue only running ones.
        line = (
            remote.run(f"sacct -j {job_id} -X -n -P -o State,ExitCode,ElapsedRaw,NodeList")
            .strip()
            .splitlines()
        )
        if line:
            state, exit_code, elapsed, nodelist = line[0].split("|")
            state = state.split()[0]
            if on_state:
                on_state(state)
            if state in TERMINAL:
                return JobResult(job_id, state, exit_code, float(elapsed or 0), nodelist)
        time.sleep(2)
    raise PtcError(f"job {job_id} still {state} after {timeout:.0f}s")
