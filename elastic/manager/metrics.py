"""The manager's metrics in Prometheus's text format (``GET /metrics``, any valid token).

Two kinds, both read from the replicated store, so every manager (active or standby) tells the
same story and a failover loses nothing:

- **gauges of the state now**: pool nodes by holder and site (a `site=NAME` feature, else `local`), each partition's protected mode and the
  age of its last preemption vector, pending reclamations, the event log's length;
- **counters and histograms folded from the event log**: resumes (nodes ready, failed by the
  step that failed them, called off) and their durations, per step too (the resume overhead
  taxonomy); reclamations started, jobs requeued or cancelled by them, wasted node-seconds;
  repairs done and failed, and their durations; nodes added and released per partition.

The log is append-only with sequence numbers, so each scrape folds in only the events since the
last one (a manager that starts folds the whole log once). A counter therefore starts from the
log's beginning on every manager, which Prometheus reads as one series across restarts.

The API's own latency (per route template) is measured by the app's middleware
(:meth:`Metrics.observe_request`); the store's, by timing each read and compare-and-swap
(:meth:`Metrics.timed`).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from elastic.manager.core import Manager
from elastic.manager.store import Store
from elastic.manager.view import LOCAL_SITE, site_of

log = logging.getLogger(__name__)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Resume and repair durations, seconds: a power on and playbook take seconds, a fresh disk and a
# slow boot minutes.
DURATION_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
REASON_CHARS = 40


def failure_reason(why: str) -> str:
    """A failed node's reason as a label of few values: the words before its first ":" and
    before any number ("power on failed", "manager refused", "slurmd did not register within"
    for "... within 90 s")."""
    words = itertools.takewhile(
        lambda w: not any(c.isdigit() for c in w), why.split(":", 1)[0].split()
    )
    return " ".join(words)[:REASON_CHARS] or "unknown"


class _Histogram:
    """One labelled histogram's buckets, kept by hand: it is rebuilt from the event log."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.series: dict[tuple[str, ...], tuple[list[int], float]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        counts, total = self.series.get(labels, ([0] * (len(self.buckets) + 1), 0.0))
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                counts[i] += 1
        counts[-1] += 1
        self.series[labels] = (counts, total + value)

    def means(self) -> dict[tuple[str, ...], float]:
        """Each series' mean value."""
        return {key: total / counts[-1] for key, (counts, total) in self.series.items()}

    def family(self, name: str, doc: str, labels: list[str]) -> HistogramMetricFamily:
        fam = HistogramMetricFamily(name, doc, labels=labels)
        for key, (counts, total) in sorted(self.series.items()):
            bounds = [*(str(float(b)) for b in self.buckets), "+Inf"]
            fam.add_metric(list(key), list(zip(bounds, map(float, counts), strict=True)), total)
        return fam


