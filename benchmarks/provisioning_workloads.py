"""Multiverse's workloads and a burst, scaled, on a live elastic experiment of the local testbed.

Prints, asserts nothing.

Jobs are one-node ``sleep`` jobs (exclusive), so every job needs a node of the pool and, with
the pool powered down, a provisioning. Three workloads, one after the other, each ``--repeats``
times (a Poisson repeat draws its own gaps):

- ``poisson``: N jobs with exponential inter-arrival times (mean ``--mean-gap`` seconds), the
  shape of Multiverse's Workload-1;
- ``constant``: C jobs, one every ``--gap`` seconds, the shape of Multiverse's Fig. 8 run (50
  jobs, one every 10 s);
- ``burst``: M jobs submitted at once. Multiverse ran no such workload: its "bursty" arrivals
  are the Poisson ones (Workload-1 and -2).

For each: every job's submit-to-start split with ``ptc elastic overhead``'s taxonomy
(elastic.slurm.overhead), provisioning time (slot wait + testbed + network/SSH + playbook +
registration) median and max, the makespan (first submit to last end) and the pool's
utilisation over it (job run time / (makespan x pool nodes)).

The experiment's node operation decides what a provisioning is: ``power`` starts a stopped
machine that kept its disk and software (Multiverse's instant clone), ``reload`` gives a fresh
disk from the image and runs the roles on it (its full clone). Run it once per setting:

    PTC_HOME=... .venv/bin/python benchmarks/provisioning_workloads.py NAME --label instant \\
        [--jobs 8 --mean-gap 10 --constant 8 --gap 10 --burst 4 --sleep 20 --repeats 3] \\
        [--workloads poisson,constant,burst] [--out benchmarks/results/provisioning]

Every pool node must start free and powered down (the script waits for that between
workloads). With ``--out`` it writes LABEL.json (each workload's list of repeats),
LABEL-WORKLOAD.parquet (+ .csv, .columns.json; a row per job's node, with its ``repeat``) and
LABEL-WORKLOAD.png (the first repeat) there, rewritten after every repeat.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from elastic.atomic import write_text
from elastic.bench import dataset, plot
from elastic.remote import ssh
from elastic.slurm import overhead
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local import provisioning

PROVISIONING = ("slot_wait_s", "testbed_s", "network_ssh_s", "configure_s", "register_s")


class Exp:
    def __init__(self, name: str) -> None:
        exp = experiments.load(name)
        self.name = name
        self.inventory = exp.inventory_path
        self.ssh_config = exp.ssh_config_path

    def sh(self, command: str) -> str:
        """``command``'s output on the head, through the library's SSH seam."""
        return ssh.run(self.ssh_config, "head", command, timeout=600)


def pool_at_rest(exp: Exp) -> bool:
    states = exp.sh("sinfo -h -N -o '%N %T'").split()
    return all(s == "idle~" for s in states[1::2]) and not exp.sh("squeue -h -o %i").split()


def wait_at_rest(exp: Exp, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while not pool_at_rest(exp):
        if time.monotonic() > deadline:
            raise SystemExit("the pool did not come to rest (free and powered down)")
        time.sleep(5)


def submit(exp: Exp, sleep_s: int) -> str:
    out = exp.sh(
        f"cd /tmp && runuser -u ptc -- sbatch --parsable -N1 --exclusive --wrap 'sleep {sleep_s}'"
    )
    return out.strip().split(";")[0]


def ended(exp: Exp, jobs: list[str]) -> dict[str, dict[str, Any]]:
    """Each job's submit, start and end (epoch), once all have ended."""
    out = exp.sh(
        "SLURM_TIME_FORMAT=%s sacct -X -n -P -o JobID,Submit,Start,End,State -j " + ",".join(jobs)
    )
    rows = {}
    for line in out.splitlines():
        job, submit_t, start, end, state = line.split("|")[:5]
        if not end.isdigit():
            return {}
        rows[job] = {
            "submit": float(submit_t),
            "start": float(start),
            "end": float(end),
            "state": state,
        }
    return rows if len(rows) == len(jobs) else {}


