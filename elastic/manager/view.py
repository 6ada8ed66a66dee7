"""The pool as people watch it: one JSON document built from the manager's state, for the live
page (``elastic.manager.page``) and anyone who wants the same facts in one read.

Every node with its holder, its scheduler's state as the holder's last preemption vector
reported it (Slurm's long state: ``idle~`` is powered down, ``#`` powering up, ``%`` powering
down), the power that state means, and the jobs on it; every partition with the age of its
last vector and the demand waiting; every pending reclamation with its deadline and the jobs it
will requeue; the node-hours reclamations wasted so far; the recent events; and the resume
overhead taxonomy (the mean seconds of each step, over the resumes reported so far). The last
two are folded from the event log once, by the manager's metrics
(``elastic.manager.metrics.Metrics.pool_figures``), and given to :func:`pool_view`.

:func:`steady` is the document without what changes by the clock alone: the stream sends a
document when that changes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from elastic.manager.model import Event, Partition, State

RECENT_EVENTS = 15
SITE_FEATURE = "site="  # a node's feature naming its site; without one, the pool's own
LOCAL_SITE = "local"


def power_of(scheduler_state: str | None) -> str:
    """What a Slurm long state says of the node's machine: on, off, powering up or down."""
    if not scheduler_state:
        return "unknown"
    if scheduler_state.endswith("#"):
        return "powering up"
    if scheduler_state.endswith("%"):
        return "powering down"
    if scheduler_state.endswith("~"):
        return "off"
    return "on"


def pool_view(
    state: State,
    now: float,
    max_pv_age: float,
    *,
    overhead: dict[str, dict[str, float]],
    wasted_seconds: float,
) -> dict[str, Any]:
    """The page's document (see the module's docstring); ``now`` in epoch seconds;
    ``overhead`` partition -> step -> mean seconds; ``wasted_seconds`` in node-seconds."""
    reported: dict[str, str] = {}
    jobs_on: dict[str, list[str]] = defaultdict(list)
    partitions = []
    for name, part in sorted(state.partitions.items()):
        partitions.append(_partition(name, part, state, now, max_pv_age))
        if part.pv is None:
            continue
        for node, shown in part.pv.node_states.items():
            held = node in state.nodes and state.nodes[node].owner == name
            # the holder's view of its own node wins over another partition's view of it
            if held or node not in reported:
                reported[node] = shown
        for job in part.pv.jobs:
            for node in job.nodes:
                jobs_on[node].append(job.job_id)
    reclaiming = {
        node: rec.id
        for rec in state.reclamations.values()
        if rec.state == "pending"
        for node in rec.outstanding
    }
    nodes = [
        {
            "name": name,
            "holder": node.owner or "free",
            "site": site_of(node.features),
            "scheduler_state": reported.get(name),
            "power": power_of(reported.get(name)),
            "jobs": sorted(set(jobs_on.get(name, []))),
            "reclamation": reclaiming.get(name),
            "since": node.since,
        }
        for name, node in sorted(state.nodes.items())
    ]
    reclamations = [
        {
            "id": rec.id,
            "partition": rec.partition,
            "beneficiary": rec.beneficiary,
            "deadline": rec.deadline,
            "remaining": max(0.0, rec.deadline - now),
            "nodes": rec.outstanding,
            "jobs": sorted({job.job_id for job in rec.jobs}),
        }
        for rec in sorted(state.reclamations.values(), key=lambda r: r.deadline)
        if rec.state == "pending"
    ]
    return {
        "time": now,
        "partitions": partitions,
        "sites": _sites(nodes),
        "nodes": nodes,
        "reclamations": reclamations,
        "wasted_node_hours": wasted_seconds / 3600.0,
        "events": [_event(e) for e in state.events[-RECENT_EVENTS:]][::-1],
        "overhead": overhead,
        "last_event": state.events[-1].seq if state.events else 0,
    }


def _partition(
    name: str, part: Partition, state: State, now: float, max_pv_age: float
) -> dict[str, Any]:
    pv = part.pv
    age = None if pv is None else max(0.0, now - pv.time)
    return {
        "name": name,
        "nodes": sum(1 for node in state.nodes.values() if node.owner == name),
        "pv_age": age,
        "pv_stale": age is None or age > max_pv_age,
        "policy": "" if pv is None else pv.policy,
        "running_jobs": 0 if pv is None else len(pv.jobs),
        "pending_jobs": 0 if pv is None else pv.pending_jobs,
        "pending_nodes": 0 if pv is None else pv.pending_nodes,
        "protected": part.protection.since is not None,
    }


def site_of(features: list[str]) -> str:
    """A node's site: its ``site=NAME`` feature, else the pool's own."""
    named = [f.removeprefix(SITE_FEATURE) for f in features if f.startswith(SITE_FEATURE)]
    return named[0] if named else LOCAL_SITE


def _sites(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    count: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node in nodes:
        count[node["site"]][node["power"]] += 1
    return [
        {"name": site, "nodes": sum(by.values()), "power": dict(sorted(by.items()))}
        for site, by in sorted(count.items())
    ]


def steady(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without what changes by the clock alone (ages, countdowns, the time)."""
    parts = [
        {k: v for k, v in p.items() if k not in ("pv_age", "pv_stale")} for p in doc["partitions"]
    ]
    recs = [{k: v for k, v in r.items() if k != "remaining"} for r in doc["reclamations"]]
    return {**doc, "time": 0, "partitions": parts, "reclamations": recs}


def _event(event: Event) -> dict[str, Any]:
    data = event.data
    about = [str(data["partition"])] if data.get("partition") else []
    for key in ("node", "reclamation"):
        if data.get(key):
            about.append(f"{key} {data[key]}")
    if isinstance(data.get("nodes"), list):
        about.append(", ".join(str(n) for n in data["nodes"][:8]))
    return {"seq": event.seq, "time": event.time, "kind": event.kind, "about": " ".join(about)}