class _Folded:
    """What the event log has said so far, up to ``seq`` (exclusive)."""

    def __init__(self) -> None:
        self.seq = 0
        self.counters: dict[str, dict[tuple[str, ...], float]] = {}
        self.resume_seconds = _Histogram(DURATION_BUCKETS)
        self.suspend_seconds = _Histogram(DURATION_BUCKETS)
        self.step_seconds = _Histogram(DURATION_BUCKETS)
        self.repair_seconds = _Histogram(DURATION_BUCKETS)

    def add(self, name: str, labels: tuple[str, ...], amount: float = 1.0) -> None:
        series = self.counters.setdefault(name, {})
        series[labels] = series.get(labels, 0.0) + amount

    def fold(self, kind: str, data: Mapping[str, Any]) -> None:
        part = str(data.get("partition") or "")
        if kind == "resume-reported":
            called_off = set(data.get("called_off") or ())
            self.add("resume_nodes", (part, "ready"), len(data.get("ready") or ()))
            for node, why in sorted((data.get("failed") or {}).items()):
                outcome = "called off" if node in called_off else "failed"
                self.add("resume_nodes", (part, outcome))
                if outcome == "failed":
                    self.add("resume_failures", (part, failure_reason(str(why))))
            timings = data.get("timings") or {}
            if "total" in timings:
                self.resume_seconds.observe((part,), float(timings["total"]))
            for step, seconds in sorted(timings.items()):
                if step != "total":
                    self.step_seconds.observe((part, step), float(seconds))
        elif kind == "reclamation-started":
            self.add("reclamations", (part,))
        elif kind == "reclamation-finished":
            self.add("wasted", (part,), float(data.get("wasted_cycles") or 0.0))
            self.add("forced", (part,), len(data.get("forced") or ()))
        elif kind == "jobs-requeued":
            for job in data.get("jobs") or ():
                self.add("jobs", (part, "requeued" if job.get("requeued") else "cancelled"))
        elif kind in ("node-repaired", "repair-failed"):
            outcome = "repaired" if kind == "node-repaired" else "failed"
            self.add("repairs", (part, outcome))
            self.repair_seconds.observe((part, outcome), float(data.get("seconds") or 0.0))
        elif kind == "nodes-added":
            self.add("nodes_moved", (part, "added"), len(data.get("nodes") or ()))
        elif kind == "nodes-deleted":
            self.add("nodes_moved", (part, "released"), len(data.get("nodes") or ()))
            if data.get("power_off") is not None:
                self.suspend_seconds.observe((part,), float(data["power_off"]))
        elif kind == "partition-protected":
            self.add("protections", (part,))


COUNTERS: dict[str, tuple[str, str, list[str]]] = {
    "resume_nodes": (
        "ptc_resume_nodes",
        "Nodes of resumes by outcome (ready, failed, called off)",
        ["partition", "outcome"],
    ),
    "resume_failures": (
        "ptc_resume_failures",
        "Nodes whose resume failed, by the step that failed",
        ["partition", "reason"],
    ),
    "reclamations": ("ptc_reclamations", "Reclamations started", ["partition"]),
    "wasted": (
        "ptc_wasted_node_seconds",
        "Node-seconds of work lost to reclamations (requeued jobs' elapsed x nodes)",
        ["partition"],
    ),
    "forced": ("ptc_reclamation_forced_nodes", "Nodes taken at a deadline", ["partition"]),
    "jobs": ("ptc_reclaimed_jobs", "Jobs ended by reclamations", ["partition", "outcome"]),
    "repairs": ("ptc_repairs", "Repairs ended, by outcome", ["partition", "outcome"]),
    "nodes_moved": (
        "ptc_pool_node_moves",
        "Nodes a partition took from the pool (added) or gave back (released)",
        ["partition", "direction"],
    ),
    "protections": ("ptc_protected_mode_entries", "Times protected mode began", ["partition"]),
}


class TimedStore:
    """A store whose reads and compare-and-swaps are timed into ``histogram``."""

    def __init__(self, store: Store, histogram: Histogram) -> None:
        self.inner = store
        self.histogram = histogram

    def read(self) -> tuple[int, dict[str, Any] | None]:
        with self.histogram.labels("read").time():
            return self.inner.read()

    def write(self, document: dict[str, Any], *, expect: int) -> int:
        with self.histogram.labels("write").time():
            return self.inner.write(document, expect=expect)


