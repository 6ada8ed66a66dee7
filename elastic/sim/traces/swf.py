"""Standard Workload Format (Parallel Workloads Archive): 18 whitespace-separated numbers per job.

-1 means missing. Header lines start with ';' and look like '; Key: value' (continuation lines
without a key extend the previous key); they are kept in ``Trace.metadata``. SWF counts
processors, which the simulator treats as nodes (one processor per node, as on the KTH SP2).

Which processor count: by default the *requested* processors (field 8), what a scheduler
schedules and what the usual simulators (pyss, CQSim) use; a job whose field 8 is missing
falls back to its allocated processors (field 5). ``processors="allocated"`` prefers field 5
and falls back to field 8. ``processor_mismatch`` counts the jobs where the two differ.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from elastic.errors import InputError
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
PROCESSORS = ("requested", "allocated")
_COMPLETED = 1.0
_KEY = re.compile(r"[A-Za-z][\w-]*")


def load_swf(path: Path, processors: str = "requested") -> Trace:
    if processors not in PROCESSORS:
        raise InputError(
            f"--swf-processors must be 'requested' (field 8) or 'allocated' (field 5), "
            f"got {processors!r}"
        )
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

    alloc, request = cols["allocated_processors"], cols["requested_processors"]
    if processors == "requested":
        nodes = np.where(request != -1, request, alloc)
    else:
        nodes = np.where(alloc != -1, alloc, request)
    metadata = {**metadata, "ptc_processors": processors}
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
        raise InputError(f"{path}:{lineno}: expected {len(SWF_FIELDS)} fields, found {len(tokens)}")
    values: list[float] = []
    for index, token in enumerate(tokens):
        where = f"{path}:{lineno}: field {index + 1} ({SWF_FIELDS[index]})"
        try:
            value = float(token)
        except ValueError:
            raise InputError(f"{where}: {token!r} is not a number") from None
        if not math.isfinite(value) or (value < 0 and value != -1):
            raise InputError(f"{where}: {token!r} must be >= 0 or -1 (missing)")
        values.append(value)
    return values


def _labels(column: NDArray[np.float64]) -> list[str]:
    return ["" if v == -1 else str(int(v)) for v in column]


def processor_mismatch(trace: Trace) -> int:
    """Jobs of an SWF trace whose requested (field 8) and allocated (field 5) processors are
    both known and differ; 0 for other traces."""
    alloc = trace.fields.get("allocated_processors")
    request = trace.fields.get("requested_processors")
    if alloc is None or request is None:
        return 0
    return int(((alloc != request) & (alloc != -1) & (request != -1)).sum())
