"""The elastic loop under chaos, on a live elastic experiment: a stream of jobs, resumes and
reclamations while slurmctld, the manager, the Slurm client and the testbed's control service are
killed at random points; then the invariants. Prints, asserts nothing; exits 1 when an invariant
is violated.

    PTC_HOME=... .venv/bin/python benchmarks/chaos.py NAME [--minutes 12] [--jobs 30]
        [--kills 8] [--seed 1] [--out benchmarks/results/chaos]

NAME is an elastic experiment deployed as tests/integration/test_elastic.py deploys it (short
intervals: SuspendTime 20 s, a repair round every 20 s), its pool at rest. Bounded: jobs are
submitted and faults injected during ``--minutes``; then the run waits (at most
``--settle-minutes``) for the jobs to end and the pool to settle, and stops by itself.

- Jobs: ``--jobs`` batch jobs (``--requeue``, 1 to 3 nodes, 10 to 60 s of sleep) at random times,
  as the user ``ptc``; a submission slurmctld refuses (it is down) is tried again.
- Reclamations: every 60 to 120 s the reference partition acquires one node with a grace of 10 s
  and gives it back 20 to 40 s later: the preemption-vector protocol with jobs requeued.
- Faults: ``--kills`` SIGKILLs at random times, each of slurmctld, the manager or the Slurm
  client (systemd restarts them: ``Restart=on-failure``) or the control service on this host,
  which has no init system: ``ptc`` commands start it again when it is dead, and this run does
  so after ``--control-down`` seconds, as an operator's next command would.

Invariants, checked after the run:

- every job submitted completed (``sacct``: COMPLETED), however often it was requeued;
- no node held by two owners: at no sample did the manager give a node to the reference
  partition while Slurm ran a job on it for longer than ``--overlap-bound`` seconds (a forced
  reclamation hands the node over at its deadline and the Slurm client ends the jobs within its
  round);
- no machine runs without a node: once settled, every running machine is a node Slurm counts
  powered up;
- every pool node back in service (not DOWN or drained) and no partition left protected;
- ``ptc elastic reconcile NAME`` reports nothing.

With ``--out`` it writes results.json and chaos.png (jobs over time, the kills marked).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repair_times import Exp, wait

from elastic.atomic import write_text
from elastic.bench.plot import save_png
from elastic.errors import PtcError
from elastic.manager.client import ReferenceClient
from elastic.manager.workstation import open_manager
from elastic.testbed import experiment as experiments
from elastic.testbed import nodeops
from elastic.testbed.backends.local.control import service as control

TARGETS = ("slurmctld", "manager", "slurm-client", "control")
UNITS = {
    "slurmctld": "slurmctld",
    "manager": "ptc-elastic-manager",
    "slurm-client": "ptc-elastic-slurm-client",
}
PARTITION = "slurm"
REFERENCE = "ref"
IN_USE = ("allocated", "mixed", "completing")


@dataclass
class Run:
    """What the run saw, appended to by its threads (lists append atomically)."""

    start: float = field(default_factory=time.time)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    refused_submissions: int = 0
    kills: list[dict[str, Any]] = field(default_factory=list)
    reclamations: list[dict[str, Any]] = field(default_factory=list)
    reclaim_errors: list[str] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    overlaps: dict[str, list[float]] = field(default_factory=dict)
    protections: list[dict[str, Any]] = field(default_factory=list)

    def t(self) -> float:
        return round(time.time() - self.start, 1)


class Chaos:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.exp = Exp(args.name)
        self.experiment = experiments.load(args.name)
        self.rng = random.Random(args.seed)
        self.run = Run()
        self.stop = threading.Event()
        self.until = self.run.start + args.minutes * 60

    # -- the stream of jobs -------------------------------------------------------------------
    def submit(self, i: int) -> None:
        nodes = self.rng.choice((1, 1, 1, 2, 3))
        seconds = self.rng.randint(10, 60)
        cmd = (
            f"sbatch --parsable --requeue -N{nodes} --job-name=chaos "
            f"--output=/dev/null --wrap 'sleep {seconds}'"
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                out = self.exp.sh("head", f'su - ptc -c "{cmd}"')
            except PtcError:
                self.run.refused_submissions += 1
                time.sleep(3)
                continue
            job = out.strip().split(";")[0]
            self.run.jobs.append(
                {"id": job, "nodes": nodes, "seconds": seconds, "at": self.run.t()}
            )
            print(f"[{self.run.t():6.0f}] job {job}: {nodes} node(s), {seconds} s", flush=True)
            return
        print(f"[{self.run.t():6.0f}] job chaos-{i}: never accepted", flush=True)

    def jobs(self) -> None:
        times = sorted(self.rng.uniform(0, self.args.minutes * 60) for _ in range(self.args.jobs))
        for i, at in enumerate(times):
            if self._sleep_until(self.run.start + at):
                return
            self.submit(i)

    # -- reclamations -------------------------------------------------------------------------
    def reclaims(self) -> None:
        while not self._sleep_until(time.time() + self.rng.uniform(60, 120)):
            if time.time() > self.until:
                return
            hold = self.rng.uniform(20, 40)
            at = self.run.t()
            try:
                with open_manager(self.exp.inventory, self.exp.ssh_config, REFERENCE) as m:
                    got = ReferenceClient(m, REFERENCE).acquire(1, grace=10, wait=70)
                nodes = list(got.nodes)
                print(f"[{at:6.0f}] reference holds {', '.join(nodes) or 'nothing'}", flush=True)
                self._sleep_until(time.time() + hold)
                self.give_back()
                self.run.reclamations.append({"at": at, "nodes": nodes, "until": self.run.t()})
            except PtcError as err:
                self.run.reclaim_errors.append(f"{at:.0f} s: {err}")
                print(f"[{at:6.0f}] reclamation refused: {err}", flush=True)

    def give_back(self, tries: int = 40) -> None:
        """Everything the reference partition holds, back to the pool (retried: the manager
        may be down)."""
        for _ in range(tries):
            try:
                with open_manager(self.exp.inventory, self.exp.ssh_config, REFERENCE) as m:
                    ref = ReferenceClient(m, REFERENCE)
                    if held := ref.held():
                        ref.release(held)
                return
            except PtcError as err:
                self.run.reclaim_errors.append(f"{self.run.t():.0f} s: give back: {err}")
                time.sleep(5)

    # -- faults -------------------------------------------------------------------------------
    def faults(self) -> None:
        span = self.args.minutes * 60
        times = sorted(self.rng.uniform(0.1 * span, 0.9 * span) for _ in range(self.args.kills))
        for at in times:
            if self._sleep_until(self.run.start + at):
                return
            target = self.rng.choice(TARGETS)
            self.kill(target)

    def kill(self, target: str) -> None:
        at = self.run.t()
        record: dict[str, Any] = {"at": at, "target": target}
        try:
            if target == "control":
                places = control.Places.of(self.experiment)
                pid = int(places.pid_file.read_text().strip())
                os.kill(pid, signal.SIGKILL)
                time.sleep(self.args.control_down)
                control.start(self.experiment)
            else:
                unit = UNITS[target]
                # the main process only, as a crash: what it started is systemd's to handle
                self.exp.sh("head", f"systemctl kill --kill-who=main --signal=KILL {unit}")
                wait(
                    f"{unit} back",
                    lambda: (
                        self.exp.sh("head", f"systemctl is-active {unit} || true").strip()
                        == "active"
                    ),
                    120,
                    1,
                )
            record["back_after"] = round(time.time() - self.run.start - at, 1)
        except (PtcError, OSError, ValueError, TimeoutError) as err:
            record["error"] = str(err)
        self.run.kills.append(record)
        back = record.get("back_after", "never")
        print(f"[{at:6.0f}] killed {target}; back after {back} s", flush=True)

    # -- samples ------------------------------------------------------------------------------
    def nodes(self) -> dict[str, tuple[str, str]]:
        out = self.exp.sh("head", "sinfo --noheader --Node --format='%N|%T|%E'")
        found = {}
        for line in out.splitlines():
            node, state, reason = [*line.strip().split("|"), "", ""][:3]
            if node:
                found[node] = (state, "" if reason == "none" else reason)
        return found

    def owners(self) -> dict[str, str | None]:
        with open_manager(self.exp.inventory, self.exp.ssh_config) as m:
            return {n["name"]: n.get("owner") for n in m.discover()}

    def machines(self) -> dict[str, str]:
        """Each pool machine's power, as the testbed sees it."""
        return {n: s for n, s in nodeops.states(self.experiment).items() if n != "head"}

    def sample(self) -> None:
        at = self.run.t()
        row: dict[str, Any] = {"at": at}
        try:
            queue = self.exp.sh("head", "squeue --noheader --name=chaos -o %T 2>/dev/null; true")
            row["running"] = queue.split().count("RUNNING")
            row["pending"] = queue.split().count("PENDING")
        except PtcError:
            row["slurm"] = "unreachable"
        try:
            nodes, owners = self.nodes(), self.owners()
            row["up"] = sum(1 for s, _ in nodes.values() if "~" not in s and "#" not in s)
            for node, (state, _) in nodes.items():
                if owners.get(node) == REFERENCE and state.rstrip("*~#%!@$^-") in IN_USE:
                    self.run.overlaps.setdefault(node, []).append(at)
        except PtcError:
            row["manager"] = "unreachable"
        self.run.samples.append(row)

    def sampler(self) -> None:
        while not self.stop.wait(5):
            self.sample()

    def _sleep_until(self, when: float) -> bool:
        """Sleep until ``when``; True if the run is stopping."""
        return self.stop.wait(max(0.0, when - time.time()))


