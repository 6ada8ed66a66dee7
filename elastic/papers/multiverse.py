"""Multiverse beside ptc's per-job provisioning: read from a live run's stored results.

Nothing here runs: the instant (``power``) and full (``release``) runs of
``benchmarks/provisioning_workloads.py`` stored one JSON per label (each workload's repeats) and
one Parquet per label and workload (a row per job's node and repeat), with a README recording
how, when and under what load. With several repeats ours are mean ± sd over the repeats (each a
mean over its jobs); with one, over that run's jobs. The paper's numbers are typed in with where
they are.
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
)

OWNER = "the paper's"
LABELS = ("instant", "full")
WORKLOADS = ("poisson", "constant", "burst")
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
    """One label's stored runs: its JSON summary, each workload's repeats, and their per-job rows
    (a ``repeat`` column, 0 for a store of one run per workload)."""

    label: str
    summary: dict[str, object]
    runs: dict[str, list[dict[str, object]]]
    jobs: dict[str, pd.DataFrame]

    @property
    def workloads(self) -> tuple[str, ...]:
        return tuple(w for w in WORKLOADS if w in self.runs)


def _runs(summary: dict[str, object], path: Path) -> dict[str, list[dict[str, object]]]:
    """Each workload's repeats, from the script's layout (``workloads``: name -> list of runs) or
    its first one (one run per workload at the top level)."""
    nested = summary.get("workloads")
    if nested is None:
        return {w: [v] for w in WORKLOADS if isinstance(v := summary.get(w), dict)}
    if not isinstance(nested, dict):
        raise InputError(f"multiverse: {path}: 'workloads' is not a mapping")
    out: dict[str, list[dict[str, object]]] = {}
    for name, runs in nested.items():
        if name not in WORKLOADS:
            raise InputError(f"multiverse: {path}: unknown workload {name!r}")
        if not (isinstance(runs, list) and runs and all(isinstance(r, dict) for r in runs)):
            raise InputError(f"multiverse: {path}: workloads.{name} is not a list of runs")
        out[name] = runs
    return out


def load(folder: Path) -> dict[str, Stored]:
    out: dict[str, Stored] = {}
    for label in LABELS:
        path = folder / f"{label}.json"
        if not path.is_file():
            raise InputError(f"multiverse: no stored result {path}")
        summary = json.loads(path.read_text())
        runs = _runs(summary, path)
        jobs = {}
        for w in runs:
            frame = pd.read_parquet(folder / f"{label}-{w}.parquet")
            jobs[w] = frame if "repeat" in frame else frame.assign(repeat=0)
        out[label] = Stored(label, summary, runs, jobs)
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


def provisioning(stored: Stored, workload: str, over_jobs: bool = True) -> Spread:
    """Per-job provisioning: each repeat's mean over its jobs; with one repeat and
    ``over_jobs``, that run's jobs themselves."""
    rows = stored.jobs[workload].drop_duplicates(["repeat", "job_id"])
    per_job = rows[list(PROVISIONING)].sum(axis=1)
    if over_jobs and rows["repeat"].nunique() == 1:
        return Spread.of(per_job)
    return Spread.of(per_job.groupby(rows["repeat"]).mean())


def per_run(stored: Stored, workload: str, key: str) -> Spread:
    """A run summary's number (``makespan_s``...) over the workload's repeats."""
    values = [r.get(key) for r in stored.runs[workload]]
    return Spread.of(float(v) if isinstance(v, int | float) else math.nan for v in values)


def wait_split(stored: Stored, workload: str) -> str:
    """A job's submit-to-start over the runs (each run's median), with its provisioning and
    Slurm's own steps (to the ResumeProgram call; from the nodes ready to the start)."""
    rows = stored.jobs[workload].drop_duplicates(["repeat", "job_id"])
    by_run = rows.groupby("repeat")
    wait = Spread.of(by_run["submit_to_start_s"].median())
    provisioning = Spread.of(rows[list(PROVISIONING)].sum(axis=1).groupby(rows["repeat"]).median())
    slurm = Spread.of(
        (rows["slurm_to_resume_s"] + rows["slurm_to_start_s"]).groupby(rows["repeat"]).median()
    )
    return (
        f"{wait.text(0)} s (provisioning {provisioning.text(0)} s, Slurm's own steps "
        f"{slurm.text(0)} s)"
    )


