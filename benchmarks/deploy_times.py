"""Wall time of `ptc deploy` on the local testbed: first and second run, and adding a node.

    python benchmarks/deploy_times.py [--sizes 2 4] [--add-node-size 2] [--prefix bench]

For each size N it brings up 1 head + N compute nodes, runs site.yml twice (a fresh cluster,
then a run that must change nothing) and takes the experiment down. For --add-node-size it
then grows the running experiment by one node with `ptc modify` (a new container on the LAN)
and times that and `ptc deploy --limit node-N,head`, as when a node joins a running cluster.
Prints the figures; never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elastic.deploy import runner  # noqa: E402
from elastic.deploy.target import Target  # noqa: E402
from elastic.testbed import experiment as experiments  # noqa: E402
from elastic.testbed import lifecycle  # noqa: E402

PROFILE = REPO / "profiles" / "slurm_cluster.py"


@dataclass
class Row:
    nodes: str
    run: str
    seconds: float
    changed: int
    hosts: int


def timed_deploy(exp: experiments.Experiment, label: str, rows: list[Row], console: Console,
                 limit: str | None = None) -> None:  # fmt: skip
    started = time.monotonic()
    result = runner.deploy(Target.of_experiment(exp), limit=limit)
    rows.append(Row(label.split(":")[0], label.split(":")[1], time.monotonic() - started,
                    result.changed, len(result.hosts)))  # fmt: skip
    console.print(f"[bold]{label}[/]: {rows[-1].seconds:.1f}s, {result.describe()}")


def measure(size: int, add_node: bool, prefix: str, rows: list[Row], console: Console) -> None:
    name = f"{prefix}-{size}"
    exp = lifecycle.up(PROFILE, {"computeNodeCount": str(size)}, name, "local", None)
    try:
        timed_deploy(exp, f"1+{size}:first run", rows, console)
        timed_deploy(exp, f"1+{size}:second run", rows, console)
        if add_node:
            late = f"node-{size}"
            started = time.monotonic()
            exp, _ = lifecycle.modify(name, {"computeNodeCount": str(size + 1)})
            seconds = time.monotonic() - started
            rows.append(Row(f"1+{size}", f"ptc modify: start {late}", seconds, 0, 1))
            console.print(f"[bold]ptc modify[/]: {seconds:.1f}s")
            timed_deploy(exp, f"1+{size}:add {late} (--limit {late},head)", rows, console,
                         limit=f"{late},head")  # fmt: skip
    finally:
        lifecycle.down(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--add-node-size", type=int, default=2, help="0: do not measure")
    parser.add_argument("--prefix", default="bench", help="experiment name prefix")
    args = parser.parse_args()
    os.environ.setdefault(
        "CONTAINERS_CONF", str(REPO / "elastic/testbed/backends/local/containers.conf")
    )
    console = Console(stderr=True)
    rows: list[Row] = []
    for size in args.sizes:
        measure(size, size == args.add_node_size, args.prefix, rows, console)

    table = Table(title="ptc deploy wall time (local testbed, this machine)")
    for column in ("cluster", "run", "seconds", "changed tasks", "hosts"):
        table.add_column(column, justify="left" if column in ("cluster", "run") else "right")
    for row in rows:
        table.add_row(row.nodes, row.run, f"{row.seconds:.1f}", str(row.changed), str(row.hosts))
    Console().print(table)
    Console().print(f"machine: {os.cpu_count()} CPUs; nodes are containers sharing them")


if __name__ == "__main__":
    main()