def run_workload(exp: Exp, gaps: list[float], sleep_s: int, pool: int) -> dict[str, Any]:
    wait_at_rest(exp)
    since = time.time()
    jobs = []
    for gap in gaps:
        time.sleep(gap)
        jobs.append(submit(exp, sleep_s))
        print(f"  submitted job {jobs[-1]} ({len(jobs)}/{len(gaps)})", flush=True)
    deadline = time.monotonic() + 1800
    while not (times := ended(exp, jobs)):
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs {jobs} did not all end in 30 min")
        time.sleep(5)
    rows = overhead.collect(
        exp.inventory, exp.ssh_config, provisioning.history(since - 1), since=since - 1
    )
    frame = pd.DataFrame([r for r in rows if r["job_id"] in jobs])
    first = min(t["submit"] for t in times.values())
    last = max(t["end"] for t in times.values())
    busy = sum(t["end"] - t["start"] for t in times.values())
    provision = (frame[list(PROVISIONING)].sum(axis=1)).to_list() if len(frame) else []
    waits = [t["start"] - t["submit"] for t in times.values()]
    return {
        "jobs": len(jobs),
        "states": sorted({str(t["state"]) for t in times.values()}),
        "provisioned_rows": len(frame),
        "provisioning_s": _stats(provision),
        "submit_to_start_s": _stats(waits),
        "parts_median_s": {k: float(frame[k].median()) for k in overhead.PARTS}
        if len(frame)
        else {},
        "makespan_s": last - first,
        "utilisation": busy / ((last - first) * pool),
        "frame": frame,
    }


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"median": statistics.median(values), "max": max(values), "min": min(values)}


WORKLOADS = ("poisson", "constant", "burst")
COLUMNS = {**overhead.COLUMNS, "repeat": ("which repeat of the workload, from 0", "")}


def gaps_of(workload: str, args: argparse.Namespace, repeat: int) -> list[float]:
    """The seconds to wait before each submission of one repeat of ``workload``."""
    if workload == "poisson":
        rng = random.Random(args.seed + repeat)
        return [0.0] + [rng.expovariate(1 / args.mean_gap) for _ in range(args.jobs - 1)]
    if workload == "constant":
        return [0.0] + [args.gap] * (args.constant - 1)
    return [0.0] * args.burst


def workloads_of(text: str) -> list[str]:
    names = [w.strip() for w in text.split(",") if w.strip()]
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown or not names:
        raise SystemExit(
            f"--workloads: {', '.join(unknown) or 'none given'} not among {', '.join(WORKLOADS)}"
        )
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--label", required=True, help="instant or full (the node operation's)")
    parser.add_argument("--jobs", type=int, default=8, help="Poisson: how many jobs")
    parser.add_argument("--mean-gap", type=float, default=10.0, help="Poisson: mean gap (s)")
    parser.add_argument("--constant", type=int, default=8, help="constant: how many jobs")
    parser.add_argument("--gap", type=float, default=10.0, help="constant: the gap (s)")
    parser.add_argument("--burst", type=int, default=4, help="burst: how many jobs")
    parser.add_argument("--sleep", type=int, default=20, help="each job's run time (s)")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workloads", type=workloads_of, default=list(WORKLOADS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    for field in ("jobs", "constant", "burst", "repeats"):
        if getattr(args, field) < 1:
            parser.error(f"--{field} must be at least 1")
    exp = Exp(args.name)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    pool = len(exp.sh("sinfo -h -N -o %N").split())
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    report: dict[str, Any] = {"label": args.label, "pool_nodes": pool, "args": settings}
    runs: dict[str, list[dict[str, Any]]] = {}
    report["workloads"] = runs
    for name in args.workloads:
        frames = []
        for repeat in range(args.repeats):
            gaps = gaps_of(name, args, repeat)
            print(
                f"{args.label}: workload {name}, repeat {repeat + 1}/{args.repeats}, "
                f"{len(gaps)} jobs",
                flush=True,
            )
            result = run_workload(exp, gaps, args.sleep, pool)
            frames.append(result.pop("frame").assign(repeat=repeat))
            runs.setdefault(name, []).append(result)
            print(json.dumps(result, indent=2), flush=True)
            if args.out:
                save(args.out, args.label, name, frames, report)
    return 0


def save(
    out: Path, label: str, workload: str, frames: list[pd.DataFrame], report: dict[str, Any]
) -> None:
    """What has run so far: an interrupted campaign keeps its finished repeats."""
    frame = pd.concat(frames, ignore_index=True)
    base = out / f"{label}-{workload}"
    if len(frame):
        dataset.write(base.with_suffix(".parquet"), frame, COLUMNS)
        first = frame[frame["repeat"] == 0]
        labels = first["job_id"].astype(str) + " " + first["node"].astype(str)
        plot.stacked_parts(
            first.assign(row=labels),
            overhead.PARTS,
            base.with_suffix(".png"),
            label="row",
            title=f"{label}, {workload} (first repeat): from submit to start",
        )
    write_text(out / f"{label}.json", json.dumps(report, indent=2, default=str) + "\n")


if __name__ == "__main__":
    sys.exit(main())
