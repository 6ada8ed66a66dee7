"""Campaign throughput on a deployed cluster: job arrays against one sbatch at a time.

    python benchmarks/bench_campaign_throughput.py EXPERIMENT [--runs 16] [--concurrency 2]

The same small HPGMG-FE campaign (``--runs`` runs of a few sizes on one node, one rank each)
runs twice through the campaign engine, under fresh names so nothing is skipped:

- as job arrays (one per shape) with ``%concurrency`` tasks at once;
- with ``arrays: false``: one ``sbatch`` per run, each waited for before the next, which is
  how a script that loops over ``sbatch`` and waits behaves.

Runs per minute count the engine's whole wall time: submission, Slurm's scheduling, the runs,
sacct polling and writing the dataset. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elastic.bench import campaign as campaigns  # noqa: E402
from elastic.bench import spec  # noqa: E402
from elastic.testbed import experiment as experiments  # noqa: E402


def plan(name: str, runs: int, concurrency: int, arrays: bool) -> spec.Campaign:
    sizes = [1000, 2000, 4000, 8000]
    repeats = max(1, runs // len(sizes))
    return spec.parse(
        {
            "name": name,
            "benchmark": "hpgmg-fe",
            "factors": {"operator": ["poisson1"], "size": sizes},
            "repeats": repeats,
            "options": {"sample_repeat": 1},
            "slurm": {"max_concurrent": concurrency, "time_limit": "00:05:00", "arrays": arrays},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--poll", type=float, default=2.0, help="sacct polling interval, s")
    parser.add_argument("--out", type=Path, default=Path("/tmp/ptc-bench-throughput"))
    args = parser.parse_args()
    console = Console(width=140)
    exp = experiments.load(args.experiment)
    stamp = time.strftime("%H%M%S")
    table = Table("submission", "runs", "failed", "sbatch calls", "wall s", "runs/min",
                  "mean runtime s", title=f"campaign throughput on {args.experiment}")  # fmt: skip
    for label, arrays in (("job arrays", True), ("one sbatch at a time", False)):
        name = f"bn-tp-{'a' if arrays else 's'}-{stamp}"
        campaign = plan(name, args.runs, args.concurrency, arrays)
        started = time.monotonic()
        result = campaigns.run(exp, campaign, args.out / f"{name}.parquet", poll_s=args.poll)
        wall = time.monotonic() - started
        runs = result.tally.done + result.tally.failed
        runtimes = [r["runtime_s"] for r in result.rows if r.get("runtime_s")]
        table.add_row(
            label, str(runs), str(result.tally.failed), str(len(result.jobs)), f"{wall:.1f}",
            f"{60 * runs / wall:.1f}", f"{sum(runtimes) / max(1, len(runtimes)):.2f}",
        )  # fmt: skip
        console.print(f"{label}: {runs} runs in {wall:.1f}s")
    console.print(table)


if __name__ == "__main__":
    main()
