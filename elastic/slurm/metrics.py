"""The Slurm client's metrics in Prometheus's text format (``GET /metrics`` on its endpoint, the
partition's token): what the controller's side sees, next to the manager's own.

- the pool's nodes by Slurm state (``idle~`` powered down, ``allocated``, ``down~``, ...) as the
  pool's last sync read them, so a scrape runs no Slurm command;
- nodes the repair loop is mending now, and reclamations the client is carrying out;
- each of the client's loops (preemption vector, pool sync, protected mode, power, reclamation
  steps, repairs): how long a round took, and the rounds that failed.

Resumes, reclamations and repairs, counted from the manager's event log, are the manager's
metrics (``elastic.manager.metrics``): the client reports each to it.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from elastic.slurm.client import SlurmElasticClient

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LOOP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ClientMetrics(Collector):
    """The collector of one Slurm client, and its loops' timings."""

    def __init__(self, client: SlurmElasticClient) -> None:
        self.client = client
        self.registry = CollectorRegistry(auto_describe=False)
        self.rounds = Histogram(
            "ptc_slurm_client_round_seconds",
            "Rounds of the client's loops, by loop",
            ["loop"],
            buckets=LOOP_BUCKETS,
            registry=self.registry,
        )
        self.failed_rounds = Counter(
            "ptc_slurm_client_failed_rounds",
            "Rounds of the client's loops that raised (Slurm or the manager away)",
            ["loop"],
            registry=self.registry,
        )
        self.registry.register(self)

    def observe_round(self, loop: str, seconds: float, failed: bool) -> None:
        self.rounds.labels(loop).observe(seconds)
        if failed:
            self.failed_rounds.labels(loop).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        client = self.client
        nodes = GaugeMetricFamily(
            "ptc_slurm_pool_nodes", "The pool's nodes by Slurm state (sinfo's long state)",
            labels=["partition", "state"],
        )  # fmt: skip
        for state, count in sorted(Tally(dict(client.pool_states).values()).items()):
            nodes.add_metric([client.partition, state], count)
        yield nodes
        yield GaugeMetricFamily(
            "ptc_slurm_nodes_under_repair", "Nodes the repair loop is mending now",
            value=len(set(client.under_repair)),
        )  # fmt: skip
        yield GaugeMetricFamily(
            "ptc_slurm_reclamations_in_progress", "Reclamations the client is carrying out",
            value=sum(1 for p in list(client.pending.values()) if not p.done),
        )  # fmt: skip
