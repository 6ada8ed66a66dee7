"""Sweep results on disk: every sample in Parquet, a per policy x GP summary in CSV."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from elastic.atomic import write_text
from elastic.errors import PtcError
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


def write_samples(result: SweepResult, path: Path) -> None:
    """Long format, one row group per policy x GP; written to a temp file, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema(
        [
            ("policy", pa.dictionary(pa.int8(), pa.string())),
            ("gp_s", pa.float64()),
            ("snapshot", pa.int32()),
            ("time_s", pa.float64()),
            ("wc", pa.float64()),
            ("wc_high", pa.float64()),
            ("wc_default", pa.float64()),
        ]
    )
    snapshot = pa.array(np.arange(result.samples, dtype=np.int32))
    times = pa.array(result.times)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
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
                        pa.array(wc),
                        pa.array(high),
                        pa.array(wc - high),
                    ]
                    writer.write_table(pa.Table.from_arrays(columns, schema=schema))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_samples(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise PtcError(f"{path}: no samples here; run `ptc sim run ... --out {path.parent}` first")
    frame: pd.DataFrame = pq.read_table(path).to_pandas()
    frame["policy"] = frame["policy"].astype(str)
    return frame


def summarize_result(result: SweepResult) -> pd.DataFrame:
    rows = [
        _row(policy, gp, result.wc[p, g], result.wc_high[p, g])
        for p, policy in enumerate(result.policies)
        for g, gp in enumerate(result.grace_periods)
    ]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def summarize_samples(frame: pd.DataFrame) -> pd.DataFrame:
    rows = [
        _row(str(policy), float(gp), group["wc"].to_numpy(), group["wc_high"].to_numpy())
        for (policy, gp), group in _groups(frame)
    ]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def _groups(frame: pd.DataFrame) -> list[tuple[tuple[str, float], pd.DataFrame]]:
    out: list[tuple[tuple[str, float], pd.DataFrame]] = []
    for key, group in frame.groupby(["policy", "gp_s"], sort=False, observed=True):
        policy, gp = key
        out.append(((str(policy), float(str(gp))), group))
    return out


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