def _within(run: dict[str, object], key: str, part: str) -> float:
    """``run[key][part]`` as a number (NaN when the run has none)."""
    inner = run.get(key)
    value = inner.get(part) if isinstance(inner, dict) else None
    return float(value) if isinstance(value, int | float) else math.nan


def ratio(instant: Spread, full: Spread) -> Spread:
    """Full over instant: per repeat when both have the same repeats (more than one), else the
    ratio of the means."""
    if instant.n == full.n > 1:
        return Spread.of(f / i for i, f in zip(instant.values, full.values, strict=True))
    return Spread.of([full.mean / instant.mean])


def _jobs(stored: Stored, workload: str) -> int:
    jobs = stored.runs[workload][0].get("jobs")
    return int(jobs) if isinstance(jobs, int | float) else 0


def _over(instant: Stored, full: Stored, workload: str) -> str:
    a, b = len(instant.runs[workload]), len(full.runs[workload])
    if a == b == 1:
        return "one run each; mean ± sd over its jobs"
    runs = f"{a} runs each" if a == b else f"instant {a} runs, full {b}"
    return f"{runs}; mean ± sd over the runs"


def _arg(stored: Stored, key: str) -> object:
    args = stored.summary.get("args")
    return args.get(key) if isinstance(args, dict) else None


