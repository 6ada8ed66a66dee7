"""Standard Workload Format (Parallel Workloads Archive): 18 whitespace-separated numbers per job.

-1 means missing. Header lines start with ';' and look like '; Key: value' (continuation lines
without a key extend the previous key); they are kept in ``Trace.metadata``. SWF counts
processors, which the simulator treats as nodes (one processor per node, as on the KTH SP2).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from elastic.errors import PtcError
from elastic.sim.traces.model import Trace, make_trace

SWF_FIELDS = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable_number",
    "queue_number",
    "partition_number",
    "preceding_job",
    "think_time",
)
_COMPLETED = 1.0
_KEY = re.compile(r"[A-Za-z][\w-]*")


def load_swf(path: Path) -> Trace:
    metadata: dict[str, str] = {}
    rows: list[list[float]] = []
    last_key = ""
    with path.open(encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text:
                continue
            if text.startswith(";"):
                last_key = _header(text[1:].strip(), metadata, last_key)
                continue
            rows.append(_parse_row(path, lineno, text.split()))
    table = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(SWF_FIELDS))
    cols = {name: table[:, i] for i, name in enumerate(SWF_FIELDS)}

    def opt(name: str) -> list[float]:
        return [math.nan if v == -1 else float(v) for v in cols[name]]

    alloc = cols["allocated_processors"]
    nodes = np.where(alloc != -1, alloc, cols["requested_processors"])
    status = cols["status"]
    return make_trace(
        path.name,
        job_id=[int(v) for v in cols["job_number"]],
        submit=opt("submit_time"),
        runtime=opt("run_time"),
        requested=opt("requested_time"),
        nodes=[int(v) for v in nodes],
        completed=[bool(s == _COMPLETED) for s in status],
        status_known=[bool(s != -1) for s in status],
        queue=_labels(cols["queue_number"]),
        application=_labels(cols["executable_number"]),
        user=_labels(cols["user_id"]),
        fields=cols,
        metadata=metadata,
    )


def _header(text: str, metadata: dict[str, str], last_key: str) -> str:
    key, sep, value = text.partition(":")
    # "http://..." on a continuation line is a URL, not a key called "http".
    if sep and _KEY.fullmatch(key) and not value.startswith("//"):
        metadata[key.strip()] = value.strip()
        return key.strip()
    if last_key and text:
        metadata[last_key] = f"{metadata[last_key]} {text}".strip()
    return last_key


def _parse_row(path: Path, lineno: int, tokens: list[str]) -> list[float]:
    if len(tokens) != len(SWF_FIELDS):
        raise PtcError(f"{path}:{lineno}: expected {len(SWF_FIELDS)} fields, found {len(tokens)}")
    values: list[float] = []
    for index, token in enumerate(tokens):
        where = f"{path}:{lineno}: field {index + 1} ({SWF_FIELDS[index]})"
        try:
            value = float(token)
        except ValueError:
            raise PtcError(f"{where}: {token!r} is not a number") from None
        if not math.isfinite(value) or (value < 0 and value != -1):
            raise PtcError(f"{where}: {token!r} must be >= 0 or -1 (missing)")
        values.append(value)
    return values


def _labels(column: NDArray[np.float64]) -> list[str]:
    return ["" if v == -1 else str(int(v)) for v in column]
