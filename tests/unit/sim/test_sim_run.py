"""``elastic.sim.run`` from Python with no terminal: events through a callback, results back.

Also the SWF processor-count convention and the kind of error a bad trace line raises.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from elastic.errors import InputError
from elastic.events import Event, Kind, collect
from elastic.sim.run import RunSpec, run
from elastic.sim.sweep import SweepConfig
from elastic.sim.traces import load_trace, processor_mismatch
from elastic.sim.workload import WorkloadSpec

# job, submit, wait, run, allocated (5), -1, -1, requested (8), requested time, ...
ROWS = [
    (1, 0, 0, 300, 2, 2, 600),
    (2, 40, 0, 120, 1, 1, 240),
    (3, 80, 0, 900, 4, 3, 1800),  # allocated 4, requested 3
    (4, 120, 0, 60, 1, 1, 120),
    (5, 160, 0, 1500, 2, -1, 3000),  # requested missing: allocated (2) stands in
    (6, 200, 0, 400, 1, 2, 800),  # allocated 1, requested 2
]


def swf(tmp_path: Path, rows: Sequence[tuple[int, ...]] = ROWS) -> Path:
    lines = ["; Version: 2.2"]
    for job, submit, wait, runtime, alloc, req, req_time in list(rows) * 3:
        lines.append(
            f"{job} {submit} {wait} {runtime} {alloc} -1 -1 {req} {req_time} -1 1 1 1 -1 1 -1 -1 -1"
        )
    path = tmp_path / "small.swf"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sizes_come_from_requested_processors_by_default(tmp_path: Path) -> None:
    path = swf(tmp_path)
    requested = load_trace(path)
    assert requested.nodes.tolist()[:6] == [2, 1, 3, 1, 2, 2]
    allocated = load_trace(path, "allocated")
    assert allocated.nodes.tolist()[:6] == [2, 1, 4, 1, 2, 1]
    assert processor_mismatch(requested) == 2 * 3  # jobs 3 and 6, three times over


def test_unknown_processor_choice_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--swf-processors must be"):
        load_trace(swf(tmp_path), "used")


def test_bad_trace_line_names_file_line_and_field(tmp_path: Path) -> None:
    path = swf(tmp_path)
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace(" 120 ", " soon ", 1)  # job 2, on line 3
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert f"{path}:3: field 4 (run_time): 'soon' is not a number" in str(err.value)


def test_run_from_python_reports_through_a_callback(tmp_path: Path) -> None:
    events: list[Event] = []
    config = SweepConfig(policies=("LIFO", "PAP"), grace_periods=(60.0, 1800.0), preempt=2)
    spec = RunSpec(WorkloadSpec(swf(tmp_path), 4), 4, sweep=config, plots=False)
    out = tmp_path / "out"
    result = run(spec, out, on_event=collect(events))

    sweep = [e for e in events if e.topic == "sweep"]
    assert sweep[0].kind is Kind.BEGIN and sweep[-1].kind is Kind.END
    ticks = [e for e in sweep if e.kind is Kind.PROGRESS]
    assert ticks and ticks[-1].done == ticks[-1].total == sweep[0].total
    said = [e.message for e in events if e.topic == "sim" and e.kind is Kind.STATUS]
    assert any("completed successfully: 18 -> 18 jobs" in m for m in said)
    assert any("6 of 18 jobs requested a different number of processors" in m for m in said)

    assert result.jobs == 18 and result.processor_mismatch == 6
    assert result.sweep.policies == ("LIFO", "PAP")
    samples = pd.read_parquet(out / "samples.parquet")
    assert len(samples) == 2 * 2 * result.sweep.samples
    assert np.array_equal(
        samples[(samples.policy == "PAP") & (samples.gp_s == 60.0)]["wc"].to_numpy(),
        result.sweep.wc[1, 0],
    )
    info = json.loads((out / "run.json").read_text())
    assert info["bf_max_job_test"] is None and info["swf_processors"] == "requested"
    assert not list(out.glob("*.png"))


def test_library_does_not_import_rich() -> None:
    code = "import sys, elastic.sim.run, elastic.sim.sweep; print('rich' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
