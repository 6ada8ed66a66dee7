"""Elastic partitions, measured on a live experiment (issue 10). Prints, asserts nothing:

1. Resume latency: ``sbatch`` of a job whose nodes are powered down, to the job's first line,
   for 1 and for 3 nodes; split with the client's own timings of that resume (manager =
   AddNodes, power on, playbook, slurmd registration) and what is left (slurmctld calling the
   ResumeProgram, and starting the job once the nodes registered).
2. Release latency: an idle node back in the pool after a job (SuspendTime + the suspend), and
   from a reclaim request to the nodes released, with idle and with busy nodes.
3. Live against simulated: the first 40 jobs of the HTC trace (runtimes / 60, ``sleep`` jobs,
   one node each, all queued at once as in the paper) on the pool with three reclamations at
   fixed times; each reclamation's live wasted cycles next to (a) the simulator's formula on
   the same live snapshot with the jobs' true remaining times and (b) the simulator's own
   schedule of the same jobs on a 4-node partition, at the same times.

    PTC_HOME=... .venv/bin/python benchmarks/elastic_latency.py NAME [--reps 3] [--skip-live]

NAME is a 1+4 experiment deployed with ``-e ptc_elastic=true`` (as in
tests/integration/test_elastic.py, whose short times it expects: SuspendTime 20 s, a PV every
5 s). Every node must start free and powered down.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from elastic.manager.remote import open_manager
from elastic.policies import JobInfo, LifoPolicy, Snapshot, select_nodes, wasted_cycles
from elastic.sim.schedule import simulate
from elastic.sim.traces.condor import load_condor_submit
from elastic.testbed import experiment as experiments

TRACE = Path(__file__).resolve().parents[2] / "shared/data/traces/htc-condor-1120.submit"
MARKS = "/home/ptc/elastic-bench"


class Exp:
    def __init__(self, name: str) -> None:
        exp = experiments.load(name)
        self.inventory = exp.inventory_path
        self.ssh_config = exp.ssh_config_path

    def sh(self, node: str, command: str) -> str:
        done = subprocess.run(
            ["ssh", "-F", str(self.ssh_config), node, command],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{node}: {command}: {done.stderr.strip()}")
        return done.stdout

    def manager(self) -> Any:
        return open_manager(self.inventory, self.ssh_config)

    def owners(self) -> dict[str, str | None]:
        with self.manager() as m:
            return {n["name"]: n["owner"] for n in m.discover()}

    def states(self) -> dict[str, str]:
        out = self.sh("head", "sinfo --noheader --Node --format='%N|%T'")
        return dict(line.strip().split("|", 1) for line in out.splitlines() if line.strip())

    def now(self) -> float:
        return float(self.sh("head", "date +%s.%N"))

    def sbatch(self, options: str, script: str) -> str:
        command = f"sbatch --parsable {options} --wrap {shlex.quote(script)}"
        out = self.sh("head", f"cd /home/ptc && runuser -u ptc -- sh -c {shlex.quote(command)}")
        return out.strip().split(";")[0]

    def job_state(self, job_id: str) -> str:
        out = self.sh("head", f"sacct -X -n -P -j {job_id} --format=State")
        return out.strip().splitlines()[-1] if out.strip() else ""


def wait_for(what: str, check: Callable[[], Any], timeout: float, poll: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(poll)
    raise RuntimeError(f"timed out waiting for {what}")


def pool_idle(exp: Exp) -> bool:
    states = exp.states()
    return set(exp.owners().values()) == {None} and all(s == "idle~" for s in states.values())


def resume_once(exp: Exp, nodes: int) -> dict[str, float]:
    wait_for("the pool to be free and powered down", lambda: pool_idle(exp), 300, 3)
    tag = f"r{time.time_ns()}"
    submitted = exp.now()
    job = exp.sbatch(f"-N{nodes} --exclusive", f"date +%s.%N > {MARKS}/{tag}")
    wait_for(f"job {job}", lambda: exp.job_state(job) == "COMPLETED", 300)
    started = float(exp.sh("head", f"cat {MARKS}/{tag}"))
    line = json.loads(exp.sh("head", "tail -n 1 /var/log/ptc-elastic/resume-timings.jsonl"))
    t = line["timings"]
    hook_start = line["time"] - t["total"]
    return {
        "total": started - submitted,
        "slurmctld to ResumeProgram": hook_start - submitted,
        "manager": t["manager"],
        "power on": t.get("power_on", 0.0),
        "playbook": t.get("playbook", 0.0),
        "slurmd registration": t.get("register", 0.0),
        "job start after registration": started - line["time"],
    }


def print_resume(reps: int, exp: Exp) -> None:
    for nodes in (1, 3):
        runs = [resume_once(exp, nodes) for _ in range(reps)]
        print(f"\nresume latency, {nodes} node(s), {reps} runs (median [min, max], seconds)")
        for key in runs[0]:
            values = [r[key] for r in runs]
            print(
                f"  {key:30s} {statistics.median(values):6.1f}  "
                f"[{min(values):5.1f}, {max(values):5.1f}]"
            )


def release_latency(exp: Exp) -> None:
    print("\nrelease latency")
    # idle node to pool: a 1-node job ends; SuspendTime later the node is suspended
    wait_for("the pool to be free and powered down", lambda: pool_idle(exp), 300, 3)
    job = exp.sbatch("-N1", "true")
    wait_for(f"job {job}", lambda: exp.job_state(job) == "COMPLETED", 300)
    ended = exp.now()
    wait_for("the node back in the pool", lambda: set(exp.owners().values()) == {None}, 300, 0.5)
    print(f"  idle node to pool (job end to DeleteNodes)       {exp.now() - ended:6.1f} s")
    # reclaim with idle nodes: a 2-node job ends, reclaim at once (within SuspendTime)
    wait_for("the pool to be free and powered down", lambda: pool_idle(exp), 300, 3)
    job = exp.sbatch("-N2", "true")
    wait_for(f"job {job}", lambda: exp.job_state(job) == "COMPLETED", 300)
    wait_for("a PV", lambda: _fresh_pv(exp, 2), 30, 0.5)
    print(f"  reclaim 2 idle nodes, GP 60 s: released in      {_reclaim(exp, 2, 60):6.1f} s")
    # reclaim with busy nodes: both run a long job; released at the deadline (requeued)
    wait_for("the pool to be free and powered down", lambda: pool_idle(exp), 300, 3)
    job = exp.sbatch("-N2 --exclusive", "sleep 600")
    wait_for(f"job {job} to run", lambda: exp.job_state(job) == "RUNNING", 300)
    wait_for("a PV", lambda: _fresh_pv(exp, 2), 30, 0.5)
    print(f"  reclaim 2 busy nodes, GP 20 s: released in      {_reclaim(exp, 2, 20):6.1f} s")
    exp.sh("head", f"scancel {job}")


def _fresh_pv(exp: Exp, count: int) -> bool:
    with exp.manager() as m:
        part = next(p for p in m.status()["partitions"] if p["name"] == "slurm")
    return bool(part["pv"]) and len(part["nodes"]) >= count and part["pv"]["age"] < 6


def _reclaim(exp: Exp, count: int, grace: float) -> float:
    with exp.manager() as m:
        rec = m.reclaim("slurm", count, grace)
        done = wait_for(
            "the reclamation",
            lambda: (r := m.reclamation(rec["id"]))["state"] == "done" and r,
            grace + 120,
            0.5,
        )
    return float(max([*done["released"].values(), done["finished_at"]]) - done["requested_at"])


def live_vs_sim(exp: Exp, at: tuple[float, ...], count: int, grace: float) -> None:
    trace = load_condor_submit(TRACE)
    runtimes = np.maximum(np.round(np.asarray(trace.runtime[:40], dtype=float) / 60.0), 1.0)
    print(
        f"\nlive against simulated: 40 HTC jobs, runtimes / 60 (sum {runtimes.sum():.0f} s), "
        f"reclamations of {count} node(s) with GP {grace:.0f} s at {list(at)} s"
    )
    wait_for("the pool to be free and powered down", lambda: pool_idle(exp), 300, 3)
    with exp.manager() as m:
        first_event = len(m.events(0, 100000))
    t0 = exp.now()
    script = "; ".join(
        f"sbatch --parsable -N1 --exclusive -J htc{i} --wrap 'sleep {int(r)}'"
        for i, r in enumerate(runtimes)
    )
    ids = exp.sh("head", f"cd /home/ptc && runuser -u ptc -- sh -c {shlex.quote(script)}").split()
    by_id = {job_id.split(";")[0]: float(r) for job_id, r in zip(ids, runtimes, strict=True)}
    recs = []
    for offset in at:
        time.sleep(max(0.0, t0 + offset - exp.now()))
        wait_for("a PV", lambda: _fresh_pv(exp, count), 30, 0.5)
        with exp.manager() as m:
            recs.append(m.reclaim("slurm", count, grace)["id"])
    wait_for(
        "every job to complete",
        lambda: all(exp.job_state(j) == "COMPLETED" for j in by_id),
        1800,
        5,
    )
    with exp.manager() as m:
        log = m.events(first_event, 100000)
    sched = simulate(np.zeros(40), runtimes, runtimes, np.ones(40, dtype=np.int64), 4)
    print(
        f"  {'rec':4s} {'t (s)':>6s} {'live WC':>9s} {'formula on live':>16s} {'sim WC':>8s}  killed"
    )
    for rec_id in recs:
        started = next(
            e
            for e in log
            if e["kind"] == "reclamation-started" and e["data"]["reclamation"] == rec_id
        )
        finished = next(
            e
            for e in log
            if e["kind"] == "reclamation-finished" and e["data"]["reclamation"] == rec_id
        )
        d = started["data"]
        t_rec = started["time"]
        shift = t_rec - d["pv"]["time"]
        jobs = tuple(
            JobInfo(
                j["job_id"], tuple(j["nodes"]), j["elapsed"] + shift,
                remaining=by_id.get(j["job_id"], 0.0) - (j["elapsed"] + shift),
            )
            for j in d["pv"]["jobs"]
        )  # fmt: skip
        live_snap = Snapshot(t_rec, tuple(d["pv"]["values"]), jobs)
        formula = wasted_cycles(live_snap, d["chosen"], grace).total
        sim_wc = _sim_wc(sched, runtimes, t_rec - t0, count, grace)
        killed = ",".join(j["job_id"] for j in finished["data"]["jobs_killed"]) or "-"
        print(
            f"  {rec_id:4s} {t_rec - t0:6.0f} {finished['data']['wasted_cycles']:9.0f} "
            f"{formula:16.0f} {sim_wc:8.0f}  {killed}"
        )


def _sim_wc(sched: Any, runtimes: np.ndarray, t: float, count: int, grace: float) -> float:
    """The simulator's own answer at time t: its schedule of the same jobs on 4 nodes (all
    queued at 0, EASY), LIFO, the P lowest-valued nodes, WC by the same formula."""
    nodes = [f"n{i}" for i in range(4)]
    jobs = []
    for i in range(len(runtimes)):
        if sched.start[i] <= t < sched.end[i]:
            on = tuple(nodes[int(k)] for k in sched.nodes_of(i))
            jobs.append(JobInfo(str(i), on, t - sched.start[i], remaining=sched.end[i] - t))
    snap = Snapshot(t, tuple(nodes), tuple(jobs))
    chosen = select_nodes(LifoPolicy().evaluate(snap), count)
    return wasted_cycles(snap, chosen, grace).total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="a 1+4 experiment deployed with -e ptc_elastic=true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-live", action="store_true")
    args = parser.parse_args()
    exp = Exp(args.name)
    exp.sh("head", f"install -d -o ptc -g ptc {MARKS}")
    if not args.skip_latency:
        print_resume(args.reps, exp)
        release_latency(exp)
    if not args.skip_live:
        live_vs_sim(exp, at=(40.0, 80.0, 120.0), count=1, grace=10.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
