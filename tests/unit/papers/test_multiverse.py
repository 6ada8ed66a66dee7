"""Multiverse's table read from hand-made stored runs: repeats, constant arrivals, old layout."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from elastic.errors import InputError
from elastic.papers import multiverse
from elastic.papers.table import Section

# label -> workload -> per repeat, each job's provisioning (s), split evenly over the parts
PROVISIONED = {
    "instant": {"poisson": [[10, 20], [30, 40]], "constant": [[12, 14], [16, 18]]},
    "full": {"poisson": [[100, 120], [140, 160]], "constant": [[60, 70], [80, 90]]},
}
MAKESPANS = {"instant": [100.0, 120.0], "full": [300.0, 330.0]}


def write_store(folder: Path, nested: bool = True) -> Path:
    folder.mkdir()
    for label, workloads in PROVISIONED.items():
        runs: dict[str, list[dict[str, object]]] = {}
        for workload, repeats in workloads.items():
            rows = []
            for repeat, jobs in enumerate(repeats if nested else repeats[:1]):
                for i, total in enumerate(jobs):
                    parts = {
                        p: total / len(multiverse.PROVISIONING) for p in multiverse.PROVISIONING
                    }
                    slurm = {"slurm_to_resume_s": 2.0, "slurm_to_start_s": 10.0 * (repeat + 1)}
                    wait = total + sum(slurm.values())
                    rows.append(
                        {
                            "job_id": str(10 * repeat + i),
                            "submit": 1.8e9,
                            "submit_to_start_s": wait,
                            **parts,
                            **slurm,
                        }
                    )
                    if nested:
                        rows[-1]["repeat"] = repeat
                runs.setdefault(workload, []).append(
                    {
                        "jobs": len(jobs),
                        "makespan_s": MAKESPANS[label][repeat],
                        "submit_to_start_s": {"median": 5.0 * (repeat + 1)},
                    }
                )
            pd.DataFrame(rows).to_parquet(folder / f"{label}-{workload}.parquet")
        args = {"sleep": 10, "jobs": 2, "constant": 2, "gap": 10}
        summary: dict[str, object] = {"label": label, "pool_nodes": 4, "args": args}
        if nested:
            summary["workloads"] = runs
        else:
            summary.update({w: r[0] for w, r in runs.items()})
        (folder / f"{label}.json").write_text(json.dumps(summary))
    return folder


def cells(section: Section) -> dict[str, tuple[str, ...]]:
    [table] = section.tables
    return {row[0]: row[3:-1] for row in table.cells()}


def test_repeats_give_mean_and_sd_over_the_runs_and_the_constant_row(tmp_path: Path) -> None:
    section = multiverse.section(write_store(tmp_path / "store"))
    [table] = section.tables
    assert table.ours_headers == (
        "ours: poisson, 2 jobs (2 runs each; mean ± sd over the runs)",
        "ours: constant, 2 jobs (2 runs each; mean ± sd over the runs)",
    )
    got = cells(section)
    # the repeats' means are 15 and 35: 25 ± 14.1
    means = [statistics.mean(r) for r in PROVISIONED["instant"]["poisson"]]
    assert got["provisioning per job, instant (s)"][0].startswith(
        f"{statistics.mean(means):.1f} ± {statistics.stdev(means):.1f}"
    )
    # full over instant, paired per run: 110/15 and 150/35
    ratios = [110 / 15, 150 / 35]
    assert got["full over instant, provisioning"][0] == (
        f"{statistics.mean(ratios):.1f} ± {statistics.stdev(ratios):.1f}x"
    )
    constant = got["full over instant, provisioning, constant arrivals"]
    assert constant[0] == "(other arrivals)"
    assert constant[1] == "5.0 ± 0x"  # 65/13 and 85/17
    assert got["makespan, instant and full (s)"][0] == "110 ± 14 instant, 315 ± 21 full"
    [row] = [r for r in table.rows if r.quantity.endswith("constant arrivals")]
    assert "median submit-to-start was 8 ± 4 s instant" in row.why
    assert row.difference.startswith("constant: ")
    # waits per run, instant Poisson: medians 27 and 57 (provisioning 15 and 35, Slurm 12 and 22)
    [span] = [r for r in table.rows if r.quantity == "full over instant, makespan"]
    assert "42 ± 21 s (provisioning 25 ± 14 s, Slurm's own steps 17 ± 7 s) instant" in span.why
    assert "2 runs per label and workload" in table.notes[1]
    assert "repeats" not in section.notes[0] and "burst" in section.notes[0]


def test_a_store_of_one_run_per_workload_is_read_over_its_jobs(tmp_path: Path) -> None:
    section = multiverse.section(write_store(tmp_path / "store", nested=False))
    [table] = section.tables
    assert table.ours_headers[0] == "ours: poisson, 2 jobs (one run each; mean ± sd over its jobs)"
    assert cells(section)["provisioning per job, instant (s)"][0] == "15.0 ± 7.1"
    assert cells(section)["full over instant, provisioning"][0] == f"{110 / 15:.1f}x"
    assert section.notes[0].startswith("What a fuller comparison needs, all live: repeats")


def test_an_unknown_workload_is_refused_naming_it(tmp_path: Path) -> None:
    folder = write_store(tmp_path / "store")
    summary = json.loads((folder / "full.json").read_text())
    summary["workloads"]["steady"] = summary["workloads"].pop("constant")
    (folder / "full.json").write_text(json.dumps(summary))
    with pytest.raises(InputError, match=r"full\.json: unknown workload 'steady'"):
        multiverse.section(folder)
