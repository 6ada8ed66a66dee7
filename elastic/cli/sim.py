"""`ptc sim`: trace statistics, policy x grace-period sweeps, reports and plots."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from elastic.atomic import replacing, write_json
from elastic.errors import PtcError
from elastic.policies import POLICY_NAMES
from elastic.sim import plots
from elastic.sim.heatmap import HEATMAP, HeatmapSpec, pv_heatmap
from elastic.sim.results import (
    SAMPLES,
    SUMMARY,
    read_result,
    summarize,
    write_samples,
    write_summary,
)
from elastic.sim.schedule import simulate
from elastic.sim.sweep import PAPER_GRACE_PERIODS, SweepConfig, run_sweep
from elastic.sim.traces import FilterStep, trace_stats
from elastic.sim.traces.filters import DAY_S
from elastic.sim.workload import WorkloadSpec, arrivals, prepare

app = typer.Typer(no_args_is_help=True)
console = Console()
RUN_INFO = "run.json"

TraceArg = Annotated[Path, typer.Argument(help="Trace: .swf, NREL Eagle .csv or HTCondor .submit")]
MaxNodes = Annotated[int, typer.Option("--max-nodes", help="Filter: node_count <= N.")]
MaxRuntime = Annotated[float, typer.Option("--max-runtime", help="Filter: runtime <= S seconds.")]
Copies = Annotated[
    int | None,
    typer.Option("--htc-copies", help="Shuffled copies (default 10 for .submit, else 1)."),
]
Seed = Annotated[int, typer.Option("--seed", help="Seed for shuffles, RANDOM and --high-fraction.")]
Limit = Annotated[int | None, typer.Option("--limit-jobs", help="Keep the first K jobs.")]


@app.command("stats")
def stats_cmd(
    trace: TraceArg,
    max_nodes: MaxNodes = 20,
    max_runtime: MaxRuntime = DAY_S,
    htc_copies: Copies = None,
    seed: Seed = 0,
    limit_jobs: Limit = None,
) -> None:
    """Print Table 1 statistics of TRACE after the paper's filters."""
    spec = WorkloadSpec(trace, max_nodes, max_runtime, htc_copies, seed, limit_jobs)
    workload, steps = prepare(spec)
    _print_filters(trace, steps)
    s = trace_stats(workload)
    table = Table(title=f"{trace.name}: {s.jobs:,} jobs, {s.node_hours:,.2f} node-hours")
    for column in ("", "mean", "min", "25%", "50%", "75%", "max"):
        table.add_column(column, justify="right")
    for label, d in (("runtime, s", s.runtime), ("node count", s.node_count)):
        table.add_row(label, *(f"{v:.2f}" for v in (d.mean, d.min, d.q25, d.q50, d.q75, d.max)))
    console.print(table)


@app.command("run")
def run_cmd(
    trace: TraceArg,
    out: Annotated[Path, typer.Option("--out", help="Directory for results and plots.")],
    nodes: Annotated[int, typer.Option("--nodes", help="N: partition size.")] = 20,
    preempt: Annotated[int, typer.Option("--preempt", help="P: nodes reclaimed.")] = 10,
    interval: Annotated[float, typer.Option("--interval", help="T: seconds.")] = 30.0,
    policies: Annotated[str, typer.Option("--policies")] = ",".join(POLICY_NAMES),
    grace_periods: Annotated[
        str, typer.Option("--grace-periods", help="Seconds, comma-separated.")
    ] = ",".join(f"{g:g}" for g in PAPER_GRACE_PERIODS),
    arrival: Annotated[str, typer.Option("--arrival", help="batch (paper) or submit.")] = "batch",
    htc_copies: Copies = None,
    seed: Seed = 0,
    priority_rule: Annotated[
        list[str] | None,
        typer.Option("--priority-rule", help="PAP+ class, e.g. 'queue=bigmem:10' (repeatable)."),
    ] = None,
    high_fraction: Annotated[
        float, typer.Option("--high-fraction", help="Seeded random share of jobs at priority 10.")
    ] = 0.0,
    max_nodes: Annotated[
        int | None, typer.Option("--max-nodes", help="Filter (default: --nodes).")
    ] = None,
    max_runtime: MaxRuntime = DAY_S,
    limit_jobs: Limit = None,
    bf_max_job_test: Annotated[int | None, typer.Option("--bf-max-job-test")] = None,
    plots_enabled: Annotated[bool, typer.Option("--plots/--no-plots")] = True,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress")] = None,
) -> None:
    """Simulate TRACE, evaluate every policy x grace period, write samples, summary and plots."""
    spec = WorkloadSpec(
        trace,
        max_nodes if max_nodes is not None else nodes,
        max_runtime,
        htc_copies,
        seed,
        limit_jobs,
        tuple(priority_rule or ()),
        high_fraction,
    )
    config = SweepConfig(
        policies=_names(policies),
        grace_periods=_seconds(grace_periods),
        preempt=preempt,
        interval=interval,
        seed=seed,
    )
    workload, steps = prepare(spec)
    _print_filters(trace, steps)
    submit = arrivals(workload, arrival)
    began = time.perf_counter()
    schedule = simulate(
        submit,
        workload.runtime,
        workload.requested,
        workload.nodes,
        nodes,
        bf_max_job_test=bf_max_job_test,
    )
    console.print(
        f"scheduled {len(workload):,} jobs on {nodes} nodes in "
        f"{time.perf_counter() - began:.2f} s; makespan {schedule.makespan / 86400:.2f} days"
    )
    result = run_sweep(schedule, workload.priority, config, progress=_progress(progress))
    elapsed = time.perf_counter() - began
    high = int((workload.priority > 1.0).sum())
    console.print(
        f"{result.samples:,} snapshots x {len(config.policies)} policies x "
        f"{len(config.grace_periods)} grace periods evaluated; simulated in {elapsed:.2f} s"
    )
    with _stage(f"writing {result.wc.size:,} samples"):
        write_samples(result, out / SAMPLES)
    summary = summarize(result)
    write_summary(summary, out / SUMMARY)
    title = f"{trace.name}, N={nodes}, P={preempt}"
    heat = pv_heatmap(workload, submit, HeatmapSpec(), ("PAP", "PAP+"))
    with replacing(out / HEATMAP) as tmp:
        heat.to_parquet(tmp)
    write_json(
        out / RUN_INFO,
        {
            "trace": str(trace),
            "title": title,
            "jobs": len(workload),
            "high_priority_jobs": high,
            "snapshots": result.samples,
            "makespan_s": schedule.makespan,
            "arrival": arrival,
            "nodes": nodes,
            "preempt": preempt,
            "interval_s": interval,
            "seed": seed,
            "priority_rules": list(spec.priority_rules),
            "high_fraction": high_fraction,
            "bf_max_job_test": bf_max_job_test,
            "simulate_and_sweep_s": round(elapsed, 3),
        },
    )
    console.print(f"{len(workload):,} jobs, {high:,} of them high-priority")
    _print_summary(summary, title)
    if plots_enabled:
        with _stage("drawing plots"):
            written = plots.write_all(result, out, title, heat)
        for path in written:
            console.print(f"wrote {path}")
    console.print(f"wrote {out / SAMPLES} and {out / SUMMARY}")


