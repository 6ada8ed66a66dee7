"""`ptc bench`: benchmark campaigns through Slurm job arrays, recorded in a dataset."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic.bench import campaign as campaigns
from elastic.bench import dataset, hpcc, plot, spec
from elastic.cli import draw
from elastic.errors import InputError
from elastic.testbed import experiment as experiments

app = typer.Typer(no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


def default_dataset(exp: experiments.Experiment, name: str = "hpcc") -> Path:
    return exp.datasets_dir / f"{name}.parquet"


@app.command("run")
def run_campaign(
    campaign_file: Annotated[Path, typer.Argument(help="campaign file (YAML)")],
    name: Annotated[str, typer.Argument(help="experiment name")],
    out: Annotated[
        Path | None, typer.Option(help="dataset (Parquet); default in the experiment")
    ] = None,
    one_at_a_time: Annotated[
        bool,
        typer.Option("--one-at-a-time", help="one sbatch per run, each waited for (no arrays)"),
    ] = False,
) -> None:
    """Run what is missing of a campaign on EXPERIMENT; every run becomes a dataset row."""
    plan = spec.load(campaign_file)
    if one_at_a_time:
        plan = dataclasses.replace(plan, arrays=False)
    exp = experiments.load(name)
    path = out or default_dataset(exp, plan.name)
    with draw.progress(err_console) as on_event:
        result = campaigns.run(exp, plan, path, on_event)
    t = result.tally
    console.print(
        f"{plan.name}: {t.done} done, {t.failed} failed, {t.skipped} already in the dataset, "
        f"{len(result.jobs)} Slurm submissions, {result.wall_s:.0f}s"
    )
    console.print(f"dataset: {path} (+ .csv, .columns.json)")


@app.command("hpcc")
def run_hpcc(
    name: Annotated[str, typer.Argument(help="experiment name")],
    nodes: Annotated[
        list[int] | None, typer.Option("--nodes", help="node counts (repeatable)")
    ] = None,
    tasks_per_node: Annotated[list[int] | None, typer.Option("--tasks-per-node")] = None,
    size: Annotated[list[int] | None, typer.Option("--size", help="HPL N (repeatable)")] = None,
    block: Annotated[int, typer.Option(help="HPL NB")] = 80,
    repeat: Annotated[int, typer.Option(help="runs per configuration")] = 1,
    user: Annotated[str, typer.Option(help="cluster user that submits")] = "ptc",
    launcher: Annotated[str, typer.Option(help="how the job starts MPI ranks")] = "srun --mpi=pmix",
    out: Annotated[Path | None, typer.Option(help="dataset (Parquet)")] = None,
) -> None:
    """Shortcut: an HPCC campaign (through the campaign engine) on EXPERIMENT."""
    if repeat < 1:
        raise InputError("--repeat must be at least 1")
    plan = spec.hpcc_campaign(
        nodes=tuple(nodes or [2]),
        tasks_per_node=tuple(tasks_per_node or [1]),
        sizes=tuple(size or [2000]),
        block=block,
        repeats=repeat,
        user=user,
        launcher=launcher,
    )
    exp = experiments.load(name)
    path = out or default_dataset(exp)
    # Each invocation of the shortcut is a new measurement, not a rerun to complete.
    plan = dataclasses.replace(plan, name=f"hpcc-{time.strftime('%Y%m%dT%H%M%S')}")
    with draw.progress(err_console) as on_event:
        result = campaigns.run(exp, plan, path, on_event)
    print_hpcc([{str(k): v for k, v in r.items()} for r in result.rows])
    console.print(f"dataset: {path}")


@app.command()
def show(
    path: Annotated[Path, typer.Argument(help="dataset (Parquet or CSV)")],
    columns: Annotated[
        str | None, typer.Option(help="comma-separated columns (default: the main ones)")
    ] = None,
    limit: Annotated[int, typer.Option(help="rows to print (0: all)")] = 50,
) -> None:
    """Print a dataset's runs."""
    frame = dataset.load(path)
    if columns:
        wanted = [c.strip() for c in columns.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in frame.columns]
        if unknown:
            raise InputError(f"--columns: {unknown[0]!r} is not a column of {path}")
    elif "benchmark" in frame.columns and (frame["benchmark"] == "hpcc").all():
        print_hpcc([{str(k): v for k, v in r.items()} for r in frame.to_dict("records")])
        return
    else:
        preferred = ["run_id", "benchmark", "operator", "size", "n", "log2_box_dim", "nodes",
                     "ranks", "threads", "state", "runtime_s", "solve_time_s", "dof_per_s",
                     "global_dofs", "cost_core_s", "error"]  # fmt: skip
        wanted = [c for c in preferred if c in frame.columns]
    shown = frame if limit == 0 else frame.tail(limit)
    table = Table(*wanted, title=f"{path.name}: {len(frame)} runs", show_lines=False)
    for row in shown[wanted].to_dict("records"):
        table.add_row(*(_fmt(row[c]) for c in wanted))
    console.print(table)
    if "state" in frame.columns:
        counts = frame["state"].value_counts().to_dict()
        console.print(", ".join(f"{k}: {v}" for k, v in counts.items()))


@app.command("plot")
def plot_cmd(
    path: Annotated[Path, typer.Argument(help="dataset (Parquet or CSV)")],
    out: Annotated[Path, typer.Option(help="PNG to write")] = Path("runtime-vs-size.png"),
    x: Annotated[str, typer.Option(help="problem-size column")] = "global_dofs",
    y: Annotated[str, typer.Option(help="runtime column")] = "solve_time_s",
    by: Annotated[str, typer.Option(help="one line per value of this column")] = "ranks",
) -> None:
    """Runtime against problem size per rank count, log-log (Fig. 6.1), into a PNG."""
    frame = dataset.load(path)
    written = plot.runtime_vs_size(frame, out, x=x, y=y, by=by, title=path.stem)
    console.print(f"plot: {written}")


@app.command("schema")
def schema_cmd() -> None:
    """Print the JSON schema campaign files are validated against."""
    console.print_json(spec.schema_text())


def print_hpcc(rows: list[dict[str, object]]) -> None:
    """One column per run: HPCC has more figures than a terminal has columns."""
    table = Table("", *(str(row["run_id"])[-14:] for row in rows))
    table.add_row("nodes x tasks", *(f"{r['nodes']}x{r['ranks_per_node']}" for r in rows))
    table.add_row("HPL N", *(str(r.get("n")) for r in rows))
    table.add_row("state", *(str(r["state"]) for r in rows))
    table.add_row("elapsed, s", *(_fmt(r.get("elapsed_s")) for r in rows))
    for key, unit in hpcc.HEADLINE.items():
        table.add_row(f"{key} ({unit})", *(_fmt(row.get(key)) for row in rows))
    console.print(table)
    for row in rows:
        if row.get("error"):
            console.print(f"[red]{row['run_id']}[/]: {row['error']}", highlight=False)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return "-" if value != value else f"{value:.4g}"
    return "-" if value is None else str(value)
