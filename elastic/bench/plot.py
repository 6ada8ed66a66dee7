"""Plots of datasets: runtime against problem size, one line per rank count, log-log (as the
thesis's Fig. 6.1); a resume's overhead parts stacked per job."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elastic import atomic
from elastic.errors import InputError


def runtime_vs_size(
    frame: pd.DataFrame,
    out: Path,
    *,
    x: str = "global_dofs",
    y: str = "solve_time_s",
    by: str = "ranks",
    panel: str | None = "operator",
    title: str = "",
) -> Path:
    """Write a PNG: ``y`` against ``x`` (median over repeats, every run as a dot) per ``by``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for column in (x, y, by):
        if column not in frame.columns:
            raise InputError(f"the dataset has no column {column!r} to plot")
    data = frame[(frame[x] > 0) & (frame[y] > 0)]
    if "error" in data.columns:
        data = data[data["error"].fillna("") == ""]
    if data.empty:
        raise InputError("the dataset has no successful runs to plot")
    panels = sorted(data[panel].dropna().unique()) if panel and panel in data.columns else [None]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, level in zip(axes[0], panels, strict=True):
        subset = data if level is None else data[data[panel] == level]
        for value, group in subset.groupby(by):
            med = group.groupby(x)[y].median().sort_index()
            (line,) = ax.plot(med.index, med.to_numpy(), marker="o", label=f"{by}={value!s}")
            ax.scatter(group[x], group[y], s=8, alpha=0.4, color=line.get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.set_title(str(level) if level is not None else title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def stacked_parts(
    frame: pd.DataFrame,
    parts: Mapping[str, str],
    out: Path,
    *,
    label: str = "job_id",
    title: str = "",
) -> Path:
    """Write a PNG: one horizontal bar per row, its ``parts`` columns stacked in order (each
    part's legend entry is its meaning), labelled by ``label``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing = [c for c in (label, *parts) if c not in frame.columns]
    if missing:
        raise InputError(f"the dataset has no column {', '.join(map(repr, missing))} to plot")
    if frame.empty:
        raise InputError("the dataset has no rows to plot")
    fig, ax = plt.subplots(figsize=(9.0, 2.4 + 0.35 * len(frame)))
    left = np.zeros(len(frame))
    names = frame[label].astype(str).to_list()
    colours = plt.get_cmap("tab10")
    for index, (column, meaning) in enumerate(parts.items()):
        widths = frame[column].clip(lower=0).to_numpy(dtype=float)
        ax.barh(names, widths, left=left, color=colours(index % 10), label=meaning)
        left += widths
    ax.invert_yaxis()
    ax.set_xlabel("seconds from submit to start")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    save_png(fig, out)
    return out


def save_png(fig: Any, out: Path, dpi: int = 120) -> None:
    """Write the matplotlib figure ``fig`` to ``out`` as a PNG, atomically, and close it."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    atomic.write_bytes(out, buffer.getvalue())
