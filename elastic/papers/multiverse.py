"""Multiverse beside ptc's per-job provisioning: read from a live run's stored results.

Nothing here runs: the instant (``power``) and full (``release``) runs of
``benchmarks/provisioning_workloads.py`` stored one JSON per label and one Parquet per label and
workload (a row per job's node), with a README recording how, when and under what load. The
paper's numbers are typed in with where they are.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from elastic.errors import InputError
from elastic.papers.table import (
    MISSING,
    PaperValue,
    Row,
    Section,
    Spread,
    Table,
    difference,
    number,
)

OWNER = "the paper's"
LABELS = ("instant", "full")
WORKLOADS = ("poisson", "burst")
# What a job's provisioning is, as the stored rows split it (``ptc elastic overhead``).
PROVISIONING = ("slot_wait_s", "testbed_s", "network_ssh_s", "configure_s", "register_s")
W1 = "§VI, Fig. 6-7 (Workload-1: 50 jobs, Poisson arrivals)"
INSTANT_S = PaperValue(36.0, "36 s", W1, "average over the jobs of one run")
FULL_S = PaperValue(260.0, "260 s", W1, "average over the jobs of one run")
RATIO_W1 = PaperValue(7.2, "7.2x", W1, "ratio of the two averages")
RATIO_CONSTANT = PaperValue(
    2.5,
    "2.5x (36 s against 87 s)",
    "§VI, Fig. 8 (50 jobs, one every 10 s)",
    "ratio of two averages over one run each",
)
W2 = "§VI, Fig. 13 (Workload-2: 100 jobs, Poisson, CPUs 2x over-committed)"
MAKESPANS = PaperValue(
    None, "581 s instant, 868 s full", W2, "one run each: the time to complete all jobs"
)
MAKESPAN_RATIO = PaperValue(868 / 581, "1.49x (868 s over 581 s)", W2, "ratio of one run each")


@dataclass(frozen=True)
class Stored:
    """One label's stored run: its JSON summary and its per-job rows per workload."""

    label: str
    summary: dict[str, object]
    jobs: dict[str, pd.DataFrame]


def load(folder: Path) -> dict[str, Stored]:
    out: dict[str, Stored] = {}
    for label in LABELS:
        path = folder / f"{label}.json"
        if not path.is_file():
            raise InputError(f"multiverse: no stored result {path}")
        summary = json.loads(path.read_text())
        jobs = {w: pd.read_parquet(folder / f"{label}-{w}.parquet") for w in WORKLOADS}
        out[label] = Stored(label, summary, jobs)
    return out


def provenance(folder: Path, stored: dict[str, Stored]) -> str:
    """When (from the jobs' submit times), on what and how (the README's first paragraph)."""
    submits = pd.concat([j["submit"] for s in stored.values() for j in s.jobs.values()])
    days = sorted({datetime.fromtimestamp(float(t), UTC).date().isoformat() for t in submits})
    readme = folder / "README.md"
    paragraph = ""
    if readme.is_file():
        blocks = [b for b in readme.read_text().split("\n\n") if b.strip()]
        paragraph = " ".join(blocks[1].split()) if len(blocks) > 1 else ""
    pool = stored[LABELS[0]].summary.get("pool_nodes", "?")
    return (
        f"Read from `{folder.name}/` (run on {', '.join(days)}, a pool of {pool} nodes). Its "
        f"README records: {paragraph}"
    )


def per_job(stored: Stored, workload: str) -> Spread:
    rows = stored.jobs[workload].drop_duplicates("job_id")
    return Spread.of(rows[list(PROVISIONING)].sum(axis=1))


def _summary(stored: Stored, workload: str, key: str) -> float:
    part = stored.summary.get(workload)
    value = part.get(key) if isinstance(part, dict) else None
    return float(value) if isinstance(value, int | float) else math.nan


def _jobs(stored: Stored, workload: str) -> int:
    return int(_summary(stored, workload, "jobs"))


