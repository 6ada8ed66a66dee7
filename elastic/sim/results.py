"""Sweep results on disk: every sample in Parquet, a per policy x GP summary in CSV.

``samples.parquet`` is long format, one row per (policy, GP, snapshot), written one row group
per policy x GP; ``read_result`` turns it back into the arrays ``run_sweep`` produced, so the
report and the plots work the same on a fresh sweep and on a file.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from elastic.atomic import replacing, write_text
from elastic.errors import InputError, NotFoundError
from elastic.sim.sweep import SweepResult

SAMPLES = "samples.parquet"
SUMMARY = "summary.csv"
SUMMARY_COLUMNS = (
    "policy",
    "gp_s",
    "samples",
    "median",
    "q25",
    "q75",
    "iqr",
    "mean",
    "total",
    "total_high",
    "total_default",
)
SCHEMA = pa.schema(
    [
        ("policy", pa.dictionary(pa.int8(), pa.string())),
        ("gp_s", pa.float64()),
        ("snapshot", pa.int32()),
        ("time_s", pa.float64()),
        ("idle_nodes", pa.int32()),
        ("wc", pa.float64()),
        ("wc_high", pa.float64()),
        ("wc_default", pa.float64()),
    ]
)


def write_samples(result: SweepResult, path: Path) -> None:
    snapshot = pa.array(np.arange(result.samples, dtype=np.int32))
    times = pa.array(result.times)
    idle = pa.array(result.idle.astype(np.int32))
    # Dictionary pages only for the policy name: numeric columns of a million distinct values
    # gain nothing from one and cost 40% of the write time.
    with (
        replacing(path) as tmp,
        pq.ParquetWriter(tmp, SCHEMA, compression="zstd", use_dictionary=["policy"]) as writer,
    ):
        for p, policy in enumerate(result.policies):
            policy_col = pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(result.samples, dtype=np.int8)), pa.array([policy])
            )
            for g, gp in enumerate(result.grace_periods):
                wc, high = result.wc[p, g], result.wc_high[p, g]
                columns = [
                    policy_col,
                    pa.array(np.full(result.samples, gp)),
                    snapshot,
                    times,
                    idle,
                    pa.array(wc),
                    pa.array(high),
                    pa.array(wc - high),
                ]
                writer.write_table(pa.Table.from_arrays(columns, schema=SCHEMA))


def read_result(path: Path) -> SweepResult:
    """The arrays of a sweep back from ``samples.parquet``; a file that is not one is an error
    naming what is wrong with it."""
    if not path.is_file():
        raise NotFoundError(
            f"{path}: no samples here; run `ptc sim run ... --out {path.parent}` first"
        )
    try:
        table = pq.read_table(path).unify_dictionaries()
    except (OSError, pa.ArrowException) as err:
        raise InputError(f"{path}: not a readable Parquet file ({err})") from None
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; not a ptc sim result")
    labels = table.column("policy").combine_chunks()
    names, p_index = _first_seen(labels.indices.to_numpy())
    policies = tuple(str(labels.dictionary[int(i)]) for i in names)
    gp_values, g_index = _first_seen(table.column("gp_s").to_numpy())
    gps = tuple(float(g) for g in gp_values)
    snapshot = table.column("snapshot").to_numpy().astype(np.int64)
    n_snap = int(snapshot.max()) + 1 if snapshot.size else 0
    if table.num_rows != len(policies) * len(gps) * n_snap:
        raise InputError(
            f"{path}: {table.num_rows:,} rows, but {len(policies)} policies x {len(gps)} grace "
            f"periods x {n_snap:,} snapshots need {len(policies) * len(gps) * n_snap:,}"
        )
    shape = (len(policies), len(gps), n_snap)
    flat = (p_index * len(gps) + g_index) * n_snap + snapshot
    wc, wc_high = np.full(shape, np.nan), np.full(shape, np.nan)
    np.put(wc, flat, table.column("wc").to_numpy())
    np.put(wc_high, flat, table.column("wc_high").to_numpy())
    if np.isnan(wc).any():
        raise InputError(f"{path}: some (policy, GP, snapshot) appears twice and another never")
    times, idle = np.zeros(n_snap), np.zeros(n_snap, dtype=np.int64)
    times[snapshot] = table.column("time_s").to_numpy()
    idle[snapshot] = table.column("idle_nodes").to_numpy()
    return SweepResult(policies, gps, times, idle, wc, wc_high)


def _first_seen(values: NDArray[np.generic]) -> tuple[NDArray[np.generic], NDArray[np.int64]]:
    """Distinct values in order of first appearance, and each element's position among them."""
    codes, distinct = pd.factorize(values, sort=False)
    return np.asarray(distinct), codes.astype(np.int64)


def summarize(result: SweepResult) -> pd.DataFrame:
    rows = [
        _row(policy, gp, result.wc[p, g], result.wc_high[p, g])
        for p, policy in enumerate(result.policies)
        for g, gp in enumerate(result.grace_periods)
    ]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def write_summary(summary: pd.DataFrame, path: Path) -> None:
    buffer = io.StringIO()
    summary.to_csv(buffer, index=False, float_format="%.6g")
    write_text(path, buffer.getvalue())


def _row(
    policy: str,
    gp: float,
    wc: NDArray[np.float64],
    high: NDArray[np.float64],
) -> tuple[str, float, int, float, float, float, float, float, float, float, float]:
    if wc.size == 0:
        nan = float("nan")
        return (policy, gp, 0, nan, nan, nan, nan, nan, 0.0, 0.0, 0.0)
    q25, median, q75 = (float(v) for v in np.percentile(wc, [25, 50, 75]))
    total, total_high = float(wc.sum()), float(high.sum())
    return (
        policy,
        gp,
        int(wc.size),
        median,
        q25,
        q75,
        q75 - q25,
        float(wc.mean()),
        total,
        total_high,
        total - total_high,
    )
