"""The performance dataset: one row per benchmark run, in Parquet, appended atomically."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from elastic import atomic


def append(path: Path, row: Mapping[str, Any]) -> pd.DataFrame:
    """Add one run; the file is replaced whole, so a crash leaves the previous dataset intact."""
    frame = pd.DataFrame([dict(row)])
    if path.exists():
        frame = pd.concat([pd.read_parquet(path), frame], ignore_index=True)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic.write_bytes(path, buffer.getvalue())
    return frame


def load(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)
