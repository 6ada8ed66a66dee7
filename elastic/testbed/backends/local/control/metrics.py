"""The control service's metrics in Prometheus's text format (``GET /metrics``, with the
experiment's credential): what the testbed did to the experiment's machines.

- operations run, by action (``power_on``, ``power_off``, ``reload``, ``release``,
  ``allocate``) and outcome (``ok``, ``failed``), and how long each took;
- requests refused, by HTTP status (a wrong credential, another experiment's node, a busy one);
- the experiment's nodes by the testbed's state (``running``, ``stopped``, ``parked``, ``lent``),
  read when scraped.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# From a power-on of one container (a second) to a reload of many (minutes).
OPERATION_BUCKETS = (0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)


class ControlMetrics(Collector):
    """One service's counters, and its nodes' states read through ``states`` at each scrape."""

    def __init__(self, states: Callable[[], dict[str, str]]) -> None:
        self.states = states
        self.registry = CollectorRegistry(auto_describe=False)
        self.operations = Histogram(
            "ptc_control_operation_seconds",
            "Operations on the experiment's machines, by action and outcome",
            ["action", "outcome"],
            buckets=OPERATION_BUCKETS,
            registry=self.registry,
        )
        self.refusals = Counter(
            "ptc_control_refusals",
            "Requests refused, by HTTP status",
            ["status"],
            registry=self.registry,
        )
        self.registry.register(self)

    def observe_operation(self, action: str, seconds: float, failed: bool) -> None:
        self.operations.labels(action, "failed" if failed else "ok").observe(seconds)

    def observe_refusal(self, status: int) -> None:
        self.refusals.labels(str(status)).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "ptc_control_nodes", "The experiment's nodes by the testbed's state", labels=["state"]
        )
        for state, count in sorted(Tally(self.states().values()).items()):
            family.add_metric([state], count)
        yield family
