"""A ledger as pandas frames, written as datasets (Parquet, CSV and the columns' meanings, with
the campaign datasets' conventions, :mod:`elastic.bench.dataset`) and a PNG plot, each file
replaced atomically.

``write(ledger, by, out)`` writes ``out/ledger.parquet`` (the rows summed by ``by``),
``out/runs.parquet`` (every run), ``out/loans.parquet`` (every lent interval),
``out/instances.parquet`` (every interval a node was held by the cluster) and
``out/ledger.png`` (used, lost and lent node-hours per row of the summary).
"""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

import pandas as pd

from elastic.bench import dataset
from elastic.bench.plot import save_png
from elastic.ledger.records import InstanceRow, Ledger, LoanRow, RunRow, summarise

_COMMON: dict[str, tuple[str, str]] = {
    "job_id": ("Slurm JobID (an array's task as ARRAY_TASK)", ""),
    "user": ("the job's owner", ""),
    "runs": ("runs of the job in the period (a requeued job has several)", ""),
    "jobs": ("jobs that ran in the period", ""),
    "state": ("the run's state in sacct (the job's last run's, summed by job)", ""),
    "reclamations": ("the reclamations that killed its runs", ""),
    "used_node_s": ("node-time used: ElapsedRaw x NNodes, summed over the runs", "node-s"),
    "used_node_h": ("used_node_s in hours", "node-h"),
    "lost_node_s": ("node-time of runs a reclamation threw away (also counted as used)", "node-s"),
    "lost_node_h": ("lost_node_s in hours", "node-h"),
    "lent_node_s": ("node-time pool nodes were held by a lending partition", "node-s"),
    "lent_node_h": ("lent_node_s in hours", "node-h"),
    "borrowed_node_s": ("node-time this experiment held nodes lent to it", "node-s"),
    "borrowed_node_h": ("borrowed_node_s in hours", "node-h"),
    "instance_s": ("time pool nodes were held by the cluster's own partitions", "s"),
    "instance_h": ("instance_s in hours", "h"),
    "price": ("the site's price per node-hour", "per node-h"),
    "cost": ("price x instance hours (each hold's started hours with --round-hours)", ""),
    "site": ("the site of the pool's nodes (local: no sites file names them)", ""),
    "experiment": ("the experiment, or one its nodes were lent to", ""),
}
COLUMNS: dict[str, tuple[str, str]] = {
    **_COMMON,
    "partition": ("the Slurm partition (runs) or the manager's partition (holds)", ""),
    "start": ("when it began (epoch), or the period's start if earlier (runs)", "s"),
    "end": ("when it ended (epoch); empty while it goes on", "s"),
    "nodes": ("nodes allocated (NNodes)", ""),
    "hosts": ("the nodes it ran on", ""),
    "elapsed_s": ("ElapsedRaw: seconds of the run within the period", "s"),
    "reclamation": ("the reclamation that killed this run", ""),
    "source": ("sacct, or manager: a killed run sacct lost, from the client's report", ""),
    "node": ("a pool node", ""),
    "borrower": ("the experiment the node is lent to, else the lending partition", ""),
    "node_s": ("time lent within the period", "node-s"),
}


def _frame(rows: list[dict[str, object]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


def summary(ledger: Ledger, by: str) -> pd.DataFrame:
    rows = summarise(ledger, by)
    return pd.DataFrame(rows)


def runs(ledger: Ledger) -> pd.DataFrame:
    return _frame([asdict(r) for r in ledger.runs], [f.name for f in fields(RunRow)])


def loans(ledger: Ledger) -> pd.DataFrame:
    return _frame([asdict(r) for r in ledger.loans], [f.name for f in fields(LoanRow)])


def instances(ledger: Ledger) -> pd.DataFrame:
    return _frame([asdict(r) for r in ledger.instances], [f.name for f in fields(InstanceRow)])


def write(ledger: Ledger, by: str, out: Path) -> list[Path]:
    """The four datasets and the plot under ``out``; the files written."""
    table = summary(ledger, by)
    written = []
    for name, frame in (
        ("ledger", table),
        ("runs", runs(ledger)),
        ("loans", loans(ledger)),
        ("instances", instances(ledger)),
    ):
        path = out / f"{name}.parquet"
        dataset.write(path, frame, COLUMNS)
        written.append(path)
    written.append(plot(ledger, table, by, out / "ledger.png"))
    return written


def plot(ledger: Ledger, table: pd.DataFrame, by: str, out: Path) -> Path:
    """Used, lost and lent node-hours per row of the summary, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    key = table.columns[0]
    labels = table[key].astype(str).to_list()
    series = [
        (column, meaning)
        for column, meaning in (
            ("used_node_h", "used"),
            ("lost_node_h", "lost to reclamations"),
            ("lent_node_h", "lent"),
            ("borrowed_node_h", "borrowed"),
        )
        if column in table.columns
    ]
    fig, ax = plt.subplots(figsize=(9.0, 2.4 + 0.4 * max(len(labels), 1)))
    positions = np.arange(len(labels), dtype=float)
    height = 0.8 / max(len(series), 1)
    colours = plt.get_cmap("tab10")
    for index, (column, meaning) in enumerate(series):
        values = table[column].to_numpy(dtype=float)
        ax.barh(
            positions + index * height,
            values,
            height=height,
            color=colours(index),
            label=meaning,
        )
    ax.set_yticks(positions + height * (len(series) - 1) / 2, labels)
    ax.invert_yaxis()
    ax.set_xlabel("node-hours")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(
        f"{ledger.experiment}: node-hours by {by}, "
        f"{pd.Timestamp(ledger.since, unit='s'):%Y-%m-%d %H:%M} to "
        f"{pd.Timestamp(ledger.until, unit='s'):%Y-%m-%d %H:%M} UTC"
    )
    fig.tight_layout()
    save_png(fig, out)
    return out
