"""One simulator run, end to end: workload -> schedule -> sweep -> files in ``out``.

``run(spec, out)`` is what ``ptc sim run`` does, callable from Python with no terminal: it
returns a :class:`RunResult` and reports progress through ``on_event`` (topics ``sim`` for the
stages and ``sweep`` for the snapshot chunks). The CLI, the benchmark scripts and the cluster
mode (``elastic.sim.on_cluster``, which runs the sweep as a Slurm job array and hands the merged
sweep to ``finish``) all go through it.

Files written (atomically): ``samples.parquet``, ``summary.csv``, ``pv_heatmap.parquet``,
``run.json`` and, unless ``spec.plots`` is off, the figures. Plotting (matplotlib) is imported
only to draw, so the sweep tasks on cluster nodes need numpy, pandas and pyarrow alone.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elastic.atomic import replacing, write_json
from elastic.errors import InputError
from elastic.events import OnEvent, Reporter
from elastic.sim.heatmap import HEATMAP, HeatmapSpec, pv_heatmap
from elastic.sim.results import SAMPLES, SUMMARY, summarize, write_samples, write_summary
from elastic.sim.schedule import Schedule, simulate
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep
from elastic.sim.traces import FilterStep, Trace, processor_mismatch
from elastic.sim.workload import WorkloadSpec, arrivals, prepare

RUN_INFO = "run.json"
ARRIVALS = ("batch", "submit")


@dataclass(frozen=True)
class RunSpec:
    """Everything a run depends on. ``nodes`` is N; ``workload.max_nodes`` filters the trace
    (usually N as well)."""

    workload: WorkloadSpec
    nodes: int = 20
    arrival: str = "batch"
    bf_max_job_test: int | None = None
    sweep: SweepConfig = field(default_factory=SweepConfig)
    plots: bool = True

    def __post_init__(self) -> None:
        if self.arrival not in ARRIVALS:
            raise InputError(f"--arrival must be 'batch' or 'submit', got {self.arrival!r}")
        if self.nodes < 1:
            raise InputError(f"--nodes must be >= 1, got {self.nodes}")

    @property
    def title(self) -> str:
        return f"{self.workload.path.name}, N={self.nodes}, P={self.sweep.preempt}"


@dataclass
class Simulated:
    """The part of a run before the sweep: the workload and its schedule."""

    workload: Trace
    filters: list[FilterStep]
    processor_mismatch: int
    submit: np.ndarray
    schedule: Schedule
    schedule_s: float


@dataclass
class RunResult:
    out: Path
    title: str
    jobs: int
    high_priority_jobs: int
    filters: list[FilterStep]
    processor_mismatch: int  # SWF: jobs whose requested and allocated processors differ
    makespan_s: float
    schedule_s: float
    sweep_s: float
    sweep: SweepResult
    summary: pd.DataFrame
    written: list[Path]


def schedule_workload(spec: RunSpec, on_event: OnEvent | None = None) -> Simulated:
    """Load, filter and prepare the workload, then schedule it (no sweep, no files)."""
    report = Reporter("sim", on_event)
    workload, steps = prepare(spec.workload)
    name = spec.workload.path.name
    for step in steps:
        report.status(f"{name}: {step.name}: {step.before:,} -> {step.after:,} jobs")
    differ = processor_mismatch(workload)
    if differ:
        report.status(
            f"{name}: {differ:,} of {len(workload):,} jobs requested a different number of "
            f"processors than they were allocated; sizes from the "
            f"{spec.workload.swf_processors} count"
        )
    submit = arrivals(workload, spec.arrival)
    began = time.perf_counter()
    schedule = simulate(
        submit,
        workload.runtime,
        workload.requested,
        workload.nodes,
        spec.nodes,
        bf_max_job_test=spec.bf_max_job_test,
    )
    took = time.perf_counter() - began
    report.status(
        f"scheduled {len(workload):,} jobs on {spec.nodes} nodes in {took:.2f} s; "
        f"makespan {schedule.makespan / 86400:.2f} days"
    )
    return Simulated(workload, steps, differ, submit, schedule, took)


def run(spec: RunSpec, out: Path, on_event: OnEvent | None = None) -> RunResult:
    report = Reporter("sim", on_event)
    began = time.perf_counter()
    sim = schedule_workload(spec, on_event)
    swept = time.perf_counter()
    result = run_sweep(sim.schedule, sim.workload.priority, spec.sweep, on_event=on_event)
    sweep_s = time.perf_counter() - swept
    report.status(
        f"{result.samples:,} snapshots x {len(result.policies)} policies x "
        f"{len(result.grace_periods)} grace periods evaluated in {sweep_s:.2f} s"
    )
    return finish(spec, out, sim, result, sweep_s, began, on_event)


def finish(
    spec: RunSpec,
    out: Path,
    sim: Simulated,
    result: SweepResult,
    sweep_s: float,
    began: float,
    on_event: OnEvent | None = None,
    extra_info: dict[str, object] | None = None,
) -> RunResult:
    """Write a finished sweep's files to ``out`` (``began``: perf_counter at the start)."""
    report = Reporter("sim", on_event)
    workload = sim.workload
    out.mkdir(parents=True, exist_ok=True)
    stage = time.perf_counter()
    write_samples(result, out / SAMPLES)
    report.status(f"wrote {result.wc.size:,} samples in {time.perf_counter() - stage:.1f} s")
    summary = summarize(result)
    write_summary(summary, out / SUMMARY)
    heat = pv_heatmap(workload, sim.submit, HeatmapSpec(), ("PAP", "PAP+"))
    with replacing(out / HEATMAP) as tmp:
        heat.to_parquet(tmp)
    high = int((workload.priority > 1.0).sum())
    elapsed = time.perf_counter() - began
    info = _run_info(spec, sim, result, high, elapsed) | (extra_info or {})
    write_json(out / RUN_INFO, info)
    written = [out / SAMPLES, out / SUMMARY]
    if spec.plots:
        from elastic.sim import plots  # matplotlib: only where figures are drawn

        stage = time.perf_counter()
        written += plots.write_all(result, out, spec.title, heat)
        report.status(f"drew plots in {time.perf_counter() - stage:.1f} s")
    return RunResult(
        out=out,
        title=spec.title,
        jobs=len(workload),
        high_priority_jobs=high,
        filters=sim.filters,
        processor_mismatch=sim.processor_mismatch,
        makespan_s=sim.schedule.makespan,
        schedule_s=sim.schedule_s,
        sweep_s=sweep_s,
        sweep=result,
        summary=summary,
        written=written,
    )


