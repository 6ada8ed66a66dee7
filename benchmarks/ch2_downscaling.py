"""Multi-cloud rebalancing (Duplyakin's thesis §2.4): OI, FO, AP-25, AP-100 on the HTC workload.

    .venv/bin/python benchmarks/ch2_downscaling.py [TRACE] [--shuffles 3] [--boot 360]

The thesis's setup: 1,120 sleep jobs submitted at once, a request for 64 workers on the cheap
cloud (Hotel, 1 unit per node-hour) and none on one costing twice as much (Sierra), a pool
started with 48 + 16, the policy run every 30 minutes from 30 minutes in, EC billed per whole
hour. Replacements boot for ``--boot`` seconds (the thesis does not say; see DEFAULT_BOOT_S).

The main table runs the trace in its file order (the submit file of the thesis's prototype);
``--shuffles N`` adds N random orders (numpy default_rng(0..N-1)) and prints their mean and
sample standard deviation. Beside each figure it prints the thesis's: the means of three runs
of Fig. 2.3 (convergence, EC, overhead, the makespan's rise), and for discarded work the single
runs Fig. 2.2c-d illustrates (71 and 458 min are not means). It says whether the thesis's
orderings hold, and writes results.parquet, timeline.parquet and two PNGs under
benchmarks/results/ch2_downscaling/. It asserts nothing. The comparison with the thesis, with
every difference explained, is benchmarks/paper_report.py's (docs/paper-results.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from elastic import atomic
from elastic.papers.ch2 import (
    CONVERGENCE_H,
    DISCARDED_MIN,
    EXCESS_COST,
    MAKESPAN_RISE_PCT,
    OVERHEAD_PCT,
)
from elastic.papers.ch2_runs import CHECK_S, thesis_setup
from elastic.papers.table import PaperValue
from elastic.policies import make_downscaling_policy
from elastic.sim.downscaling import (
    DEFAULT_BOOT_S,
    THESIS_INTERVAL_S,
    DownscalingSetup,
    SimJob,
    jobs_from_trace,
    simulate_downscaling,
)
from elastic.sim.downscaling_metrics import DownscalingRun
from elastic.sim.plots import save
from elastic.sim.traces import load_condor_submit

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO.parent / "shared" / "data" / "traces" / "htc-condor-1120.submit"
OUT = REPO / "benchmarks" / "results" / "ch2_downscaling"
POLICIES = ("OI", "FO", "AP-25", "AP-100")


def thesis(table: dict[str, PaperValue], policy: str) -> float:
    value = table[policy].value if policy in table else None
    return np.nan if value is None else float(value)


def setup(boot_s: float, reap_s: float | None = None) -> DownscalingSetup:
    return thesis_setup(boot_s, reap_s)


def row(run: DownscalingRun, order: str, variant: str = "") -> dict[str, object]:
    conv = run.convergence_s
    return {
        "policy": run.policy + variant,
        "order": order,
        "convergence_h": np.nan if conv is None else conv / 3600,
        "excess_cost": run.excess_cost,
        "discarded_min": run.discarded_s / 60,
        "killed_jobs": len(run.killed),
        "overhead_pct": run.overhead_pct,
        "makespan_h": run.makespan_s / 3600,
        "rebalanced_instances": run.rebalanced,
        "thesis_convergence_h": thesis(CONVERGENCE_H, run.policy),  # mean of 3 runs
        "thesis_excess_cost": thesis(EXCESS_COST, run.policy),  # mean of 3 runs
        "thesis_overhead_pct": thesis(OVERHEAD_PCT, run.policy),  # mean of 3 runs
        "thesis_discarded_min_one_run": thesis(DISCARDED_MIN, run.policy),  # Fig. 2.2c-d
    }


def orderings(table: pd.DataFrame) -> list[tuple[str, bool]]:
    """The thesis's orderings (§2.4.2) on one table indexed by policy."""
    c, ec, d = table["convergence_h"], table["excess_cost"], table["discarded_min"]
    m = table["makespan_h"]
    return [
        ("convergence AP-100 < FO < AP-25 < OI", bool(c["AP-100"] < c["FO"] < c["AP-25"] < c["OI"])),
        ("EC AP-100 < FO < AP-25 < OI", bool(ec["AP-100"] < ec["FO"] < ec["AP-25"] < ec["OI"])),
        ("discarded OI = FO = 0 < AP-25 < AP-100", bool(d["OI"] == d["FO"] == 0 < d["AP-25"] < d["AP-100"])),
        ("makespan: OI strictly shortest", bool(all(m["OI"] < m[p] for p in POLICIES[1:]))),
    ]  # fmt: skip


