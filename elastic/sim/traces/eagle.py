"""NREL Eagle job CSV (columns as in NREL/eagle-jobs' sample_eagle_data.csv).

Used columns: job_id, user, partition (-> queue), qos, wallclock_req (-> requested),
nodes_req (-> nodes), submit_time (-> submit, seconds since the epoch, naive timestamps read
as UTC), run_time (-> runtime), state (COMPLETED = success), name (-> application). An empty
cell is a missing field; a non-empty cell that does not parse is an error.
"""

from __future__ import annotations

import csv
import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from elastic.errors import InputError
from elastic.sim.traces.model import Trace, make_trace

REQUIRED = (
    "job_id",
    "user",
    "partition",
    "qos",
    "wallclock_req",
    "nodes_req",
    "submit_time",
    "run_time",
    "state",
    "name",
)
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_NUMERIC = {"job_id": True, "wallclock_req": False, "nodes_req": True, "run_time": False}
_TEXT = ("user", "partition", "qos", "state", "name")


def load_eagle_csv(path: Path) -> Trace:
    nums: dict[str, list[float]] = {k: [] for k in (*_NUMERIC, "submit_time")}
    text: dict[str, list[str]] = {k: [] for k in _TEXT}
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = list(reader.fieldnames or [])
        for name in REQUIRED:
            if name not in header:
                raise InputError(f"{path}:1: missing column {name!r}")
        for row in reader:
            line = reader.line_num
            for name, integer in _NUMERIC.items():
                nums[name].append(_number(path, line, row, name, integer=integer))
            nums["submit_time"].append(_timestamp(path, line, row, "submit_time"))
            for name in _TEXT:
                text[name].append((row.get(name) or "").strip())

    def ints(name: str) -> list[int]:
        return [-1 if math.isnan(v) else int(v) for v in nums[name]]

    return make_trace(
        path.name,
        job_id=ints("job_id"),
        submit=nums["submit_time"],
        runtime=nums["run_time"],
        requested=nums["wallclock_req"],
        nodes=ints("nodes_req"),
        completed=[s == "COMPLETED" for s in text["state"]],
        status_known=[s != "" for s in text["state"]],
        queue=text["partition"],
        application=text["name"],
        user=text["user"],
        fields={"qos_high": np.asarray([q == "high" for q in text["qos"]], dtype=np.float64)},
        metadata={"format": "NREL Eagle CSV", "columns": ",".join(header)},
    )


def _number(
    path: Path, line: int, row: dict[str, str], name: str, *, integer: bool = False
) -> float:
    text = (row.get(name) or "").strip()
    if not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{path}:{line}: field {name}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (integer and value != int(value)):
        kind = "a non-negative integer" if integer else "a non-negative number"
        raise InputError(f"{path}:{line}: field {name}: {text!r} is not {kind}")
    return value


def _timestamp(path: Path, line: int, row: dict[str, str], name: str) -> float:
    text = (row.get(name) or "").strip()
    if not text:
        return math.nan
    try:
        moment = datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise InputError(
            f"{path}:{line}: field {name}: {text!r} is not a time like 2019-01-01 08:55:55"
        ) from None
    return moment.timestamp()
