"""One part of a sweep, as a Slurm array task runs it on a cluster node.

    python3 -m elastic.sim.worker RUN_DIR TASK

``RUN_DIR/job.json`` holds the run's spec (``elastic.sim.run.spec_dict``, the trace path
pointing into RUN_DIR) and the parts (``elastic.sim.parts.Part``). Task i schedules the whole
workload, sweeps part i and writes ``RUN_DIR/pieces/part-i.parquet`` (the samples format of
``elastic.sim.results``) and ``part-i.json`` (where and how long), both atomically. Progress
goes to the task's log through ``elastic.events.to_logger``. Needs numpy, pandas and pyarrow;
not matplotlib.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from elastic.atomic import write_json
from elastic.errors import InputError
from elastic.events import to_logger
from elastic.sim.parts import Part
from elastic.sim.results import write_samples
from elastic.sim.run import schedule_workload, spec_from_dict
from elastic.sim.sweep import run_sweep

JOB_FILE = "job.json"
PIECES = "pieces"


def piece_path(run_dir: Path, task: int) -> Path:
    return run_dir / PIECES / f"part-{task}.parquet"


def job_document(spec: dict[str, Any], parts: list[Part]) -> dict[str, Any]:
    return {
        "spec": spec,
        "parts": [{"policies": list(p.policies), "grace_periods": list(p.grace_periods)} for p in parts],
    }  # fmt: skip


def run_part(run_dir: Path, task: int) -> Path:
    job = json.loads((run_dir / JOB_FILE).read_text())
    parts = job["parts"]
    if not 0 <= task < len(parts):
        raise InputError(f"task {task}: the job has parts 0-{len(parts) - 1}")
    part = Part(tuple(parts[task]["policies"]), tuple(parts[task]["grace_periods"]))
    spec = spec_from_dict(job["spec"])
    spec = replace(
        spec, sweep=replace(spec.sweep, policies=part.policies, grace_periods=part.grace_periods)
    )
    on_event = to_logger(logging.getLogger("ptc.sim.worker"))
    began = time.perf_counter()
    sim = schedule_workload(spec, on_event)
    swept = time.perf_counter()
    result = run_sweep(sim.schedule, sim.workload.priority, spec.sweep, on_event=on_event)
    done = time.perf_counter()
    out = piece_path(run_dir, task)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_samples(result, out)
    info = {
        "task": task,
        "part": part.describe(),
        "host": socket.gethostname(),
        "jobs": len(sim.workload),
        "snapshots": result.samples,
        "schedule_s": round(swept - began, 3),
        "sweep_s": round(done - swept, 3),
        "write_s": round(time.perf_counter() - done, 3),
    }
    write_json(out.with_suffix(".json"), info)
    return out


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python3 -m elastic.sim.worker RUN_DIR TASK", file=sys.stderr)
        return 2
    out = run_part(Path(argv[0]), int(argv[1]))
    logging.getLogger("ptc.sim.worker").info("wrote %s", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
