"""The paper's figures as PNG (matplotlib, Agg): Fig. 3/4 violins, Fig. 5 heatmap, Fig. 6 curves.

Violins and curves are drawn from the sweep's arrays (fresh, or read back by ``read_result``).
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from elastic.atomic import write_bytes
from elastic.sim.sweep import SweepResult

# Kernel density estimates on a million points take long and show nothing more than 20k do;
# medians and IQRs are still drawn from every sample.
VIOLIN_POINTS = 20_000
SHORT_GP_LIMIT_S = 1800.0


def save(fig: Figure, path: Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_bytes(path, buffer.getvalue())


def violins(result: SweepResult, gps: list[float], title: str) -> Figure:
    policies = result.policies
    fig, axes = plt.subplots(
        1, len(gps), figsize=(2.2 * len(gps) + 1, 4), sharey=True, squeeze=False
    )
    rng = np.random.default_rng(0)
    for ax, gp in zip(axes[0], gps, strict=True):
        g = result.grace_periods.index(gp)
        data = [result.wc[p, g] / 3600.0 for p in range(len(policies))]
        shown = [
            rng.choice(v, VIOLIN_POINTS, replace=False) if v.size > VIOLIN_POINTS else v
            for v in data
        ]
        shown = [v if np.ptp(v) > 0 else v + rng.normal(0, 1e-6, v.size) for v in shown]
        ax.violinplot(shown, showextrema=False)
        for i, values in enumerate(data, start=1):
            q25, med, q75 = np.percentile(values, [25, 50, 75])
            ax.vlines(i, q25, q75, color="black", linewidth=4)
            ax.scatter([i], [med], color="white", zorder=3, s=12)
        ax.set_xticks(range(1, len(policies) + 1), policies, rotation=45)
        ax.set_title(f"GP = {_gp_label(gp)}")
    axes[0][0].set_ylabel("wasted cycles per preemption (node-hours)")
    fig.suptitle(title)
    return fig


def heatmap(pv: pd.DataFrame, title: str) -> Figure:
    """Dark is most valued, as in the paper; red outlines mark nodes running high-priority jobs."""
    policies = list(dict.fromkeys(pv["policy"]))
    fig, axes = plt.subplots(len(policies), 1, figsize=(10, 2.4 * len(policies)), squeeze=False)
    times = np.sort(pv["time_s"].unique()) / 3600.0
    step = float(times[1] - times[0]) if times.size > 1 else 1.0
    for ax, policy in zip(axes[:, 0], policies, strict=True):
        part = pv[pv["policy"] == policy]
        grid = part.pivot(index="node", columns="snapshot", values="value").to_numpy()
        high = part.pivot(index="node", columns="snapshot", values="high").to_numpy(dtype=bool)
        extent = (times[0], times[-1] + step, grid.shape[0] - 0.5, -0.5)
        image = ax.imshow(
            grid,
            aspect="auto",
            cmap="Greys",
            vmin=0,
            vmax=1,
            interpolation="nearest",
            extent=extent,
        )
        for node, first, last in _runs(high):
            start = times[0] + first * step
            ax.add_patch(
                Rectangle(
                    (start, node - 0.5),
                    (last - first + 1) * step,
                    1.0,
                    fill=False,
                    edgecolor="red",
                    linewidth=1.2,
                )
            )
        ax.set_ylabel(f"{policy}\nnode")
        fig.colorbar(image, ax=ax, pad=0.01, label="PV")
    axes[-1, 0].set_xlabel("simulated time (hours); red: node runs a high-priority job")
    fig.suptitle(title)
    return fig


def _runs(mask: np.ndarray) -> list[tuple[int, int, int]]:
    """(row, first column, last column) of every horizontal run of True cells."""
    runs: list[tuple[int, int, int]] = []
    for row in range(mask.shape[0]):
        padded = np.concatenate([[False], mask[row], [False]]).astype(np.int8)
        edges = np.flatnonzero(np.diff(padded))
        runs.extend((row, int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True))
    return runs


def cumulative(result: SweepResult, gp: float, title: str) -> Figure:
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    g = result.grace_periods.index(gp)
    days = result.times / 86400.0
    for policy in ("PAP", "PAP+"):
        p = result.policies.index(policy)
        wc, high = result.wc[p, g], result.wc_high[p, g]
        for ax, part in zip(axes, (high, wc - high, wc), strict=True):
            ax.plot(days, np.cumsum(part) / 3600.0, label=policy)
    for ax, label in zip(axes, ("high-priority", "default-priority", "all"), strict=True):
        ax.set_title(f"{label} jobs")
        ax.set_xlabel("simulated time (days)")
        ax.legend()
    axes[0].set_ylabel("cumulative WC (node-hours)")
    fig.suptitle(f"{title} (GP = {_gp_label(gp)})")
    return fig


def write_all(
    result: SweepResult, out: Path, title: str, heatmap_data: pd.DataFrame | None
) -> list[Path]:
    gps = sorted(result.grace_periods)
    written: list[Path] = []
    short = [g for g in gps if g <= SHORT_GP_LIMIT_S]
    long = [g for g in gps if g > SHORT_GP_LIMIT_S]
    for name, chosen in (("fig3_wc_violins.png", short), ("fig4_wc_violins_long_gp.png", long)):
        if chosen:
            save(violins(result, chosen, title), out / name)
            written.append(out / name)
    if heatmap_data is not None and not heatmap_data.empty:
        size = heatmap_data["node"].nunique()
        heat_title = f"{title}: preemption vectors on a {size}-node partition"
        save(heatmap(heatmap_data, heat_title), out / "fig5_pv_heatmap.png")
        written.append(out / "fig5_pv_heatmap.png")
    if {"PAP", "PAP+"} <= set(result.policies) and gps:
        save(cumulative(result, gps[0], f"{title}: PAP vs PAP+"), out / "fig6_cumulative_wc.png")
        written.append(out / "fig6_cumulative_wc.png")
    return written


def _gp_label(gp: float) -> str:
    if gp >= 3600 and gp % 3600 == 0:
        return f"{gp / 3600:g} h"
    if gp >= 60 and gp % 60 == 0 and gp >= 1200:
        return f"{gp / 60:g} min"
    return f"{gp:g} s"
