"""The report's PNGs, drawn from the runs' own tables (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from elastic.learn import evaluate
from elastic.papers import ch2
from elastic.papers.ch2_runs import POLICIES
from elastic.papers.mycluster import SLIDES_ON
from elastic.papers.mycluster_runs import SLIDES_OFF
from elastic.papers.part_time_cloud_runs import LOG, PtcRuns
from elastic.sim.downscaling import DEFAULT_BOOT_S
from elastic.sim.plots import save

PTC_POLICIES = ("RANDOM", "FIFO", "LIFO", "PAP", "PAP+")


def ch2_figure(frame: pd.DataFrame, path: Path) -> None:
    marks = ch2.thesis_marks()
    panels = (
        ("convergence_h", "convergence (h)"),
        ("excess_cost", "excess cost"),
        ("overhead_pct", "workload overhead (%)"),
        ("discarded_min", "discarded work (min)"),
    )
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(17, 3.6))
    x = np.arange(len(POLICIES))
    for ax, (column, title) in zip(axes, panels, strict=False):
        spreads = [ch2.spread(frame, p, column) for p in POLICIES]
        ax.bar(
            x,
            [s.mean for s in spreads],
            0.6,
            yerr=[s.sd for s in spreads],
            capsize=3,
            color="tab:blue",
            alpha=0.6,
            label="ours, shuffled orders",
        )
        ax.plot(
            x,
            [ch2.in_file_order(frame, p, column) for p in POLICIES],
            "kx",
            ms=8,
            label="ours, file order",
        )
        for i, p in enumerate(POLICIES):
            if p in marks[column]:
                value, is_mean = marks[column][p]
                ax.plot(
                    i,
                    value,
                    "D" if is_mean else "o",
                    color="tab:red",
                    mfc="tab:red" if is_mean else "none",
                    ms=8,
                )
        ax.set_xticks(x, POLICIES)
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="y")
    ax = axes[-1]
    rising = POLICIES[1:]
    xs = np.arange(len(rising))
    rises = [ch2.rise(frame, p, True) for p in rising]
    ax.bar(
        xs,
        [r.mean for r in rises],
        0.6,
        yerr=[r.sd for r in rises],
        capsize=3,
        color="tab:blue",
        alpha=0.6,
    )
    ax.plot(xs, [ch2.rise(frame, p, False).mean for p in rising], "kx", ms=8)
    ax.plot(
        xs,
        [ch2.MAKESPAN_RISE_PCT[p].value for p in rising],
        "D",
        color="tab:red",
        ms=8,
        label="thesis (mean of 3 runs)",
    )
    ax.set_xticks(xs, rising)
    ax.set_title("makespan over OI's (%)")
    ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7, loc="upper right")
    axes[-1].legend(fontsize=7, loc="upper left")
    fig.suptitle(
        f"Thesis Ch. 2: red diamonds are the thesis's means, red circles its single illustrated "
        f"runs; boot {DEFAULT_BOOT_S:g} s"
    )
    save(fig, path)


def ptc_figure(ptc: PtcRuns, path: Path) -> None:
    panels = (
        ("HTC", True, "HTC (mean ± sd over seeds)"),
        ("KTH-SP2", False, "KTH-SP2, log order"),
        ("Eagle", False, "Eagle sample, log order"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 4))
    for ax, (workload, shuffled, title) in zip(axes, panels, strict=True):
        m = ptc.medians[ptc.medians.workload == workload]
        m = m[(m.order != LOG) if shuffled else (m.order == LOG)]
        gps = sorted(m.gp_s.unique())
        x = np.arange(len(gps))
        for policy in PTC_POLICIES:
            rows = m[m.policy == policy].groupby("gp_s")["median_h"]
            mean, sd = rows.mean().reindex(gps), rows.std(ddof=1).reindex(gps).fillna(0.0)
            ax.errorbar(x, mean, yerr=sd, marker="o", ms=3, capsize=2, label=policy)
        ax.set_xticks(x, [f"{g / 60:g}m" if g < 3600 else f"{g / 3600:g}h" for g in gps])
        ax.set_xlabel("grace period")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("median wasted cycles per preemption (node-h)")
    axes[0].legend(fontsize=8)
    save(fig, path)


def mycluster_figure(frame: pd.DataFrame, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    on = frame[frame.migration == "liability"]
    top = float(on.cap.max()) * 2 if on.cap.notna().any() else 1.0
    for per_site, rows in on.groupby("per_site"):
        stats = rows.assign(x=rows.cap.fillna(top)).groupby("x")["completed"]
        mean, sd = stats.mean() / 1000, stats.std(ddof=1).fillna(0.0) / 1000
        (line,) = ax.plot(mean.index, mean, "o-", label=f"{per_site} proxies per site, migration")
        ax.fill_between(mean.index, mean - sd, mean + sd, alpha=0.2, color=line.get_color())
        off = frame[(frame.migration == "none") & (frame.per_site == per_site)]["completed"]
        ax.axhline(
            off.mean() / 1000,
            color=line.get_color(),
            ls=":",
            lw=1,
            label=f"{per_site} per site, no migration",
        )
    ticks = sorted(on.cap.dropna().unique())
    left = float(ticks[0]) if ticks else top
    for value, text in ((SLIDES_OFF, "slides: migration disabled"), (SLIDES_ON, "slides: enabled")):
        ax.axhline(value / 1000, color="k", lw=0.8, ls="--")
        ax.text(left, value / 1000, text, fontsize=8, va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_xticks([*ticks, top], [*(f"{t:g}" for t in ticks), "none"], fontsize=7, rotation=60)
    ax.set_xlabel("cap on the proxies a site may hold")
    ax.set_ylabel("user jobs completed in 600 ticks (K)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, path)


def learning_figure(result: evaluate.Evaluation, path: Path, label: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    # A repeat that has stopped holds its last error: its model was had for that cost, and a
    # rule that spends less (CE) would otherwise drop out of the median early, leaving only its
    # repeats that had to pay more.
    table = evaluate.bands(result.trajectories, "rmse")
    for rule, group in table.groupby("rule", sort=False):
        (line,) = ax.plot(group["cost"], group["median"], label=str(rule), lw=2)
        ax.fill_between(group["cost"], group["q1"], group["q3"], alpha=0.2, color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cumulative cost (core-s)")
    ax.set_ylabel(f"Test RMSE of log {label}")
    ax.set_title(
        f"median and IQR over {result.settings.repeats} repeats; a stopped repeat holds its error"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)