class Metrics(Collector):
    """The collector of one manager, and the app's request and store timings."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self._lock = threading.Lock()
        self._folded = _Folded()
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Histogram(
            "ptc_manager_request_seconds",
            "API requests by method, route and status",
            ["method", "route", "status"],
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.store = Histogram(
            "ptc_manager_store_seconds",
            "Reads and compare-and-swaps of the manager's store",
            ["operation"],
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(self)

    def timed(self, store: Store) -> TimedStore:
        """``store`` with its operations timed (``ptc_manager_store_seconds``)."""
        return TimedStore(store, self.store)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def _up_to(self, state: Any) -> _Folded:
        """The fold brought up to ``state``'s last event (the caller holds the lock)."""
        folded = self._folded
        if len(state.events) < folded.seq:  # a store started again from nothing
            folded = self._folded = _Folded()
        for event in state.events[folded.seq :]:
            try:
                folded.fold(event.kind, event.data)
            except (TypeError, ValueError, AttributeError) as err:  # one odd event: skip it
                log.warning("metrics: event %d (%s) not counted: %s", event.seq, event.kind, err)
        folded.seq = len(state.events)
        return folded

    def pool_figures(self, state: Any) -> tuple[dict[str, dict[str, float]], float]:
        """For the live page, from the same fold as the series: the mean seconds of each
        resume step per partition (``total``: the whole resume), and the node-seconds
        reclamations wasted in all."""
        with self._lock:
            folded = self._up_to(state)
            overhead: dict[str, dict[str, float]] = {}
            for (part, step), mean in folded.step_seconds.means().items():
                overhead.setdefault(part, {})[step] = mean
            for (part,), mean in folded.resume_seconds.means().items():
                overhead.setdefault(part, {})["total"] = mean
            wasted = sum(folded.counters.get("wasted", {}).values())
        return {p: dict(sorted(s.items())) for p, s in sorted(overhead.items())}, wasted

    def collect(self) -> Iterator[Metric]:
        state = self.manager.read()
        with self._lock:
            folded = self._up_to(state)
            yield from self._counters(folded)
            yield folded.resume_seconds.family(
                "ptc_resume_seconds", "Resumes, from the call to the last node ready or failed",
                ["partition"],
            )  # fmt: skip
            yield folded.step_seconds.family(
                "ptc_resume_step_seconds", "A resume's steps (the overhead taxonomy)",
                ["partition", "step"],
            )  # fmt: skip
            yield folded.suspend_seconds.family(
                "ptc_suspend_seconds", "Suspends: powering off the nodes Slurm suspended",
                ["partition"],
            )  # fmt: skip
            yield folded.repair_seconds.family(
                "ptc_repair_seconds", "Repairs, from the claim to their end",
                ["partition", "outcome"],
            )  # fmt: skip
        yield from self._gauges(state)

    @staticmethod
    def _counters(folded: _Folded) -> Iterator[Metric]:
        for key, (name, doc, labels) in COUNTERS.items():
            fam = CounterMetricFamily(name, doc, labels=labels)
            for values, amount in sorted(folded.counters.get(key, {}).items()):
                fam.add_metric(list(values), amount)
            yield fam

    def _gauges(self, state: Any) -> Iterator[Metric]:
        now = self.manager.clock()
        holders = GaugeMetricFamily(
            "ptc_pool_nodes", "Pool nodes by holder and site", labels=["holder", "site"]
        )
        sites = {site_of(node.features) for node in state.nodes.values()} or {LOCAL_SITE}
        counts = {(h, s): 0 for h in [*state.partitions, "free"] for s in sites}
        for node in state.nodes.values():
            key = (node.owner if node.owner is not None else "free", site_of(node.features))
            counts[key] = counts.get(key, 0) + 1
        for labels, count in sorted(counts.items()):
            holders.add_metric(list(labels), count)
        yield holders
        protected = GaugeMetricFamily(
            "ptc_partition_protected", "1 while the partition is in protected mode", labels=["partition"]
        )  # fmt: skip
        pv_age = GaugeMetricFamily(
            "ptc_partition_pv_age_seconds",
            "Age of the partition's last preemption vector (absent: none yet)",
            labels=["partition"],
        )
        for name, part in sorted(state.partitions.items()):
            protected.add_metric([name], 1.0 if part.protection.since is not None else 0.0)
            if part.pv is not None:
                pv_age.add_metric([name], max(0.0, now - part.pv.time))
        yield protected
        yield pv_age
        pending = [r for r in state.reclamations.values() if r.state == "pending"]
        yield GaugeMetricFamily(
            "ptc_reclamations_pending", "Reclamations waiting for their nodes", value=len(pending)
        )
        yield GaugeMetricFamily(
            "ptc_events", "Events in the manager's log", value=len(state.events)
        )