def print_table(table: pd.DataFrame, spread: pd.DataFrame | None = None) -> None:
    print(
        f"  {'policy':8s} {'conv (h)':>14s} {'EC':>14s} {'discarded (min)':>18s}"
        f" {'killed':>7s} {'overhead':>14s} {'makespan (h)':>13s}"
    )
    for name in table.index:
        r = table.loc[name]
        p = str(name)
        lost = 0.0 if thesis(OVERHEAD_PCT, p) == 0 else thesis(DISCARDED_MIN, p)
        t = (thesis(CONVERGENCE_H, p), thesis(EXCESS_COST, p), lost, thesis(OVERHEAD_PCT, p))

        sd = None if spread is None else spread.loc[name]

        def cell(
            col: str, value: float, fmt: str, r: pd.Series = r, sd: pd.Series | None = sd
        ) -> str:
            text = format(float(r[col]), fmt)
            if sd is not None:
                text += "±" + format(float(sd[col]), fmt)
            return f"{text} [{value:{fmt}}]"

        print(
            f"  {name!s:8s} {cell('convergence_h', t[0], '.2f'):>14s} {cell('excess_cost', t[1], '.1f'):>14s}"
            f" {cell('discarded_min', t[2], '.0f'):>18s} {r['killed_jobs']:7.0f}"
            f" {r['overhead_pct']:5.1f}% [{t[3]:.1f}%]"
            f" {r['makespan_h']:13.2f}"
        )  # fmt: skip
    makespan = table["makespan_h"].astype(float)
    rises = ", ".join(
        f"{p} {100 * (makespan[p] / makespan['OI'] - 1):+.1f}% "
        f"[{thesis(MAKESPAN_RISE_PCT, p):+.1f}%]"
        for p in POLICIES[1:]
    )
    print(f"  makespan vs OI: {rises}")
    for text, holds in orderings(table):
        print(f"  ordering {text}: {'holds' if holds else 'DOES NOT hold'}")


def run_all(jobs: Sequence[SimJob], boot_s: float) -> dict[str, DownscalingRun]:
    return {
        p: simulate_downscaling(jobs, setup(boot_s), make_downscaling_policy(p)) for p in POLICIES
    }


def plot_timelines(runs: dict[str, DownscalingRun], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True, sharey=True)
    for ax, (name, run) in zip(axes.flat, runs.items(), strict=True):
        t = [s.time / 3600 for s in run.timeline]
        for site, colour in (("hotel", "tab:blue"), ("sierra", "tab:red")):
            ax.step(
                t,
                [s.live[site] for s in run.timeline],
                where="post",
                color=colour,
                label=f"{site} workers",
            )
        ax.step(
            t,
            [s.booting["hotel"] for s in run.timeline],
            where="post",
            color="tab:blue",
            ls=":",
            label="hotel booting",
        )
        ax.step(t, [s.running_jobs for s in run.timeline], where="post", color="grey", lw=0.8,
                label="running jobs")  # fmt: skip
        if run.convergence_s is not None:
            ax.axvline(run.convergence_s / 3600, color="k", ls="--", lw=0.8, label="converged")
        ax.set_title(f"{name}: EC {run.excess_cost:g}, discarded {run.discarded_s / 60:.0f} min")
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("time since submission (h)")
    for ax in axes[:, 0]:
        ax.set_ylabel("count")
    axes[0, 0].legend(fontsize=8, loc="center right")
    fig.suptitle("Rebalancing 48+16 -> 64+0 workers, policy every 30 min (simulated)")
    save(fig, path)