def _run_info(
    spec: RunSpec, sim: Simulated, result: SweepResult, high: int, elapsed: float
) -> dict[str, object]:
    w = spec.workload
    return {
        "trace": str(w.path),
        "title": spec.title,
        "jobs": len(sim.workload),
        "high_priority_jobs": high,
        "snapshots": result.samples,
        "makespan_s": sim.schedule.makespan,
        "arrival": spec.arrival,
        "nodes": spec.nodes,
        "preempt": spec.sweep.preempt,
        "interval_s": spec.sweep.interval,
        "policies": list(result.policies),
        "grace_periods_s": list(result.grace_periods),
        "seed": w.seed,
        "max_nodes": w.max_nodes,
        "max_runtime_s": w.max_runtime,
        "htc_copies": w.htc_copies,
        "limit_jobs": w.limit_jobs,
        "priority_rules": list(w.priority_rules),
        "high_fraction": w.high_fraction,
        "swf_processors": w.swf_processors,
        "processor_mismatch": sim.processor_mismatch,
        "bf_max_job_test": spec.bf_max_job_test,
        "simulate_and_sweep_s": round(elapsed, 3),
    }


def spec_dict(spec: RunSpec) -> dict[str, object]:
    """The spec as plain JSON-able values (paths as strings)."""
    data = asdict(spec)
    data["workload"]["path"] = str(spec.workload.path)
    return data


def spec_from_dict(data: dict[str, Any]) -> RunSpec:
    """The inverse of ``spec_dict``; a field that is missing or unknown is an InputError."""
    try:
        workload = dict(data["workload"])
        workload["path"] = Path(workload["path"])
        workload["priority_rules"] = tuple(workload.get("priority_rules", ()))
        sweep = dict(data["sweep"])
        sweep["policies"] = tuple(sweep["policies"])
        sweep["grace_periods"] = tuple(float(g) for g in sweep["grace_periods"])
        rest = {k: v for k, v in data.items() if k not in ("workload", "sweep")}
        return RunSpec(WorkloadSpec(**workload), sweep=SweepConfig(**sweep), **rest)
    except (KeyError, TypeError) as err:
        raise InputError(f"run spec: {err}") from None
