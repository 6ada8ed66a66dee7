"""`ptc sim`: trace statistics, policy x grace-period sweeps, reports and plots."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from elastic.cli import draw
from elastic.errors import InputError
from elastic.policies import POLICY_NAMES
from elastic.sim import plots
from elastic.sim.heatmap import HEATMAP
from elastic.sim.on_cluster import ClusterSpec, run_on
from elastic.sim.results import SAMPLES, SUMMARY, read_result, summarize, write_summary
from elastic.sim.run import RUN_INFO, RunSpec
from elastic.sim.run import run as sim_run
from elastic.sim.sweep import PAPER_GRACE_PERIODS, SweepConfig
from elastic.sim.traces import FilterStep, processor_mismatch, public, trace_stats
from elastic.sim.traces.filters import DAY_S
from elastic.sim.workload import WorkloadSpec, prepare
from elastic.testbed import experiment as experiments

app = typer.Typer(no_args_is_help=True)
console = Console()

TraceArg = Annotated[Path, typer.Argument(help="Trace: .swf, NREL Eagle .csv or HTCondor .submit")]
MaxNodes = Annotated[int, typer.Option("--max-nodes", help="Filter: node_count <= N.")]
MaxRuntime = Annotated[float, typer.Option("--max-runtime", help="Filter: runtime <= S seconds.")]
Copies = Annotated[
    int | None,
    typer.Option("--htc-copies", help="Shuffled copies (default 10 for .submit, else 1)."),
]
Seed = Annotated[int, typer.Option("--seed", help="Seed for shuffles, RANDOM and --high-fraction.")]
Limit = Annotated[int | None, typer.Option("--limit-jobs", help="Keep the first K jobs.")]
BfMaxJobTest = Annotated[
    int | None,
    typer.Option(
        "--bf-max-job-test",
        help="Backfill looks at the head and the next K-1 queued jobs (Slurm's bf_max_job_test); "
        "default: the whole queue.",
    ),
]
SwfProcessors = Annotated[
    str,
    typer.Option(
        "--swf-processors",
        help="SWF job size: 'requested' (field 8, default) or 'allocated' (field 5); "
        "the other field is the fallback.",
    ),
]


@app.command("fetch")
def fetch_cmd(
    names: Annotated[
        list[str] | None, typer.Argument(help=f"Traces: {', '.join(public.TRACES)}; none: all.")
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option("--from", help="Copy from this directory instead of downloading."),
    ] = None,
    list_only: Annotated[
        bool, typer.Option("--list", help="List the traces, fetch nothing.")
    ] = False,
) -> None:
    """Download public traces into the cache, each checked against its pinned SHA-256; print
    their paths."""
    if list_only:
        table = Table(title=f"public traces (cache: {public.cache_dir()})")
        for column in ("name", "file", "what", "licence", "cached"):
            table.add_column(column)
        for t in public.TRACES.values():
            cached = "yes" if public.cached(t).is_file() else "no"
            table.add_row(t.name, t.file, t.what, t.licence, cached)
        console.print(table)
        return
    err = Console(stderr=True)
    with draw.progress(err) as on_event:
        found = public.fetch(names or list(public.TRACES), on_event, source_dir=source)
    for path in found:
        console.print(str(path), highlight=False, soft_wrap=True)


@app.command("stats")
def stats_cmd(
    trace: TraceArg,
    max_nodes: MaxNodes = 20,
    max_runtime: MaxRuntime = DAY_S,
    htc_copies: Copies = None,
    seed: Seed = 0,
    limit_jobs: Limit = None,
    swf_processors: SwfProcessors = "requested",
) -> None:
    """Print Table 1 statistics of TRACE after the paper's filters."""
    spec = WorkloadSpec(
        trace, max_nodes, max_runtime, htc_copies, seed, limit_jobs, swf_processors=swf_processors
    )
    workload, steps = prepare(spec)
    _print_filters(trace, steps)
    differ = processor_mismatch(workload)
    if differ:
        console.print(
            f"{trace.name}: {differ:,} jobs requested a different number of processors than "
            f"they were allocated; sizes from the {swf_processors} count"
        )
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
    bf_max_job_test: BfMaxJobTest = None,
    swf_processors: SwfProcessors = "requested",
    plots_enabled: Annotated[bool, typer.Option("--plots/--no-plots")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    on: Annotated[
        str | None,
        typer.Option(
            "--on",
            help="Run the sweep as a Slurm job array on this ptc experiment's cluster; "
            "the pieces are merged here.",
        ),
    ] = None,
    tasks: Annotated[
        int | None,
        typer.Option("--tasks", help="With --on: array tasks (default: one per policy)."),
    ] = None,
    cluster_user: Annotated[
        str, typer.Option("--cluster-user", help="With --on: the user the jobs run as.")
    ] = "ptc",
    partition: Annotated[
        str | None, typer.Option("--partition", help="With --on: Slurm partition.")
    ] = None,
    mem_mb: Annotated[
        int | None, typer.Option("--mem-mb", help="With --on: memory per task, MiB.")
    ] = None,
    keep: Annotated[
        bool, typer.Option("--keep", help="With --on: keep the run directory on the cluster.")
    ] = False,
) -> None:
    """Simulate TRACE, evaluate every policy x grace period, write samples, summary and plots."""
    workload = WorkloadSpec(
        trace,
        max_nodes if max_nodes is not None else nodes,
        max_runtime,
        htc_copies,
        seed,
        limit_jobs,
        tuple(priority_rule or ()),
        high_fraction,
        swf_processors=swf_processors,
    )
    sweep = SweepConfig(
        policies=_names(policies),
        grace_periods=_seconds(grace_periods),
        preempt=preempt,
        interval=interval,
        seed=seed,
    )
    spec = RunSpec(workload, nodes, arrival, bf_max_job_test, sweep, plots_enabled)
    with draw.progress(console if progress else Console(force_terminal=False)) as on_event:
        if on is None:
            result = sim_run(spec, out, on_event)
        else:
            cluster = ClusterSpec(tasks, cluster_user, partition, mem_mb=mem_mb, keep=keep)
            result = run_on(experiments.load(on), spec, out, cluster, on_event)
    console.print(f"{result.jobs:,} jobs, {result.high_priority_jobs:,} of them high-priority")
    _print_summary(result.summary, result.title)
    for path in result.written:
        console.print(f"wrote {path}")


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
        raise InputError(f"{path}: not valid JSON ({err})") from None
    return data if isinstance(data, dict) else {}


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip().upper() for part in text.split(",") if part.strip())
    for name in names:
        if name not in POLICY_NAMES:
            raise InputError(f"--policies: unknown policy {name!r}; choose from {POLICY_NAMES}")
    return names


def _seconds(text: str) -> tuple[float, ...]:
    values: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            raise InputError(f"--grace-periods: {part!r} is not a number of seconds") from None
        if not (math.isfinite(value) and value >= 0):
            raise InputError(f"--grace-periods: {part!r} must be >= 0 seconds")
        values.append(value)
    return tuple(values)


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