def plot_metrics(table: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    x = np.arange(len(POLICIES))
    for ax, (col, k, label, table_k) in zip(
        axes,
        (("convergence_h", 0, "convergence (h)", CONVERGENCE_H),
         ("excess_cost", 1, "excess cost", EXCESS_COST),
         ("discarded_min", 2, "discarded work (min)", DISCARDED_MIN)),
        strict=True,
    ):  # fmt: skip
        ax.bar(x - 0.2, [table.loc[p, col] for p in POLICIES], 0.4, label="simulated")
        label = "thesis, one illustrated run (Fig. 2.2c-d)" if k == 2 else "thesis, mean of 3 runs"
        ax.bar(x + 0.2, [thesis(table_k, p) for p in POLICIES], 0.4, label=label)
        ax.set_xticks(x, POLICIES)
        ax.set_title(label)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8)
    save(fig, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", type=Path, default=TRACE)
    parser.add_argument("--shuffles", type=int, default=3, help="random job orders (0: none)")
    parser.add_argument("--boot", type=float, default=DEFAULT_BOOT_S, help="replacement boot (s)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if not args.trace.is_file():
        print(f"no trace at {args.trace}; pass its path", file=sys.stderr)
        return 2
    began = time.perf_counter()
    jobs = jobs_from_trace(load_condor_submit(args.trace))
    work_h = sum(j.runtime for j in jobs) / 3600
    print(
        f"{args.trace.name}: {len(jobs)} jobs, {work_h:.1f} node-hours of work; 64 workers "
        f"wanted on hotel (1/h), start 48 hotel + 16 sierra (2/h); policy every "
        f"{THESIS_INTERVAL_S:.0f} s; replacements boot {args.boot:.0f} s; EC per whole hour"
    )

    runs = run_all(jobs, args.boot)
    fo_checked = simulate_downscaling(
        jobs, setup(args.boot, reap_s=CHECK_S), make_downscaling_policy("FO")
    )
    rows = [row(r, "file") for r in runs.values()]
    rows.append(row(fo_checked, "file", " (drained checked every 300 s)"))
    table = pd.DataFrame(rows[: len(POLICIES)]).set_index("policy")
    print(
        "\nTrace in file order; [the thesis's: mean of 3 runs; for discarded work, the one run"
        " Fig. 2.2c-d illustrates]:"
    )
    print_table(table)
    print(
        f"  FO with drained workers found every 300 s (the prototype's check): conv "
        f"{rows[-1]['convergence_h']:.2f} h, EC {rows[-1]['excess_cost']:g}"
    )

    if args.shuffles > 0:
        for seed in range(args.shuffles):
            order = np.random.default_rng(seed).permutation(len(jobs))
            shuffled = [jobs[i] for i in order]
            rows += [row(r, f"shuffle-{seed}") for r in run_all(shuffled, args.boot).values()]
        frame = pd.DataFrame(rows)
        shuffled_rows = frame[frame["order"].str.startswith("shuffle")]
        numeric = shuffled_rows.drop(columns=["order"]).groupby("policy")
        mean = numeric.mean().loc[list(POLICIES)]
        std = numeric.std(ddof=1).loc[list(POLICIES)]
        print(
            f"\nMean ± sample sd over {args.shuffles} shuffled job orders; [the thesis's, as "
            "above]:"
        )
        print_table(mean, std)

    frame = pd.DataFrame(rows)
    timeline = pd.DataFrame(
        [
            {
                "policy": name,
                "time_s": s.time,
                "hotel_live": s.live["hotel"],
                "sierra_live": s.live["sierra"],
                "hotel_booting": s.booting["hotel"],
                "running_jobs": s.running_jobs,
                "queued_jobs": s.queued_jobs,
                "done_jobs": s.done_jobs,
            }
            for name, run in runs.items()
            for s in run.timeline
        ]
    )
    for name, data in (("results.parquet", frame), ("timeline.parquet", timeline)):
        with atomic.replacing(args.out / name) as tmp:
            data.to_parquet(tmp, index=False)
    plot_timelines(runs, args.out / "timelines.png")
    plot_metrics(table, args.out / "metrics.png")
    print(f"\nwrote {args.out}/{{results,timeline}}.parquet, timelines.png, metrics.png")
    print(f"took {time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
