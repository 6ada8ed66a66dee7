"""ResumeProgram, SuspendProgram and ResumeFailProgram of the scale harness: ptc's real Slurm
client (``SlurmElasticClient``) against the real manager, with a provisioner that emulates the
machines. Powering a node on starts a slurmd for it on loopback (``slurmd -N NAME``), which
registers with slurmctld as a booted machine would; powering off stops it.

    python -m benchmarks.scale.hook resume|suspend|resume-fail HOSTLIST
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.scale.cluster import PARTITION, Layout, slurmd_argv
from elastic.manager.client import ManagerClient
from elastic.policies import make_policy
from elastic.slurm.client import ClientConfig, NoProvisioner, SlurmElasticClient
from elastic.slurm.commands import Slurm, subprocess_runner


def log_event(run: Path, **entry: object) -> None:
    line = (json.dumps(entry, sort_keys=True) + "\n").encode()
    fd = os.open(run / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


BOOT_DELAY = 2.0


def booted_now() -> list[str]:
    """A time namespace whose boot clock starts now: Slurm 22.05 keeps a powering-up node
    waiting until its slurmd reports a boot later than the resume request, and a slurmd on
    this host would report the host's boot."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return ["unshare", "--time", "--fork", "--kill-child=SIGTERM",
            f"--boottime=-{int(uptime)}"]  # fmt: skip


class EmulatedMachines(NoProvisioner):
    """The provisioner: a machine is a slurmd process; nothing to configure, and the rest is
    what a pool that powers nothing does."""

    def __init__(self, layout: Layout, called: float) -> None:
        self.layout = layout
        self.called = called

    def power_on(self, nodes: Sequence[str]) -> None:
        env = self.layout.env(os.environ.get("PTC_SCALE_RUN", ""))
        # Slurm compares boot times in whole seconds: a boot in the second of the resume
        # request counts as before it, so the machines boot two seconds after the call.
        time.sleep(max(0.0, self.called + BOOT_DELAY - time.time()))
        for node in nodes:
            # slurmd makes its spool directory too late for its socket there
            (self.layout.run / "slurmd" / node).mkdir(parents=True, exist_ok=True)
            proc = subprocess.Popen(
                [*booted_now(), *slurmd_argv(self.layout, node)], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            self.layout.ledger.process(proc.pid, f"slurmd {node}")

    def power_off(self, nodes: Sequence[str]) -> None:
        for node in nodes:
            pidfile = self.layout.run / "slurmd" / f"{node}.pid"
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)

    def check(self) -> str:
        return "emulated machines: one slurmd process each"


def main(argv: list[str]) -> int:
    verb, hosts = argv[0], argv[1]
    called = time.time()
    run = Path(os.environ["PTC_SCALE_DIR"])
    setup = json.loads((run / "setup.json").read_text())
    layout = Layout(run, Path(setup["root"]), int(setup["nodes"]),
                    base_port=int(setup["base_port"]))  # fmt: skip
    log_event(run, event=f"{verb}-called", time=called, hostlist=hosts, pid=os.getpid())
    layout.ledger.process(os.getpid(), f"hook {verb}")
    token = Path(setup["token"]).read_text().strip()
    client = SlurmElasticClient(
        Slurm(subprocess_runner(timeout=300)),
        ManagerClient(setup["manager"], token, timeout=120, ca=setup["ca"]),
        make_policy(setup.get("policy", "LIFO")),
        provisioner=EmulatedMachines(layout, called),
        config=ClientConfig(partition=PARTITION, register_poll=0.5, register_timeout=540),
    )
    if verb == "resume":
        result = client.resume(hosts)
        log_event(run, event="resume-done", time=time.time(), hostlist=hosts,
                  ready=len(result.ready), failed=dict(list(result.failed.items())[:5]),
                  timings=result.timings)  # fmt: skip
    elif verb == "suspend":
        client.suspend(hosts)
    elif verb == "resume-fail":
        client.resume_failed(hosts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
