"""A sweep cut into parts, each part run on its own (as a Slurm array task runs it), and merged:
the merged result is the whole sweep's, down to the bytes of ``samples.parquet``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from elastic import node_paths
from elastic.errors import InputError, PtcError
from elastic.sim.on_cluster import ClusterSpec, job_script
from elastic.sim.parts import Part, merge, split
from elastic.sim.results import read_result, write_samples
from elastic.sim.run import RunSpec, schedule_workload, spec_dict, spec_from_dict
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep
from elastic.sim.worker import JOB_FILE, job_document, piece_path, run_part
from elastic.sim.workload import WorkloadSpec

POLICIES = ("RANDOM", "FIFO", "LIFO", "PAP", "PAP+")
GPS = (60.0, 120.0, 1200.0, 3600.0)


def swf(tmp_path: Path) -> Path:
    """60 jobs of 1-4 processors with varied runtimes, whole seconds."""
    rng = np.random.default_rng(7)
    lines = ["; Version: 2.2"]
    for job in range(60):
        size = int(rng.integers(1, 5))
        runtime = int(rng.integers(30, 4000))
        lines.append(
            f"{job + 1} {job * 37} 0 {runtime} {size} -1 -1 {size} {runtime * 2} -1 1 1 1 -1 1 -1 -1 -1"
        )
    path = tmp_path / "small.swf"
    path.write_text("\n".join(lines) + "\n")
    return path


def spec_for(trace: Path) -> RunSpec:
    workload = WorkloadSpec(trace, max_nodes=8, high_fraction=0.2, seed=3)
    sweep = SweepConfig(policies=POLICIES, grace_periods=GPS, preempt=3, interval=30.0, seed=3)
    return RunSpec(workload, nodes=8, sweep=sweep, plots=False)


def test_split_shares_policies_then_grace_periods() -> None:
    assert split(POLICIES, GPS, 2) == [
        Part(("RANDOM", "FIFO", "LIFO"), GPS),
        Part(("PAP", "PAP+"), GPS),
    ]
    assert split(POLICIES, GPS, 5) == [Part((p,), GPS) for p in POLICIES]
    seven = split(POLICIES, GPS, 7)
    assert [p.policies for p in seven] == [("RANDOM",), ("RANDOM",), ("FIFO",), ("FIFO",)] + [
        (p,) for p in POLICIES[2:]
    ]
    assert seven[0].grace_periods == (60.0, 120.0) and seven[1].grace_periods == (1200.0, 3600.0)
    # never more parts than cells
    assert len(split(POLICIES, GPS, 1000)) == len(POLICIES) * len(GPS)


def test_split_rejects_no_tasks() -> None:
    with pytest.raises(InputError, match="--tasks must be >= 1"):
        split(POLICIES, GPS, 0)


@pytest.mark.parametrize("tasks", [1, 3, 5, 8, 20])
def test_parts_merge_into_the_whole_sweep(tmp_path: Path, tasks: int) -> None:
    spec = spec_for(swf(tmp_path))
    sim = schedule_workload(spec)
    whole = run_sweep(sim.schedule, sim.workload.priority, spec.sweep)
    assert whole.wc_high.any()  # the high-priority part is exercised
    pieces = []
    for part in split(POLICIES, GPS, tasks):
        config = replace(spec.sweep, policies=part.policies, grace_periods=part.grace_periods)
        pieces.append(run_sweep(sim.schedule, sim.workload.priority, config))
    merged = merge(pieces[::-1], POLICIES, GPS)  # the order pieces come back in is irrelevant
    assert merged.policies == whole.policies and merged.grace_periods == whole.grace_periods
    assert np.array_equal(merged.wc, whole.wc) and np.array_equal(merged.wc_high, whole.wc_high)
    write_samples(whole, tmp_path / "whole.parquet")
    write_samples(merged, tmp_path / "merged.parquet")
    assert _digest(tmp_path / "whole.parquet") == _digest(tmp_path / "merged.parquet")


def test_worker_writes_its_part_from_a_job_file(tmp_path: Path) -> None:
    spec = spec_for(swf(tmp_path))
    parts = split(POLICIES, GPS, 7)
    (tmp_path / JOB_FILE).write_text(json.dumps(job_document(spec_dict(spec), parts)))
    sim = schedule_workload(spec)
    whole = run_sweep(sim.schedule, sim.workload.priority, spec.sweep)
    pieces = [read_result(run_part(tmp_path, task)) for task in range(len(parts))]
    assert piece_path(tmp_path, 3).is_file()
    assert json.loads(piece_path(tmp_path, 3).with_suffix(".json").read_text())["task"] == 3
    merged = merge(pieces, POLICIES, GPS)
    assert np.array_equal(merged.wc, whole.wc) and np.array_equal(merged.times, whole.times)


def test_worker_refuses_a_task_the_job_has_not(tmp_path: Path) -> None:
    spec = spec_for(swf(tmp_path))
    (tmp_path / JOB_FILE).write_text(
        json.dumps(job_document(spec_dict(spec), split(POLICIES, GPS, 2)))
    )
    with pytest.raises(InputError, match="task 2: the job has parts 0-1"):
        run_part(tmp_path, 2)


def _result(policies: tuple[str, ...], gps: tuple[float, ...], times: list[float]) -> SweepResult:
    shape = (len(policies), len(gps), len(times))
    return SweepResult(
        policies,
        gps,
        np.asarray(times),
        np.zeros(len(times), np.int64),
        np.ones(shape),
        np.zeros(shape),
    )


def test_merge_names_a_missing_or_repeated_cell() -> None:
    a = _result(("FIFO",), (60.0,), [0.0, 30.0])
    with pytest.raises(PtcError, match=r"LIFO x GP 60 s came back 0 times"):
        merge([a], ("FIFO", "LIFO"), (60.0,))
    with pytest.raises(PtcError, match=r"FIFO x GP 60 s came back 2 times"):
        merge([a, a], ("FIFO",), (60.0,))


def test_merge_refuses_parts_of_different_schedules() -> None:
    a = _result(("FIFO",), (60.0,), [0.0, 30.0])
    b = _result(("LIFO",), (60.0,), [0.0, 31.0])
    with pytest.raises(PtcError, match="other snapshots"):
        merge([a, b], ("FIFO", "LIFO"), (60.0,))


def test_spec_round_trips_through_json(tmp_path: Path) -> None:
    spec = replace(spec_for(tmp_path / "t.swf"), bf_max_job_test=12, arrival="submit")
    again = spec_from_dict(json.loads(json.dumps(spec_dict(spec))))
    assert again == spec
    with pytest.raises(InputError, match="run spec"):
        spec_from_dict({"workload": {}})


def test_job_script_runs_one_part_per_array_task() -> None:
    site = f"{node_paths.SIM_SITE_ROOT}/site-abc"
    script = job_script("/home/ptc/ptc-sim/r1", site, 4, ClusterSpec(mem_mb=900))
    assert "#SBATCH --array=0-3" in script
    assert "#SBATCH --mem=900M" in script
    assert f"export PYTHONPATH=/home/ptc/ptc-sim/r1/code:{site}" in script
    assert 'python3 -m elastic.sim.worker /home/ptc/ptc-sim/r1 "$SLURM_ARRAY_TASK_ID"' in script


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
