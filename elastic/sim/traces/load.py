"""Pick the loader from the file name."""

from __future__ import annotations

from pathlib import Path

from elastic.errors import InputError, NotFoundError
from elastic.sim.traces.condor import load_condor_submit
from elastic.sim.traces.eagle import load_eagle_csv
from elastic.sim.traces.model import Trace
from elastic.sim.traces.swf import load_swf

_LOADERS = {
    ".swf": load_swf,
    ".csv": load_eagle_csv,
    ".submit": load_condor_submit,
    ".sub": load_condor_submit,
}


def trace_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in _LOADERS:
        raise InputError(
            f"{path}: unknown trace format {suffix or '(no extension)'!r}; "
            "expected .swf (SWF), .csv (NREL Eagle) or .submit/.sub (HTCondor sleep jobs)"
        )
    return "condor" if _LOADERS[suffix] is load_condor_submit else suffix.lstrip(".")


def load_trace(path: Path, swf_processors: str = "requested") -> Trace:
    """``swf_processors``: which SWF field gives a job's size (see ``load_swf``)."""
    kind = trace_kind(path)
    if not path.is_file():
        raise NotFoundError(f"{path}: no such trace file")
    if kind == "swf":
        return load_swf(path, swf_processors)
    return _LOADERS[path.suffix.lower()](path)
