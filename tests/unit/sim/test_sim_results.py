"""Sweep results on disk: the Parquet file reads back to the same arrays, and bad files fail."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from elastic.atomic import replacing
from elastic.errors import InputError
from elastic.sim.heatmap import HeatmapSpec, pv_heatmap
from elastic.sim.results import read_result, summarize, write_samples
from elastic.sim.schedule import simulate
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep
from elastic.sim.traces.model import make_trace


def sweep() -> SweepResult:
    rng = np.random.default_rng(1)
    n = 40
    runtime = rng.integers(30, 4000, n).astype(np.float64)
    nodes = rng.integers(1, 4, n)
    schedule = simulate(np.zeros(n), runtime, runtime * 2, nodes, 6)
    priority = np.where(np.arange(n) % 7 == 0, 10.0, 1.0)
    config = SweepConfig(grace_periods=(60.0, 1800.0, 3600.0), preempt=3)
    return run_sweep(schedule, priority, config)


def test_samples_read_back_to_the_same_arrays(tmp_path: Path) -> None:
    result = sweep()
    path = tmp_path / "samples.parquet"
    write_samples(result, path)
    back = read_result(path)
    assert back.policies == result.policies
    assert back.grace_periods == result.grace_periods
    assert np.array_equal(back.times, result.times)
    assert np.array_equal(back.idle, result.idle)
    assert np.array_equal(back.wc, result.wc)
    assert np.array_equal(back.wc_high, result.wc_high)
    assert summarize(back).equals(summarize(result))
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in tmp_path.iterdir()] == ["samples.parquet"]  # no temp file left


def test_incomplete_or_foreign_files_are_refused(tmp_path: Path) -> None:
    result = sweep()
    path = tmp_path / "samples.parquet"
    write_samples(result, path)
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows - 1), path)
    with pytest.raises(InputError, match=r"rows, but 5 policies x 3 grace periods"):
        read_result(path)
    pq.write_table(table.drop_columns(["wc_high"]), path)
    with pytest.raises(InputError, match=r"missing column\(s\) wc_high"):
        read_result(path)
    path.write_text("not parquet")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_result(path)
    with pytest.raises(InputError, match="no samples here"):
        read_result(tmp_path / "nothing.parquet")


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "state.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), replacing(path) as tmp:
        tmp.write_bytes(b"half of the new")
        raise RuntimeError("writer died")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["state.bin"]


def test_heatmap_shows_the_window_where_high_priority_jobs_run() -> None:
    # 30 single-node jobs of 1 h on a 2-node partition: 15 h of work. Job 20 is high-priority
    # and runs from 10 h to 11 h, seen at 10 h and 10.5 h: the 3-snapshot window (30 min steps)
    # is the earliest that covers both.
    n = 30
    trace = make_trace(
        "t",
        job_id=list(range(n)),
        submit=[0.0] * n,
        runtime=[3600.0] * n,
        requested=[3600.0] * n,
        nodes=[1] * n,
        completed=[True] * n,
        status_known=[True] * n,
        queue=["q"] * n,
        application=["a"] * n,
        user=["u"] * n,
    )
    priority = np.ones(n)
    priority[20] = 10.0
    trace = trace.with_priority(priority)
    spec = HeatmapSpec(nodes=2, snapshots=3, interval=1800.0)
    pv = pv_heatmap(trace, np.zeros(n), spec, ("PAP", "PAP+"))
    times = sorted(set(pv["time_s"]))
    assert times == [34200.0, 36000.0, 37800.0]
    high = pv[pv["high"]]
    assert set(high["time_s"]) == {36000.0, 37800.0}
    plus = pv[(pv["policy"] == "PAP+") & (pv["time_s"] == 37800.0)]
    assert plus.loc[plus["high"], "value"].tolist() == [1.0]  # the high job is the most valued
