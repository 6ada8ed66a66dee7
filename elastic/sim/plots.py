"""The paper's figures as PNG (matplotlib, Agg): Fig. 3/4 violins, Fig. 5 heatmap, Fig. 6 curves."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from elastic.atomic import write_bytes

# Kernel density estimates on a million points take long and show nothing more than 20k do;
# medians and IQRs are still drawn from every sample.
VIOLIN_POINTS = 20_000
SHORT_GP_LIMIT_S = 1800.0


def save(fig: Figure, path: Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_bytes(path, buffer.getvalue())


def violins(samples: pd.DataFrame, gps: list[float], title: str) -> Figure:
    policies = list(dict.fromkeys(samples["policy"]))
    fig, axes = plt.subplots(
        1, len(gps), figsize=(2.2 * len(gps) + 1, 4), sharey=True, squeeze=False
    )
    rng = np.random.default_rng(0)
    by_key = {key: g["wc"].to_numpy() for key, g in samples.groupby(["policy", "gp_s"])}
    for ax, gp in zip(axes[0], gps, strict=True):
        data = []
        for policy in policies:
            values = by_key.get((policy, gp), np.zeros(1)) / 3600.0
            data.append(values)
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
    policies = list(dict.fromkeys(pv["policy"]))
    fig, axes = plt.subplots(len(policies), 1, figsize=(10, 2.2 * len(policies)), squeeze=False)
    for ax, policy in zip(axes[:, 0], policies, strict=True):
        part = pv[pv["policy"] == policy]
        grid = part.pivot(index="node", columns="snapshot", values="value").to_numpy()
        high = part.pivot(index="node", columns="snapshot", values="high").to_numpy(dtype=bool)
        ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        rows, cols = np.nonzero(high)
        ax.scatter(cols, rows, marker="s", s=6, facecolors="none", edgecolors="red", lw=0.5)
        ax.set_ylabel(f"{policy}\nnode")
    axes[-1, 0].set_xlabel("snapshot (red: node runs a high-priority job)")
    fig.suptitle(title)
    return fig


def cumulative(samples: pd.DataFrame, gp: float, title: str) -> Figure:
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    parts = (("high-priority", "wc_high"), ("default-priority", "wc_default"), ("all", "wc"))
    for ax, (label, column) in zip(axes, parts, strict=True):
        for policy in ("PAP", "PAP+"):
            rows = samples[(samples["policy"] == policy) & (samples["gp_s"] == gp)]
            rows = rows.sort_values("snapshot")
            ax.plot(rows["time_s"] / 86400.0, rows[column].cumsum() / 3600.0, label=policy)
        ax.set_title(f"{label} jobs")
        ax.set_xlabel("simulated time (days)")
        ax.legend()
    axes[0].set_ylabel("cumulative WC (node-hours)")
    fig.suptitle(f"{title} (GP = {_gp_label(gp)})")
    return fig


def write_all(
    samples: pd.DataFrame, out: Path, title: str, heatmap_data: pd.DataFrame | None
) -> list[Path]:
    gps = sorted(set(samples["gp_s"].astype(float)))
    written: list[Path] = []
    short = [g for g in gps if g <= SHORT_GP_LIMIT_S]
    long = [g for g in gps if g > SHORT_GP_LIMIT_S]
    for name, chosen in (("fig3_wc_violins.png", short), ("fig4_wc_violins_long_gp.png", long)):
        if chosen:
            save(violins(samples, chosen, title), out / name)
            written.append(out / name)
    if heatmap_data is not None and not heatmap_data.empty:
        save(heatmap(heatmap_data, f"{title}: preemption vectors"), out / "fig5_pv_heatmap.png")
        written.append(out / "fig5_pv_heatmap.png")
    policies = set(samples["policy"])
    if {"PAP", "PAP+"} <= policies and gps:
        save(cumulative(samples, gps[0], f"{title}: PAP vs PAP+"), out / "fig6_cumulative_wc.png")
        written.append(out / "fig6_cumulative_wc.png")
    return written


def _gp_label(gp: float) -> str:
    if gp >= 3600 and gp % 3600 == 0:
        return f"{gp / 3600:g} h"
    if gp >= 60 and gp % 60 == 0 and gp >= 1200:
        return f"{gp / 60:g} min"
    return f"{gp:g} s"