def section(folder: Path) -> Section:
    stored = load(folder)
    instant, full = stored["instant"], stored["full"]
    cols = tuple(
        f"ours: {w}, {_jobs(instant, w)} jobs (one run; mean ± sd over its jobs)" for w in WORKLOADS
    )
    inst = [per_job(instant, w) for w in WORKLOADS]
    ful = [per_job(full, w) for w in WORKLOADS]
    ratio = [f.mean / i.mean for i, f in zip(inst, ful, strict=True)]
    spans = [
        (_summary(instant, w, "makespan_s"), _summary(full, w, "makespan_s")) for w in WORKLOADS
    ]
    span_ratio = [b / a for a, b in spans]
    sleep = instant.summary.get("args", {})
    sleep_s = sleep.get("sleep") if isinstance(sleep, dict) else None

    def diffs(values: list[float], paper: PaperValue, digits: int) -> str:
        return "; ".join(difference(v, paper.value, digits) for v in values)

    rows = (
        Row(
            "provisioning per job, instant (s)",
            INSTANT_S,
            tuple(s.text(1) for s in inst),
            diffs([s.mean for s in inst], INSTANT_S, 1),
            "Ours starts a stopped container that kept its disk and runs a short playbook; "
            "Multiverse forks a VM and reconfigures its network.",
        ),
        Row(
            "provisioning per job, full (s)",
            FULL_S,
            tuple(s.text(1) for s in ful),
            diffs([s.mean for s in ful], FULL_S, 1),
            "Ours: a fresh disk configured whole by the playbook on a prepared image; "
            "Multiverse clones a whole VM through vCenter, 15 at most a minute.",
        ),
        Row(
            "full over instant, provisioning",
            RATIO_W1,
            tuple(f"{r:.1f}x" for r in ratio),
            diffs(ratio, RATIO_W1, 1),
            "Ratio of the means. Our Poisson workload has Workload-1's shape, 5 jobs "
            "instead of 50; Multiverse ran no all-at-once burst.",
        ),
        Row(
            "full over instant, provisioning, constant arrivals",
            RATIO_CONSTANT,
            ("not run", "not run"),
            MISSING,
            "No stored run has constant arrivals: it needs a live run on the local testbed.",
        ),
        Row(
            "makespan, instant and full",
            MAKESPANS,
            tuple(f"{number(a, 0)} s instant, {number(b, 0)} s full" for a, b in spans),
            MISSING,
            "Each workload ran once per label.",
        ),
        Row(
            "full over instant, makespan",
            MAKESPAN_RATIO,
            tuple(f"{r:.1f}x" for r in span_ratio),
            diffs(span_ratio, MAKESPAN_RATIO, 2),
            f"Our jobs sleep {sleep_s} s, so provisioning, not running, makes up most of our "
            "makespans. Multiverse's 100 jobs run HPC benchmarks (HPCG, HPL, MPI "
            "RandomAccess) side by side on an over-committed cluster: with running time a "
            "larger share of its makespan, the same provisioning gap moves it less (the "
            "running times are in its Fig. 9, not in the text).",
        ),
    )
    table = Table(
        "Multiverse: instant against full provisioning (stored live runs)",
        OWNER,
        cols,
        rows,
        notes=(
            "Provisioning: slot wait, testbed call, network and SSH, playbook, registration "
            "(`ptc elastic overhead`'s parts), per job's node.",
            "One run per label and workload on a loaded machine: the spread is over the jobs of "
            "that run, not over repeated runs.",
        ),
    )
    return Section(
        "Multiverse: instant against full provisioning",
        (provenance(folder, stored),),
        (table,),
        notes=(
            "What a fuller comparison needs, all live: repeats of each workload; a "
            "constant-arrival workload (one job every 10 s) beside the burst; longer jobs, so "
            "that running time and not provisioning sets the makespan.",
        ),
    )
