"""`ptc demo`: the main job end to end on the local testbed, with a short summary at the end.

profile -> nodes (`ptc up`) -> playbooks (`ptc deploy`) -> testinfra (`ptc verify`)
-> an HPCC run through Slurm -> a row in the experiment's Parquet dataset.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic.bench import campaign as campaigns
from elastic.bench import hpcc, slurm_job, spec
from elastic.cli import draw
from elastic.cli.bench import default_dataset
from elastic.errors import PtcError
from elastic.paths import REPO_ROOT
from elastic.testbed import experiment as experiments
from elastic.testbed import lifecycle

console = Console()
err_console = Console(stderr=True)


def demo(
    name: Annotated[str, typer.Option("--name", "-n", help="experiment name")] = "demo",
    nodes: Annotated[int, typer.Option(help="compute nodes")] = 2,
    profile: Annotated[Path, typer.Option(help="geni-lib profile")] = REPO_ROOT
    / "profiles/slurm_cluster.py",
    keep: Annotated[bool, typer.Option(help="leave the cluster up afterwards")] = True,
) -> None:
    """Run the whole pipeline on the local testbed and summarise it."""
    from elastic.deploy import runner, verify
    from elastic.deploy.target import Target

    stages: list[tuple[str, float, str]] = []

    def stage(label: str, started: float, note: str = "") -> None:
        stages.append((label, time.monotonic() - started, note))
        err_console.rule(f"[green]{label} done[/] ({stages[-1][1]:.1f}s)")

    started = time.monotonic()
    if experiments.exists(name):
        exp = experiments.load(name)
        if exp.state != experiments.State.READY:
            raise PtcError(
                f"experiment {name!r} exists in state {exp.state}; `ptc down {name}` first"
            )
        stage("nodes (reused)", started, f"{name} already up")
    else:
        with draw.progress(err_console) as on_event:
            exp = lifecycle.up(
                profile, {"computeNodeCount": str(nodes)}, name, "local", None, on_event
            )
        stage("nodes", started, f"1+{nodes} containers, {exp.image} image")

    target = Target.of_experiment(exp)
    started = time.monotonic()
    with draw.progress(err_console) as on_event:
        result = runner.deploy(target, on_event=on_event)
    stage("deploy", started, result.describe())

    started = time.monotonic()
    with draw.progress(err_console) as on_event:
        checks = verify.verify(target, on_event)
    stage("verify", started, f"testinfra: {checks.describe()}")

    started = time.monotonic()
    plan = spec.hpcc_campaign(
        nodes=(nodes,),
        tasks_per_node=(1,),
        sizes=(2000,),
        name=f"demo-hpcc-{time.strftime('%Y%m%dT%H%M%S')}",
    )
    path = default_dataset(exp)
    with draw.progress(err_console) as on_event:
        row = campaigns.run(exp, plan, path, on_event).rows[0]
    stage("benchmark", started, f"HPCC job {row['job_id']} {row['state']}")

    summary = Table(title=f"ptc demo: {name}", show_header=True)
    summary.add_column("stage")
    summary.add_column("seconds", justify="right")
    summary.add_column("result")
    for label, seconds, note in stages:
        summary.add_row(label, f"{seconds:.1f}", note)
    console.print(summary)
    figures = Table(title="HPCC headline figures", show_header=True)
    figures.add_column("figure")
    figures.add_column("value", justify="right")
    figures.add_column("unit")
    for key, unit in hpcc.HEADLINE.items():
        value = row.get(key)
        figures.add_row(key, f"{value:.4g}" if isinstance(value, float) else "-", unit)
    console.print(figures)
    # Fair-share as Slurm sees it for the demo user; the benchmark's usage shows once the
    # controller has recomputed it (PriorityCalcPeriod).
    columns = ("Account", "User", "NormShares", "RawUsage", "EffectvUsage", "FairShare")
    shares = slurm_job.Remote(exp.ssh_config_path, "head").run(
        f"sshare --noheader --parsable2 --users={plan.user} --format={','.join(columns)}"
    )
    fairshare = Table(title=f"sshare --users={plan.user}", show_header=True)
    for column in columns:
        fairshare.add_column(column, justify="left" if column in ("Account", "User") else "right")
    for line in shares.splitlines():
        fairshare.add_row(*line.split("|"))
    console.print(fairshare)
    console.print(f"dataset: {path}")
    if row.get("error"):
        raise PtcError(f"the benchmark run did not produce figures: {row['error']}")
    if not keep:
        with draw.progress(err_console) as on_event:
            lifecycle.down(name, on_event)
        return
    console.print(
        "The cluster stays up. Look around from the checkout, then tear it down:", highlight=False
    )
    for command in next_steps(name, path):
        console.print(f"  {command}", highlight=False, markup=False)


def next_steps(name: str, dataset: Path) -> list[str]:
    """Commands to run after the demo, as typed from the checkout (``bin/ptc`` finds the same
    state directory the demo used when ``$PTC_HOME`` is the same)."""
    shown = dataset.relative_to(REPO_ROOT) if dataset.is_relative_to(REPO_ROOT) else dataset
    return [
        f"bin/ptc status {name}",
        f"bin/ptc ssh {name} head sinfo",
        f"bin/ptc bench show {shown}",
        f"bin/ptc down {name}",
    ]


def register(app: typer.Typer) -> None:
    app.command()(demo)
