"""The papers' results beside ours: regenerate docs/paper-results.md and its figures.

    .venv/bin/python benchmarks/paper_report.py [--orders 20] [--seeds 20] [--mycluster-seeds 16]
        [--learn-repeats 8 --learn-steps 100 | --no-learning]

Runs the Part-Time Cloud sweeps (HTC over seeds, KTH-SP2 and the Eagle sample standing in for
the paper's PEREGRINE), the thesis's Ch. 2 downscaling in file order and shuffled orders, a
replay of active learning on the committed dataset, MyCluster's calibration and cap sweep, and
reads the stored live runs of instant against full provisioning (Multiverse) and of an
elastic workflow (E-HPC). Writes the page,
the PNGs and each part's runs (Parquet) under benchmarks/results/paper_report/. Prints a line
per step; asserts nothing. A few minutes on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from elastic.events import Event, Kind
from elastic.papers.ch2_runs import Ch2Settings
from elastic.papers.learning import LearningSettings
from elastic.papers.mycluster_runs import MyClusterSettings
from elastic.papers.part_time_cloud_runs import PtcSettings
from elastic.papers.report import ReportSettings, generate
from elastic.sim.traces import public

ROOT = Path(__file__).resolve().parents[1]
# A data directory beside the checkout, if there is one; else ptc's trace cache (ptc sim fetch).
TRACES = ROOT.parent / "shared" / "data" / "traces"
SHIPPED = ROOT / "tests" / "data" / "traces"
WORKFLOW = ROOT / "benchmarks" / "results" / "elastic_workflow" / "results.json"


def committed(path: Path) -> str | None:
    """The date ``path`` was last committed (the file itself records none), or None."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


class Lines:
    """Prints each event as a line; progress at most every tenth of a part, or every 15 s."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.shown: dict[str, tuple[int, float]] = {}

    def __call__(self, event: Event) -> None:
        now = time.monotonic()
        stamp = f"[{now - self.began:6.0f}s]"
        if event.kind is Kind.PROGRESS and event.total:
            last_done, last_time = self.shown.get(event.topic, (0, self.began))
            step = max(1, event.total // 10)
            done = event.done or 0
            if done < event.total and done - last_done < step and now - last_time < 15:
                return
            self.shown[event.topic] = (done, now)
        elif event.kind is Kind.PROGRESS:
            return
        if event.kind is Kind.BEGIN:
            self.shown[event.topic] = (0, now)
        print(f"{stamp} {event.describe()}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=20, help="Ch. 2: shuffled job orders")
    parser.add_argument("--boot-orders", type=int, default=10, help="Ch. 2: orders per extra boot")
    parser.add_argument("--seeds", type=int, default=10, help="HTC seeds and Eagle's orders")
    parser.add_argument("--kth-orders", type=int, default=0, help="KTH-SP2's shuffled orders")
    parser.add_argument("--mycluster-seeds", type=int, default=16)
    parser.add_argument("--learn-repeats", type=int, default=8)
    parser.add_argument("--learn-steps", type=int, default=100)
    parser.add_argument("--no-learning", action="store_true", help="leave the replay out")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "paper-results.md")
    parser.add_argument(
        "--figures", type=Path, default=ROOT / "benchmarks" / "results" / "paper_report"
    )
    args = parser.parse_args()
    try:
        htc, kth, eagle = (
            public.locate(n, SHIPPED, TRACES) for n in ("htc-condor", "kth-sp2", "nrel-eagle")
        )
    except public.TraceMissing as missing:
        print(missing, file=sys.stderr)
        return 2
    command = "benchmarks/paper_report.py " + " ".join(sys.argv[1:])
    settings = ReportSettings(
        ch2=Ch2Settings(htc, orders=args.orders, boot_orders=args.boot_orders),
        ptc=PtcSettings(htc, kth, eagle, seeds=args.seeds, kth_orders=args.kth_orders),
        mycluster=MyClusterSettings(seeds=args.mycluster_seeds),
        learning=None
        if args.no_learning
        else LearningSettings(
            ROOT / "datasets" / "hpgmg-fe-local.parquet",
            repeats=args.learn_repeats,
            steps=args.learn_steps,
        ),
        provisioning=ROOT / "benchmarks" / "results" / "provisioning",
        workflow=WORKFLOW,
        workflow_date=committed(WORKFLOW),
        page=args.page,
        figures=args.figures,
        command=command.strip(),
    )
    began = time.monotonic()
    written = generate(settings, Lines())
    for path in written:
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    print(f"took {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
