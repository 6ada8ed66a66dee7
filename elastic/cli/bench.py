"""`ptc bench`: benchmark campaigns through Slurm, recorded in a Parquet dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic.bench import campaign as campaigns
from elastic.bench import dataset, hpcc
from elastic.errors import PtcError
from elastic.testbed import experiment as experiments

app = typer.Typer(no_args_is_help=True)
console = Console()


def default_dataset(exp: experiments.Experiment) -> Path:
    return exp.dir / "datasets" / "hpcc.parquet"


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
    launcher: Annotated[
        str, typer.Option(help="how the job starts MPI ranks")
    ] = campaigns.Campaign.launcher,
    out: Annotated[Path | None, typer.Option(help="dataset (Parquet)")] = None,
) -> None:
    """Run an HPCC campaign through Slurm on EXPERIMENT and append every run to the dataset."""
    exp = experiments.load(name)
    if repeat < 1:
        raise PtcError("--repeat must be at least 1")
    plan = campaigns.Campaign(
        nodes=tuple(nodes or [2]),
        tasks_per_node=tuple(tasks_per_node or [1]),
        sizes=tuple(size or [2000]),
        block=block,
        repeats=repeat,
        user=user,
        launcher=launcher,
    )
    path = out or default_dataset(exp)
    rows = campaigns.run(exp, plan, path)
    print_rows(rows)
    console.print(f"dataset: {path}")


@app.command()
def show(path: Annotated[Path, typer.Argument(help="dataset (Parquet)")]) -> None:
    """Print a dataset's runs and headline figures."""
    if not path.is_file():
        raise PtcError(f"dataset {str(path)!r} does not exist")
    print_rows(
        [{str(k): v for k, v in row.items()} for row in dataset.load(path).to_dict("records")]
    )


def print_rows(rows: list[dict[str, object]]) -> None:
    """One column per run: HPCC has more figures than a terminal has columns."""
    table = Table("", *(str(row["run_id"]) for row in rows))
    table.add_row("nodes x tasks", *(f"{r['nodes']}x{r['tasks_per_node']}" for r in rows))
    table.add_row("HPL N", *(str(r["n"]) for r in rows))
    table.add_row("state", *(str(r["state"]) for r in rows))
    table.add_row("elapsed, s", *(_fmt(r["elapsed_s"]) for r in rows))
    for key, unit in hpcc.HEADLINE.items():
        table.add_row(f"{key} ({unit})", *(_fmt(row.get(key)) for row in rows))
    console.print(table)
    for row in rows:
        if row.get("error"):
            console.print(f"[red]{row['run_id']}[/]: {row['error']}")


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)
