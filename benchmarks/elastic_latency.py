"""Elastic partitions, measured on a live experiment. Prints, asserts nothing:

1. Resume latency: ``sbatch`` of a job whose nodes are powered down, to the job's first line,
   for 1 and for 3 nodes; split with the client's own timings of that resume (manager =
   AddNodes, power on, playbook, slurmd registration) and what is left (slurmctld calling the
   ResumeProgram, and starting the job once the nodes registered).
2. Release latency: an idle node back in the pool after a job (SuspendTime + the suspend), and
   from a reclaim request to the nodes released, with idle and with busy nodes.
3. Live against simulated: the first 40 jobs of the HTC trace (runtimes / 60, ``sleep`` jobs,
   one node each, all queued at once as in the paper) on the pool with three reclamations at
   fixed times; each reclamation's live wasted cycles (the manager's event log) next to
   (a) the simulator's formula (``elastic.policies.wasted_cycles``) on the same live snapshot,
   the PV the manager chose from, with each job's true remaining time (its ``sleep`` less its
   elapsed time), and (b) the simulator's own schedule (``elastic.sim.schedule.simulate``) of
   the same jobs on a 4-node partition, at the same times, LIFO, the same formula.

    PTC_HOME=... .venv/bin/python benchmarks/elastic_latency.py NAME [--reps 3] \\
        [--out benchmarks/results/elastic_latency] [--skip-latency] [--skip-live]

NAME is a 1+4 experiment deployed with ``-e ptc_elastic=true`` (as in
tests/integration/test_elastic.py, whose short times it expects: SuspendTime 20 s,
SuspendTimeout 15 s, a PV every 5 s). Every node must start free and powered down. With
``--out`` it writes results.json, results.md and PNG figures there.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from elastic import node_paths
from elastic.atomic import write_bytes, write_text
from elastic.manager.workstation import open_manager
from elastic.policies import JobInfo, LifoPolicy, Snapshot, select_nodes, wasted_cycles
from elastic.remote import ssh
from elastic.sim.schedule import Schedule, simulate
from elastic.sim.traces import public
from elastic.sim.traces.condor import load_condor_submit
from elastic.testbed import experiment as experiments

TRACES = Path(__file__).resolve().parents[2] / "shared/data/traces"  # else ptc sim fetch's cache
MARKS = "/home/ptc/elastic-bench"
NODES = ("node-0", "node-1", "node-2", "node-3")
RESUME_PARTS = (
    "slurmctld to ResumeProgram",
    "manager",
    "power on",
    "playbook",
    "slurmd registration",
    "job start after registration",
)


class Exp:
    def __init__(self, name: str) -> None:
        exp = experiments.load(name)
        self.name = name
        self.inventory = exp.inventory_path
        self.ssh_config = exp.ssh_config_path

    def sh(self, node: str, command: str) -> str:
        """``command``'s output on ``node``, through the library's SSH seam."""
        return ssh.run(self.ssh_config, node, command, timeout=600)

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

    def job_states(self, job_ids: list[str]) -> dict[str, str]:
        out = self.sh("head", f"sacct -X -n -P -j {','.join(job_ids)} --format=JobID,State")
        states = {}
        for line in out.splitlines():
            job_id, _, state = line.partition("|")
            states[job_id.strip()] = state.strip()
        return states

    def job_state(self, job_id: str) -> str:
        return self.job_states([job_id]).get(job_id, "")

    def events(self, since: int = 0) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        with self.manager() as m:
            while page := m.events(since + len(found), 10000):  # the API's largest page
                found += page
        return found


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


def wait_pool_idle(exp: Exp) -> None:
    wait_for("the pool to be free and powered down", lambda: pool_idle(exp), 300, 3)


# -- 1. resume latency ----------------------------------------------------------------------
def resume_once(exp: Exp, nodes: int) -> dict[str, float]:
    wait_pool_idle(exp)
    tag = f"r{time.time_ns()}"
    submitted = exp.now()
    job = exp.sbatch(f"-N{nodes} --exclusive", f"date +%s.%N > {MARKS}/{tag}")
    wait_for(f"job {job}", lambda: exp.job_state(job) == "COMPLETED", 300)
    started = float(exp.sh("head", f"cat {MARKS}/{tag}"))
    line = json.loads(exp.sh("head", f"tail -n 1 {node_paths.RESUME_TIMINGS}"))
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


def resume_latency(exp: Exp, reps: int) -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {}
    for nodes in (1, 3):
        runs = [resume_once(exp, nodes) for _ in range(reps)]
        out[str(nodes)] = runs
        print(f"\nresume latency, {nodes} node(s), {reps} runs (median [min, max], seconds)")
        for key in runs[0]:
            values = [r[key] for r in runs]
            print(
                f"  {key:30s} {statistics.median(values):6.1f}  "
                f"[{min(values):5.1f}, {max(values):5.1f}]"
            )
    return out


# -- 2. release latency ---------------------------------------------------------------------
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


def release_latency(exp: Exp) -> dict[str, float]:
    print("\nrelease latency")
    out: dict[str, float] = {}
    # idle node to pool: a 1-node job ends; SuspendTime later the node is suspended
    wait_pool_idle(exp)
    job = exp.sbatch("-N1", "true")
    wait_for(f"job {job}", lambda: exp.job_state(job) == "COMPLETED", 300)
    ended = exp.now()
    wait_for("the node back in the pool", lambda: set(exp.owners().values()) == {None}, 300, 0.5)
    out["idle node to pool (job end to DeleteNodes)"] = exp.now() - ended
    # reclaim with idle nodes: a 2-node job ends, reclaim at once (within SuspendTime)
    wait_pool_idle(exp)
    job = exp.sbatch("-N2", "true")
    wait_for(f"job {job}", lambda: exp.job_state(job) == "COMPLETED", 300)
    wait_for("a PV", lambda: _fresh_pv(exp, 2), 30, 0.5)
    out["reclaim 2 idle nodes, GP 60 s"] = _reclaim(exp, 2, 60)
    # reclaim with busy nodes: both run a long job; released at the deadline (requeued)
    wait_pool_idle(exp)
    job = exp.sbatch("-N2 --exclusive", "sleep 600")
    wait_for(f"job {job} to run", lambda: exp.job_state(job) == "RUNNING", 300)
    wait_for("a PV", lambda: _fresh_pv(exp, 2), 30, 0.5)
    out["reclaim 2 busy nodes, GP 20 s"] = _reclaim(exp, 2, 20)
    exp.sh("head", f"scancel {job}")
    for key, value in out.items():
        print(f"  {key:45s} {value:6.1f} s")
    return out


# -- 3. live against simulated --------------------------------------------------------------
def _sacct_runs(exp: Exp, job_ids: list[str]) -> list[dict[str, Any]]:
    """Every run of the jobs (requeued ones more than once): id, node, start, end, state."""
    out = exp.sh(
        "head",
        f"SLURM_TIME_FORMAT=%s sacct -X -D -n -P -j {','.join(job_ids)} "
        "--format=JobID,NodeList,Start,End,State",
    )
    runs = []
    for line in out.splitlines():
        job_id, node, start, end, state = line.split("|")
        if start in ("Unknown", "None") or end in ("Unknown", "None") or node == "None assigned":
            continue
        runs.append(
            {
                "job_id": job_id,
                "node": node,
                "start": float(start),
                "end": float(end),
                "state": state.split()[0],
            }
        )
    return runs


def live_vs_sim(
    exp: Exp, at: tuple[float, ...], count: int, grace: float, jobs: int
) -> dict[str, Any]:
    trace = load_condor_submit(public.locate("htc-condor", TRACES))
    runtimes = np.maximum(np.round(np.asarray(trace.runtime[:jobs], dtype=float) / 60.0), 1.0)
    print(
        f"\nlive against simulated: {jobs} HTC jobs, runtimes / 60 (sum {runtimes.sum():.0f} s), "
        f"reclamations of {count} node(s) with GP {grace:.0f} s at {list(at)} s"
    )
    wait_pool_idle(exp)
    first_event = len(exp.events())
    t0 = exp.now()
    script = "; ".join(
        f"sbatch --parsable -N1 --exclusive -J htc{i} --wrap 'sleep {int(r)}'"
        for i, r in enumerate(runtimes)
    )
    ids = exp.sh("head", f"cd /home/ptc && runuser -u ptc -- sh -c {shlex.quote(script)}").split()
    ids = [job_id.split(";")[0] for job_id in ids]
    by_id = {job_id: float(r) for job_id, r in zip(ids, runtimes, strict=True)}
    recs = []
    for offset in at:
        time.sleep(max(0.0, t0 + offset - exp.now()))
        wait_for("a PV", lambda: _fresh_pv(exp, count), 30, 0.5)
        with exp.manager() as m:
            recs.append(m.reclaim("slurm", count, grace)["id"])
    wait_for(
        "every job to complete",
        lambda: all(s == "COMPLETED" for s in exp.job_states(ids).values()),
        1800,
        5,
    )
    log = exp.events(first_event)
    runs = _sacct_runs(exp, ids)
    sched = simulate(np.zeros(jobs), runtimes, runtimes, np.ones(jobs, dtype=np.int64), len(NODES))
    rows = []
    print(
        f"  {'rec':4s} {'t (s)':>6s} {'live WC':>9s} {'formula on live':>16s} {'sim WC':>8s}"
        "  chosen  killed (live)  killed (sim)"
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
        requeued = [
            j["job_id"]
            for e in log
            if e["kind"] == "jobs-requeued" and e["data"]["reclamation"] == rec_id
            for j in e["data"]["jobs"]
        ]
        d = started["data"]
        t_rec = started["time"]
        shift = t_rec - d["pv"]["time"]
        live_jobs = tuple(
            JobInfo(
                j["job_id"], tuple(j["nodes"]), j["elapsed"] + shift,
                remaining=by_id.get(j["job_id"], 0.0) - (j["elapsed"] + shift),
            )
            for j in d["pv"]["jobs"]
        )  # fmt: skip
        live_snap = Snapshot(t_rec, tuple(d["pv"]["values"]), live_jobs)
        formula = wasted_cycles(live_snap, d["chosen"], grace)
        sim_wc, sim_chosen, sim_killed = _sim_wc(sched, t_rec - t0, count, grace)
        killed = [j["job_id"] for j in finished["data"]["jobs_killed"]]
        row = {
            "reclamation": rec_id,
            "t": t_rec - t0,
            "pv_age": shift,
            "chosen": d["chosen"],
            "live_wasted_cycles": finished["data"]["wasted_cycles"],
            "live_killed": killed,
            "live_requeued": requeued,
            "formula_on_live": formula.total,
            "formula_killed": sorted(j for j, w in formula.per_job.items() if w > 0),
            "running_at_reclaim": len(live_jobs),
            "sim_wasted_cycles": sim_wc,
            "sim_chosen": sim_chosen,
            "sim_killed": sim_killed,
        }
        rows.append(row)
        print(
            f"  {rec_id:4s} {row['t']:6.0f} {row['live_wasted_cycles']:9.0f} "
            f"{formula.total:16.0f} {sim_wc:8.0f}  {','.join(d['chosen'])}  "
            f"{','.join(killed) or '-'}  {','.join(sim_killed) or '-'}"
        )
    live_makespan = max(r["end"] for r in runs) - t0 if runs else float("nan")
    print(f"  makespan: live {live_makespan:.0f} s, simulated {sched.makespan:.0f} s")
    return {
        "jobs": jobs,
        "runtimes": runtimes.tolist(),
        "job_ids": ids,
        "at": list(at),
        "count": count,
        "grace": grace,
        "t0": t0,
        "reclamations": rows,
        "live_runs": [{**r, "start": r["start"] - t0, "end": r["end"] - t0} for r in runs],
        "live_makespan": live_makespan,
        "sim_makespan": float(sched.makespan),
        "sim_runs": [
            {
                "job": i,
                "node": f"n{int(sched.nodes_of(i)[0])}",
                "start": float(sched.start[i]),
                "end": float(sched.end[i]),
            }
            for i in range(jobs)
        ],
    }


def _sim_wc(
    sched: Schedule, t: float, count: int, grace: float
) -> tuple[float, list[str], list[str]]:
    """The simulator's own answer at time t: its schedule of the same jobs on 4 nodes (all
    queued at 0, EASY), LIFO, the P lowest-valued nodes, WC by the same formula."""
    nodes = [f"n{i}" for i in range(sched.n_nodes)]
    jobs = []
    for i in range(sched.start.shape[0]):
        if sched.start[i] <= t < sched.end[i]:
            on = tuple(nodes[int(k)] for k in sched.nodes_of(i))
            jobs.append(JobInfo(str(i), on, t - sched.start[i], remaining=sched.end[i] - t))
    snap = Snapshot(t, tuple(nodes), tuple(jobs))
    chosen = select_nodes(LifoPolicy().evaluate(snap), count)
    waste = wasted_cycles(snap, chosen, grace)
    return waste.total, chosen, sorted(j for j, w in waste.per_job.items() if w > 0)


# -- output ---------------------------------------------------------------------------------
def _figures(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    written = []

    def save(fig: Any, name: str) -> None:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        write_bytes(out / name, buffer.getvalue())
        written.append(out / name)

    resume = results.get("resume")
    if resume:
        fig, ax = plt.subplots(figsize=(7, 3.2))
        labels = [f"{n} node{'s' if n != '1' else ''}" for n in resume]
        left = np.zeros(len(resume))
        for part in RESUME_PARTS:
            widths = np.array(
                [statistics.median(r[part] for r in runs) for runs in resume.values()]
            )
            ax.barh(labels, widths, left=left, label=part)
            left += widths
        ax.set_xlabel("seconds from sbatch to the job's start (median of runs)")
        ax.set_title("Resume latency of powered-down pool nodes, local testbed")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
        save(fig, "resume_latency.png")
    live = results.get("live")
    if live:
        fig, axes = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
        for ax, key, title in (
            (axes[0], "live_runs", "live (Slurm on the 1+4 pool)"),
            (axes[1], "sim_runs", "elastic/sim schedule (4 nodes, always up)"),
        ):
            names = NODES if key == "live_runs" else tuple(f"n{i}" for i in range(len(NODES)))
            lanes = sorted(set(names) | {r["node"] for r in live[key]})
            for r in live[key]:
                colour = "tab:red" if r.get("state") == "REQUEUED" else "tab:blue"
                ax.barh(lanes.index(r["node"]), r["end"] - r["start"], left=r["start"],
                        color=colour, edgecolor="white", height=0.8)  # fmt: skip
            for row in live["reclamations"]:
                ax.axvline(row["t"], color="black", linestyle="--", linewidth=1)
            ax.set_yticks(range(len(lanes)), lanes)
            ax.set_title(title, fontsize=9)
        axes[1].set_xlabel("seconds after submission (dashed: reclamations; red: run requeued)")
        save(fig, "live_vs_sim_schedule.png")
        fig, ax = plt.subplots(figsize=(7, 3))
        recs = live["reclamations"]
        x = np.arange(len(recs))
        for k, (key, label) in enumerate(
            (
                ("live_wasted_cycles", "live (event log)"),
                ("formula_on_live", "sim formula on the live snapshot"),
                ("sim_wasted_cycles", "sim schedule at the same time"),
            )
        ):
            ax.bar(x + (k - 1) * 0.27, [r[key] for r in recs], width=0.27, label=label)
        ax.set_xticks(x, [f"{r['reclamation']} at {r['t']:.0f} s" for r in recs])
        ax.set_ylabel("wasted cycles (node-seconds)")
        ax.set_title(f"Wasted cycles per reclamation, LIFO, GP {live['grace']:.0f} s")
        ax.legend(fontsize=7)
        save(fig, "live_vs_sim_wasted_cycles.png")
    return written


def _markdown(results: dict[str, Any]) -> str:
    lines = [f"# Elastic partitions on {results['experiment']}", "", f"`{results['command']}`", ""]
    resume = results.get("resume")
    if resume:
        lines += ["## Resume latency (seconds, median [min, max])", ""]
        lines += ["| part | " + " | ".join(f"{n} node(s)" for n in resume) + " |"]
        lines += ["|---|" + "---|" * len(resume)]
        for part in ("total", *RESUME_PARTS):
            cells = []
            for runs in resume.values():
                v = [r[part] for r in runs]
                cells.append(f"{statistics.median(v):.1f} [{min(v):.1f}, {max(v):.1f}]")
            lines.append(f"| {part} | " + " | ".join(cells) + " |")
        lines.append("")
    release = results.get("release")
    if release:
        lines += ["## Release latency (seconds)", "", "| what | s |", "|---|---|"]
        lines += [f"| {k} | {v:.1f} |" for k, v in release.items()]
        lines.append("")
    live = results.get("live")
    if live:
        lines += [
            f"## Live against simulated ({live['jobs']} HTC jobs, runtimes / 60, "
            f"{len(live['reclamations'])} reclamations of {live['count']} node, "
            f"GP {live['grace']:.0f} s, LIFO)",
            "",
            "| rec | t (s) | PV age (s) | chosen | live WC | sim formula on live snapshot |"
            " sim schedule WC | killed live | killed by formula | killed in sim |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in live["reclamations"]:
            lines.append(
                f"| {r['reclamation']} | {r['t']:.0f} | {r['pv_age']:.1f} | "
                f"{', '.join(r['chosen'])} | {r['live_wasted_cycles']:.0f} | "
                f"{r['formula_on_live']:.0f} | {r['sim_wasted_cycles']:.0f} | "
                f"{', '.join(r['live_killed']) or '-'} | "
                f"{', '.join(r['formula_killed']) or '-'} | {', '.join(r['sim_killed']) or '-'} |"
            )
        lines += [
            "",
            f"Makespan: live {live['live_makespan']:.0f} s, simulated {live['sim_makespan']:.0f} s.",
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("name", help="a 1+4 experiment deployed with -e ptc_elastic=true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-live", action="store_true")
    parser.add_argument("--jobs", type=int, default=40, help="HTC jobs in the live run")
    parser.add_argument("--at", default="40,80,120", help="reclamation times (s after submission)")
    parser.add_argument("--count", type=int, default=1, help="nodes per reclamation")
    parser.add_argument("--grace", type=float, default=10.0, help="grace period (s)")
    parser.add_argument("--out", type=Path, default=None, help="write results and figures here")
    args = parser.parse_args()
    exp = Exp(args.name)
    exp.sh("head", f"install -d -o ptc -g ptc {MARKS}")
    results: dict[str, Any] = {
        "experiment": args.name,
        "command": "benchmarks/elastic_latency.py " + " ".join(sys.argv[1:]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "slurm": exp.sh("head", "scontrol show config | grep -E '^(Suspend|Resume)(Time|Timeout)'")
        .strip()
        .splitlines(),
    }
    if not args.skip_latency:
        results["resume"] = resume_latency(exp, args.reps)
        results["release"] = release_latency(exp)
    if not args.skip_live:
        at = tuple(float(t) for t in args.at.split(","))
        results["live"] = live_vs_sim(exp, at, args.count, args.grace, args.jobs)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text(args.out / "results.json", json.dumps(results, indent=1) + "\n")
        write_text(args.out / "results.md", _markdown(results))
        for path in [
            args.out / "results.json",
            args.out / "results.md",
            *_figures(results, args.out),
        ]:
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