def longest_overlap(times: list[float], gap: float = 12.0) -> float:
    """The longest run of samples (each within ``gap`` seconds of the last) of one node held by
    the reference partition while in use by Slurm."""
    longest, first, last = 0.0, None, None
    for t in times:
        if last is None or t - last > gap:
            first = t
        last = t
        assert first is not None
        longest = max(longest, last - first)
    return longest


def final_states(exp: Exp, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each job's last state and how many times it ran (``sacct --duplicates``)."""
    out = exp.sh("head", f"sacct --noheader --parsable2 --allocations --duplicates "
                         f"--format=JobID,State --jobs={','.join(ids)}")  # fmt: skip
    jobs: dict[str, dict[str, Any]] = {}
    for line in out.splitlines():
        job, _, state = line.strip().partition("|")
        if job in ids:
            entry = jobs.setdefault(job, {"runs": 0})
            entry["runs"] += 1
            entry["state"] = state.split()[0]
    return jobs


def unprotect(chaos: Chaos) -> None:
    """End the partition's protected mode if the faults put it there (as its operator would,
    with `ptc elastic unprotect`), recording why it was."""
    exp = chaos.exp
    with open_manager(exp.inventory, exp.ssh_config) as m:
        protection = m.protection(PARTITION)
        if protection.get("protected"):
            chaos.run.protections.append({"at": chaos.run.t(), "reason": protection.get("reason")})
            print(f"[{chaos.run.t():6.0f}] protected mode ended: {protection.get('reason')}")
            m.unprotect(PARTITION)


def settle(chaos: Chaos, minutes: float) -> list[str]:
    """Wait for the jobs to end and the pool to rest; what did not happen in time."""
    exp, late = chaos.exp, []

    def ended() -> bool:
        unprotect(chaos)
        return not exp.sh("head", "squeue --noheader --name=chaos -o %i").strip()

    try:
        wait("the jobs to end", ended, minutes * 60, 10)
    except TimeoutError as err:
        late.append(str(err))
    pool = [n for n in chaos.owners() if n != "head"]

    def at_rest() -> bool:
        states = chaos.nodes()
        return all(states.get(n, ("", ""))[0] == "idle~" for n in pool)

    try:
        wait("the pool at rest", at_rest, 600, 10)
    except TimeoutError as err:
        late.append(f"{err}: {chaos.nodes()}")
    return late


def check(chaos: Chaos, bound: float) -> dict[str, Any]:
    exp, run = chaos.exp, chaos.run
    ids = [j["id"] for j in run.jobs]
    states = final_states(exp, ids) if ids else {}
    violations: list[str] = []
    for job in ids:
        state = states.get(job, {}).get("state", "unknown")
        if state != "COMPLETED":
            violations.append(f"job {job}: {state}")
    for node, times in sorted(run.overlaps.items()):
        if (longest := longest_overlap(times)) > bound:
            violations.append(f"{node}: held by {REFERENCE} while Slurm ran a job, {longest:.0f} s")
    slurm = chaos.nodes()
    machines = chaos.machines()
    for node, power in sorted(machines.items()):
        state = slurm.get(node, ("", ""))[0]
        if power == "running" and (not state or "~" in state):
            violations.append(f"{node}: its machine runs, Slurm counts it {state or 'unknown'}")
    for node, (state, reason) in sorted(slurm.items()):
        if state.startswith(("down", "drain")):
            violations.append(f"{node}: {state} ({reason}) after the run")
    rec = subprocess.run(
        [sys.executable, "-m", "elastic.cli", "elastic", "reconcile", exp.name, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        found = json.loads(rec.stdout)["found"]
    except (ValueError, KeyError):
        found = [f"reconcile failed (exit {rec.returncode}): {rec.stderr[-400:]}"]
    violations += [f"reconcile: {d}" for d in found]
    runs = [s.get("runs", 0) for s in states.values()]
    return {
        "jobs": len(ids),
        "completed": sum(1 for s in states.values() if s.get("state") == "COMPLETED"),
        "requeued": sum(1 for r in runs if r > 1),
        "runs": sum(runs),
        "violations": violations,
        "longest_overlap": {n: longest_overlap(t) for n, t in sorted(run.overlaps.items())},
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = [s for s in result["samples"] if "running" in s]
    fig, ax = plt.subplots(figsize=(11, 3.8))
    ax.step([s["at"] for s in samples], [s["running"] for s in samples], where="post",
            label="jobs running", color="#336633")  # fmt: skip
    ax.step([s["at"] for s in samples], [s["pending"] for s in samples], where="post",
            label="jobs pending", color="#bbbbbb")  # fmt: skip
    up = [s for s in result["samples"] if "up" in s]
    ax.step([s["at"] for s in up], [s["up"] for s in up], where="post", label="nodes powered up",
            color="#6699cc", linestyle="--")  # fmt: skip
    colours = dict(zip(TARGETS, ("#cc3333", "#cc8833", "#8833cc", "#333333"), strict=True))
    for target in TARGETS:
        times = [k["at"] for k in result["kills"] if k["target"] == target]
        if times:
            ax.vlines(times, 0, 1, transform=ax.get_xaxis_transform(), colors=colours[target],
                      linestyles=":", label=f"{target} killed")  # fmt: skip
    for r in result["reclamations"]:
        ax.axvspan(r["at"], r["until"], color="#ffdd88", alpha=0.3, lw=0)
    ax.set_xlabel("seconds from the start (shaded: a node held by the reference partition)")
    ax.set_ylabel("count")
    ax.set_title(f"Chaos run: {result['jobs']} jobs, {len(result['kills'])} kills, "
                 f"invariant violations: {len(result['violations'])}")  # fmt: skip
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--control-down", type=float, default=20.0)
    parser.add_argument("--overlap-bound", type=float, default=60.0)
    parser.add_argument("--settle-minutes", type=float, default=20.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    for name in ("minutes", "jobs", "kills", "control_down", "settle_minutes"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')}: must not be negative")
    chaos = Chaos(args)
    restart = chaos.exp.sh("head", "systemctl show slurmctld --property=Restart --value").strip()
    if restart != "on-failure":
        parser.error(f"{args.name}: slurmctld's Restart= is {restart!r}: deploy it again first")
    print(f"{args.name}: waiting for the pool at rest", flush=True)
    wait("the pool at rest", lambda: all(s == "idle~" for s, _ in chaos.nodes().values()
                                         if s), 600, 5)  # fmt: skip
    threads = [
        threading.Thread(target=f, daemon=True, name=f.__name__)
        for f in (chaos.jobs, chaos.reclaims, chaos.faults, chaos.sampler)
    ]
    for th in threads:
        th.start()
    try:
        for th in threads[:3]:
            th.join()
    except KeyboardInterrupt:
        # leave the experiment as it was found: no job of the run, no node held for it, and the
        # control service running (a kill may have been waiting to start it again)
        print("interrupted: cancelling the run's jobs, giving nodes back", flush=True)
        chaos.stop.set()
        chaos.exp.sh("head", "scancel --name=chaos; true")
        chaos.give_back()
        control.start(chaos.experiment)
        return 130
    print(f"[{chaos.run.t():6.0f}] stream and faults over; settling", flush=True)
    late = settle(chaos, args.settle_minutes)
    chaos.stop.set()
    threads[3].join()
    result = check(chaos, args.overlap_bound)
    result["violations"] = late + result["violations"]
    result |= {
        "seed": args.seed,
        "minutes": args.minutes,
        "refused_submissions": chaos.run.refused_submissions,
        "kills": chaos.run.kills,
        "reclamations": chaos.run.reclamations,
        "reclaim_errors": chaos.run.reclaim_errors,
        "protected_mode_ended": chaos.run.protections,
        "samples": chaos.run.samples,
        "seconds": chaos.run.t(),
    }
    by_target = {t: sum(1 for k in chaos.run.kills if k["target"] == t) for t in TARGETS}
    print(f"\njobs {result['jobs']}: completed {result['completed']}, requeued "
          f"{result['requeued']} ({result['runs']} runs in all); refused submissions "
          f"{result['refused_submissions']}")  # fmt: skip
    print(f"kills {len(chaos.run.kills)}: " + ", ".join(f"{t} {n}" for t, n in by_target.items()))
    print(f"reclamations {len(chaos.run.reclamations)} (errors {len(chaos.run.reclaim_errors)})")
    print(f"protected mode ended by the run: {len(chaos.run.protections)} time(s)")
    print(f"violations {len(result['violations'])}")
    for v in result["violations"]:
        print(f"  {v}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text(args.out / "results.json", json.dumps(result, indent=1) + "\n")
        plot(result, args.out / "chaos.png")
        print(f"wrote {args.out}/results.json and chaos.png")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