@app.command("report")
def report_cmd(
    directory: Annotated[Path, typer.Argument(help="A `ptc sim run --out` directory.")],
    plots_enabled: Annotated[bool, typer.Option("--plots/--no-plots")] = True,
) -> None:
    """Re-print the summary of a finished run and regenerate its plots."""
    with _stage(f"reading {directory / SAMPLES}"):
        result = read_result(directory / SAMPLES)
    info = _run_info(directory)
    title = str(info.get("title", directory.name))
    summary = summarize(result)
    write_summary(summary, directory / SUMMARY)
    _print_summary(summary, title)
    if plots_enabled:
        heat_path = directory / HEATMAP
        heat = pd.read_parquet(heat_path) if heat_path.is_file() else None
        with _stage("drawing plots"):
            written = plots.write_all(result, directory, title, heat)
        for path in written:
            console.print(f"wrote {path}")


@contextmanager
def _stage(what: str) -> Iterator[None]:
    """A spinner while it runs, then how long it took (also in logs, where nothing spins)."""
    began = time.perf_counter()
    with console.status(f"{what}..."):
        yield
    console.print(f"{what}: {time.perf_counter() - began:.1f} s")


def _run_info(directory: Path) -> dict[str, object]:
    path = directory / RUN_INFO
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise PtcError(f"{path}: not valid JSON ({err})") from None
    return data if isinstance(data, dict) else {}


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip().upper() for part in text.split(",") if part.strip())
    for name in names:
        if name not in POLICY_NAMES:
            raise PtcError(f"--policies: unknown policy {name!r}; choose from {POLICY_NAMES}")
    return names


def _seconds(text: str) -> tuple[float, ...]:
    values: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            raise PtcError(f"--grace-periods: {part!r} is not a number of seconds") from None
        if not (math.isfinite(value) and value >= 0):
            raise PtcError(f"--grace-periods: {part!r} must be >= 0 seconds")
        values.append(value)
    return tuple(values)


def _progress(flag: bool | None) -> bool:
    return sys.stderr.isatty() if flag is None else flag


def _print_filters(trace: Path, steps: list[FilterStep]) -> None:
    for step in steps:
        console.print(f"{trace.name}: {step.name}: {step.before:,} -> {step.after:,} jobs")


def _print_summary(summary: pd.DataFrame, title: str) -> None:
    table = Table(title=f"{title}\nwasted cycles per preemption, node-hours")
    columns = ("policy", "GP (s)", "samples", "median", "IQR", "mean", "cum. high", "cum. all")
    for column in columns:
        table.add_column(column, justify="right")
    for row in summary.to_dict("records"):
        hours = {k: float(row[k]) / 3600 for k in ("median", "iqr", "mean", "total_high", "total")}
        table.add_row(
            str(row["policy"]),
            f"{float(row['gp_s']):g}",
            f"{int(row['samples']):,}",
            f"{hours['median']:.2f}",
            f"{hours['iqr']:.2f}",
            f"{hours['mean']:.2f}",
            _compact(hours["total_high"]),
            _compact(hours["total"]),
        )
    console.print(table)


def _compact(value: float) -> str:
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"
