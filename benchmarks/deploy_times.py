"""Wall time of `ptc deploy` on the local testbed: first run, no-op rerun, and adding a node.

    python benchmarks/deploy_times.py [--sizes 2 8 16] [--variants plain mitogen prepared]
        [--plain-sizes 2 8] [--add-node-size 0] [--prefix bench] [--out benchmarks/results/deploy]

For each size N and each variant it brings up 1 head + N compute nodes (fresh containers from
the warm node image), runs site.yml twice (a fresh cluster, then a run that must change
nothing), then deploys a third time as `ptc deploy` does by default (each node's record of
its last deploy checked: when all are up to date, Ansible does not run) and takes the
experiment down. A variant is a set of speed-ups: ``plain`` is Ansible's
own linear strategy on the bare image (a fresh Debian: every role installs its packages),
``mitogen`` the same through mitogen's strategy (`ptc deploy`'s default), ``prepared`` mitogen
on the prepared image (the roles' packages installed; `ptc up`'s default locally). Variants
alternate within a size, so all see the same machine. For --add-node-size it then grows the last
experiment by one node with `ptc modify` and times `ptc deploy --limit node-N,head`, as when a
node joins a running cluster. ``prepared-stock`` is ``prepared`` with Ansible's own controller
settings where ptc changes them: interpreter discovery, every fact also copied into a top-level
variable, and the jsonfile fact cache (which decodes a host's facts again on every read).

With --out it writes results.json, results.md (the table, the ratios plain/variant, the load
average before and after each size, and the per-role split of every first deploy, read from the
per-task events ansible-runner keeps in the run directory) and deploy_times.png (time against N).
Prints the figures; never asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elastic import atomic  # noqa: E402
from elastic.deploy import runner  # noqa: E402
from elastic.deploy.target import Target  # noqa: E402
from elastic.testbed import experiment as experiments  # noqa: E402
from elastic.testbed import lifecycle  # noqa: E402

PROFILE = REPO / "profiles" / "slurm_cluster.py"
# name: (mitogen strategy on, the nodes' disk image, Ansible's stock controller settings)
VARIANTS = {
    "plain": (False, "bare", False),
    "mitogen": (True, "bare", False),
    "prepared": (True, "prepared", False),
    "prepared-stock": (True, "prepared", True),
}
# Pairs (without, with) a speed-up, reported as ratios when both ran.
PAIRS = [("plain", "mitogen"), ("plain", "prepared"), ("prepared-stock", "prepared")]
# What ptc's ansible.cfg changes from Ansible's defaults on the controller, set back.
STOCK_ENVIRONMENT = {
    "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
    "ANSIBLE_INJECT_FACT_VARS": "True",
}
# Events that open a stretch of the run: a task's wall time runs to the next one.
_MARKS = (
    "playbook_on_play_start",
    "playbook_on_task_start",
    "playbook_on_handler_task_start",
    "playbook_on_stats",
)


@dataclass
class Row:
    size: int
    variant: str
    run: str
    seconds: float
    changed: int
    failed: int
    hosts: int
    load_before: tuple[float, float, float]
    roles: dict[str, float] = field(default_factory=dict)


def role_split(run_dir: Path, began: float, ended: float) -> dict[str, float]:
    """Wall seconds per role (plays' own tasks and fact gathering by name), from the events,
    and ptc's own time around the playbook (``began``/``ended``: wall clock of the deploy call).

    Under the linear strategy a task ends when the slowest host is done, so each task's wall time
    is the gap to the next task or play start.
    """
    events = sorted(
        (json.loads(p.read_text()) for p in (run_dir / "ansible" / "job_events").glob("*.json")),
        key=lambda e: int(e["counter"]),
    )
    marks: list[tuple[float, str]] = []
    for event in events:
        if event["event"] not in _MARKS:
            continue
        data = event.get("event_data", {})
        if event["event"] == "playbook_on_play_start":
            key = "(play start)"
        elif data.get("role"):
            key = str(data["role"])
        elif data.get("task") == "Gathering Facts":
            key = "(facts)"
        else:
            key = f"(play) {data.get('play', '?')}"
        marks.append((datetime.fromisoformat(event["created"]).timestamp(), key))
    split: dict[str, float] = defaultdict(float)
    for (start, key), (end, _) in itertools.pairwise(marks):
        split[key] += end - start
    if marks:
        stamps = [datetime.fromisoformat(e["created"]).timestamp() for e in events]
        split["(ptc and ansible start)"] = stamps[0] - began
        split["(play end to return)"] = ended - stamps[-1]
    return dict(sorted(split.items(), key=lambda kv: -kv[1]))


def timed_deploy(
    exp: experiments.Experiment,
    row: Row,
    rows: list[Row],
    console: Console,
    mitogen: bool,
    limit: str | None = None,
    skip_if_current: bool = False,
) -> None:
    started, began = time.monotonic(), time.time()
    try:
        result = runner.deploy(
            Target.of_experiment(exp), limit=limit, mitogen=mitogen, skip_if_current=skip_if_current
        )
    except Exception as err:  # a failed run is a figure too; keep going with the next size
        row.seconds, row.failed = time.monotonic() - started, -1
        rows.append(row)
        console.print(f"[red]{row.size} {row.variant} {row.run} failed[/]: {err}")
        raise
    row.seconds = time.monotonic() - started
    row.changed, row.failed, row.hosts = result.changed, result.failed, len(result.hosts)
    row.roles = role_split(result.run_dir, began, time.time())
    rows.append(row)
    console.print(
        f"[bold]1+{row.size} {row.variant} {row.run}[/]: {row.seconds:.1f}s, {result.describe()}"
    )


def measure(
    size: int, variant: str, add_node: bool, prefix: str, rows: list[Row], console: Console
) -> None:
    name = f"{prefix}-{size}-{variant}"
    mitogen, image, stock = VARIANTS[variant]
    exp = lifecycle.up(PROFILE, {"computeNodeCount": str(size)}, name, "local", None, image=image)
    with stock_controller() if stock else contextlib.nullcontext(), contextlib.ExitStack() as down:
        down.callback(lifecycle.down, name)
        for run in ("first", "no-op", "up to date"):
            # "no-op" runs the playbook (--full); "up to date" is `ptc deploy`'s own check of
            # each node's record, which skips Ansible when nothing changed
            timed_deploy(exp, Row(size, variant, run, 0, 0, 0, 0, os.getloadavg()), rows, console,
                         mitogen, skip_if_current=run == "up to date")  # fmt: skip
        if add_node:
            late = f"node-{size}"
            exp, _ = lifecycle.modify(name, {"computeNodeCount": str(size + 1)})
            timed_deploy(exp, Row(size, variant, f"add {late}", 0, 0, 0, 0, os.getloadavg()),
                         rows, console, mitogen, limit=f"{late},head")  # fmt: skip


@contextlib.contextmanager
def stock_controller() -> Iterator[None]:
    """Ansible's own controller settings where ptc changes them, for the runs inside."""
    saved_env = {key: os.environ.get(key) for key in STOCK_ENVIRONMENT}
    saved_cache = runner.fact_cache_environment

    def jsonfile(directory: Path) -> dict[str, str]:
        return {
            "ANSIBLE_CACHE_PLUGIN": "jsonfile",
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(directory),
        }

    os.environ.update(STOCK_ENVIRONMENT)
    runner.fact_cache_environment = jsonfile  # type: ignore[assignment]
    try:
        yield
    finally:
        runner.fact_cache_environment = saved_cache  # type: ignore[assignment]
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _seconds(rows: list[Row], size: int, variant: str, run: str) -> float | None:
    found = [r.seconds for r in rows if (r.size, r.variant, r.run) == (size, variant, run)]
    return found[0] if found and found[0] > 0 else None


def markdown(rows: list[Row], variants: list[str], sizes: list[int], note: str) -> str:
    out = ["# ptc deploy wall time (local testbed)", "", note, ""]
    out += ["| cluster | variant | run | seconds | changed | failed | hosts | load before |"]
    out += ["|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        load = " ".join(f"{x:.1f}" for x in r.load_before)
        out.append(f"| 1+{r.size} | {r.variant} | {r.run} | {r.seconds:.1f} | {r.changed} "
                   f"| {r.failed} | {r.hosts} | {load} |")  # fmt: skip
    pairs = [(a, b) for a, b in PAIRS if a in variants and b in variants]
    if pairs:
        out += ["", "Ratios without / with a speed-up (above 1: the speed-up is faster):", ""]
        for size in sizes:
            for without, variant in pairs:
                for run in ("first", "no-op", "up to date"):
                    a, b = (_seconds(rows, size, v, run) for v in (without, variant))
                    if a and b:
                        out.append(f"- 1+{size} {run}: {without} {a:.1f}s / {variant} {b:.1f}s "
                                   f"= {a / b:.2f}")  # fmt: skip
    out += ["", "Ratios no-op run / up-to-date check (the playbook skipped):", ""]
    for size in sizes:
        for variant in variants:
            a, b = (_seconds(rows, size, variant, run) for run in ("no-op", "up to date"))
            if a and b:
                out.append(f"- 1+{size} {variant}: {a:.1f}s / {b:.1f}s = {a / b:.1f}")
    for variant in variants:
        base = _seconds(rows, sizes[0], variant, "first")
        for size in sizes[1:]:
            other = _seconds(rows, size, variant, "first")
            if base and other:
                out.append(
                    f"- {variant}: first deploy 1+{size} / 1+{sizes[0]} = {other / base:.2f}"
                )
    out += ["", "## Per-role split of each deploy (wall seconds)", ""]
    for r in (r for r in rows if r.roles):
        top = ", ".join(
            f"{k} {v:.1f}" for k, v in sorted(r.roles.items(), key=lambda kv: -kv[1])[:12]
        )
        out.append(f"- 1+{r.size} {r.variant} {r.run} ({r.seconds:.1f}s): {top}")
    return "\n".join(out) + "\n"


def plot(rows: list[Row], variants: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for variant in variants:
        for run, style in (("first", "-o"), ("no-op", "--s"), ("up to date", ":^")):
            points = sorted((r.size, r.seconds) for r in rows
                            if r.variant == variant and r.run == run and r.failed >= 0)  # fmt: skip
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, style, label=f"{variant}, {run}")
    ax.set_xlabel("compute nodes N (cluster 1+N)")
    ax.set_ylabel("ptc deploy wall time (s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    atomic.write_bytes(path, buffer.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 8, 16])
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS),
                        default=list(VARIANTS))  # fmt: skip
    parser.add_argument(
        "--plain-sizes",
        type=int,
        nargs="*",
        help="sizes to run the plain variant at (default: all)",
    )
    parser.add_argument("--add-node-size", type=int, default=0, help="0: do not measure")
    parser.add_argument("--prefix", default="bench", help="experiment name prefix")
    parser.add_argument("--out", type=Path, help="directory for results.md/.json and the PNG")
    args = parser.parse_args()
    os.environ.setdefault(
        "CONTAINERS_CONF", str(REPO / "elastic/testbed/backends/local/containers.conf")
    )
    console = Console(stderr=True)
    rows: list[Row] = []
    note = (f"machine: {os.cpu_count()} CPUs, nodes are containers sharing them; "
            f"started {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, load average "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()))  # fmt: skip
    started = note
    for size in args.sizes:
        for variant in args.variants:
            if variant == "plain" and size not in (args.plain_sizes or args.sizes):
                continue
            try:
                measure(size, variant, size == args.add_node_size, args.prefix, rows, console)
            except Exception as err:  # a failed deploy is in rows; the next cluster still runs
                console.print(f"[red]1+{size} {variant}[/]: {err}")
            # Written after every cluster, so an interrupted run keeps what it measured.
            note = (
                started
                + "; load average after the last cluster "
                + " ".join(f"{x:.2f}" for x in os.getloadavg())
            )
            if args.out and rows:
                write(args.out, rows, args.variants, args.sizes, note)
    table = Table(title="ptc deploy wall time (local testbed, this machine)")
    for column in ("cluster", "variant", "run", "seconds", "changed", "failed", "hosts"):
        table.add_column(column, justify="left" if column in ("cluster", "variant", "run")
                         else "right")  # fmt: skip
    for r in rows:
        table.add_row(f"1+{r.size}", r.variant, r.run, f"{r.seconds:.1f}", str(r.changed),
                      str(r.failed), str(r.hosts))  # fmt: skip
    Console().print(table)
    Console().print(note)


def write(out: Path, rows: list[Row], variants: list[str], sizes: list[int], note: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out / "results.json", {"note": note, "rows": [asdict(r) for r in rows]})
    atomic.write_text(out / "results.md", markdown(rows, variants, sizes, note))
    plot(rows, variants, out / "deploy_times.png")


if __name__ == "__main__":
    main()