def section(folder: Path) -> Section:
    stored = load(folder)
    instant, full = stored["instant"], stored["full"]
    workloads = [w for w in instant.workloads if w in full.workloads]
    if not workloads:
        raise InputError(f"multiverse: {folder}: no workload ran under both labels")
    cols = tuple(
        f"ours: {w}, {_jobs(instant, w)} jobs ({_over(instant, full, w)})" for w in workloads
    )
    inst = [provisioning(instant, w) for w in workloads]
    ful = [provisioning(full, w) for w in workloads]
    ratios = [
        ratio(provisioning(instant, w, over_jobs=False), provisioning(full, w, over_jobs=False))
        for w in workloads
    ]
    spans = [(per_run(instant, w, "makespan_s"), per_run(full, w, "makespan_s")) for w in workloads]
    span_ratios = [ratio(a, b) for a, b in spans]
    sleep_s = _arg(instant, "sleep")
    split = (
        f"A job waited, medians per run with Poisson arrivals: {wait_split(instant, 'poisson')} "
        f"instant and {wait_split(full, 'poisson')} full."
        if "poisson" in workloads
        else ""
    )

    def of(workload: str, values: list[Spread], paper: PaperValue, digits: int) -> str:
        if workload not in workloads:
            return MISSING
        ours = values[workloads.index(workload)].mean
        return f"{workload}: {difference(ours, paper.value, digits)}"

    def only(workload: str, values: list[Spread]) -> tuple[str, ...]:
        return tuple(
            f"{v.text(1)}x" if w == workload else "(other arrivals)"
            for w, v in zip(workloads, values, strict=True)
        )

    def diffs(values: list[Spread], paper: PaperValue, digits: int) -> str:
        return "; ".join(
            f"{w}: {difference(v.mean, paper.value, digits)}"
            for w, v in zip(workloads, values, strict=True)
        )

    constant_note = "No stored run has constant arrivals: it needs a live run on the local testbed."
    if "constant" in workloads:
        waits = [
            Spread.of(_within(r, "submit_to_start_s", "median") for r in s.runs["constant"])
            for s in (instant, full)
        ]
        constant_note = (
            f"Ours: {_arg(instant, 'constant')} jobs, one every {_arg(instant, 'gap')} s, on a "
            f"pool of {instant.summary.get('pool_nodes', '?')} nodes (the paper's: 50 jobs). A "
            "job whose node is still being provisioned for an earlier one waits for it too: "
            f"the median submit-to-start was {waits[0].text(0)} s instant and "
            f"{waits[1].text(0)} s full."
        )
    rows = (
        Row(
            "provisioning per job, instant (s)",
            INSTANT_S,
            tuple(s.text(1) for s in inst),
            diffs(inst, INSTANT_S, 1),
            "Ours starts a stopped container that kept its disk and runs a short playbook; "
            "Multiverse forks a VM and reconfigures its network.",
        ),
        Row(
            "provisioning per job, full (s)",
            FULL_S,
            tuple(s.text(1) for s in ful),
            diffs(ful, FULL_S, 1),
            "Ours: a fresh disk configured whole by the playbook on a prepared image; "
            "Multiverse clones a whole VM through vCenter, 15 at most a minute.",
        ),
        Row(
            "full over instant, provisioning",
            RATIO_W1,
            tuple(f"{r.text(1)}x" for r in ratios),
            of("poisson", ratios, RATIO_W1, 1),
            "Ours as the ratio per run (or of the means, for one run). The paper's Workload-1 "
            f"is Poisson, so the Poisson column is the one to compare; ours has "
            f"{_arg(instant, 'jobs')} jobs instead of 50. Multiverse ran no all-at-once burst.",
        ),
        Row(
            "full over instant, provisioning, constant arrivals",
            RATIO_CONSTANT,
            only("constant", ratios),
            of("constant", ratios, RATIO_CONSTANT, 1),
            constant_note,
        ),
        Row(
            "makespan, instant and full (s)",
            MAKESPANS,
            tuple(f"{a.text(0)} instant, {b.text(0)} full" for a, b in spans),
            MISSING,
            "The time from the first submit to the last job's end, per run.",
        ),
        Row(
            "full over instant, makespan",
            MAKESPAN_RATIO,
            tuple(f"{r.text(2)}x" for r in span_ratios),
            of("poisson", span_ratios, MAKESPAN_RATIO, 2),
            f"Our jobs sleep {sleep_s} s and wait longer than they run. {split} The makespans "
            "also hold what both labels share (the arrivals' span, Slurm's own steps, the run "
            "time), which brings their ratio towards 1 whatever the provisioning gap. "
            "Multiverse's 100 jobs run HPC benchmarks (HPCG, HPL, MPI RandomAccess) side by side "
            "on an over-committed cluster, with running time a larger share of its makespan (the "
            "running times are in its Fig. 9, not in the text): the two ratios do not measure "
            "provisioning alone, and not the same shares of it.",
        ),
    )
    repeats = sorted({len(s.runs[w]) for s in (instant, full) for w in workloads})
    spread = (
        "One run per label and workload: the spread is over the jobs of that run, not over "
        "repeated runs."
        if repeats == [1]
        else f"{' or '.join(map(str, repeats))} runs per label and workload: the spread is over "
        "the runs (each run's mean over its jobs)."
    )
    table = Table(
        "Multiverse: instant against full provisioning (stored live runs)",
        OWNER,
        cols,
        rows,
        notes=(
            "Provisioning: slot wait, testbed call, network and SSH, playbook, registration "
            "(`ptc elastic overhead`'s parts), per job's node.",
            spread,
        ),
    )
    missing = [w for w in WORKLOADS if w not in workloads]
    needs = ["longer jobs, so that running time and not provisioning sets the makespan"]
    if missing:
        needs.insert(0, f"the {' and '.join(missing)} workload under both labels")
    if repeats == [1]:
        needs.insert(0, "repeats of each workload")
    return Section(
        "Multiverse: instant against full provisioning",
        (provenance(folder, stored),),
        (table,),
        notes=(f"What a fuller comparison needs, all live: {'; '.join(needs)}.",),
    )
