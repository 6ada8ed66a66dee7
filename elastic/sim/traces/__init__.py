"""Job traces: loaders (SWF, NREL Eagle CSV, HTCondor sleep jobs), the paper's filters, stats."""

from elastic.sim.traces.condor import load_condor_submit
from elastic.sim.traces.eagle import load_eagle_csv
from elastic.sim.traces.filters import (
    FilterStep,
    first_jobs,
    mark_random_fraction,
    paper_filters,
    shuffled_copies,
)
from elastic.sim.traces.load import load_trace, trace_kind
from elastic.sim.traces.model import Trace
from elastic.sim.traces.stats import TraceStats, trace_stats
from elastic.sim.traces.swf import SWF_FIELDS, load_swf, processor_mismatch

__all__ = [
    "SWF_FIELDS",
    "FilterStep",
    "Trace",
    "TraceStats",
    "first_jobs",
    "load_condor_submit",
    "load_eagle_csv",
    "load_swf",
    "load_trace",
    "mark_random_fraction",
    "paper_filters",
    "processor_mismatch",
    "shuffled_copies",
    "trace_kind",
    "trace_stats",
]
