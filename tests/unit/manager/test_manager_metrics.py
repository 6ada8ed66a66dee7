"""The manager's ``/metrics``: Prometheus's text format (parsed back by prometheus_client's own
parser), behind the tokens, with counters folded from the event log once each and gauges of the
state now."""

from __future__ import annotations

from typing import Any

import pytest
from manager_env import Env
from prometheus_client.parser import text_string_to_metric_families

from elastic.manager.metrics import failure_reason


def scrape(
    env: Env, token: str | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = env.http.get("/metrics", headers=env.auth(token or env.admin))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def resume(env: Env, body: dict[str, Any]) -> None:
    r = env.http.post("/v1/partitions/slurm/resumes", json=body, headers=env.auth(env.slurm))
    assert r.status_code < 300, r.text


@pytest.mark.parametrize("token", [None, "wrong"])
def test_no_token_or_a_wrong_one_gets_no_metrics(env: Env, token: str | None) -> None:
    headers = {} if token is None else env.auth(token)
    r = env.http.get("/metrics", headers=headers)
    assert r.status_code == 401 and "ptc_" not in r.text


def test_a_resume_is_counted_once_with_its_steps_and_its_failures_by_step(env: Env) -> None:
    assert value(scrape(env), "ptc_pool_nodes", holder="free", site="local") == 4
    r = env.http.post(
        "/v1/partitions/slurm/nodes", json={"nodes": ["node-0", "node-1"]},
        headers=env.auth(env.slurm),
    )  # fmt: skip
    assert r.status_code == 200, r.text
    resume(
        env,
        {
            "nodes": ["node-0", "node-1"],
            "ready": ["node-0"],
            "failed": {"node-1": "power on failed: node-1: did not start within 90 s"},
            "timings": {"power_on": 2.5, "playbook": 4.0, "total": 7.0},
        },
    )
    found = scrape(env, env.slurm)  # a partition's token reads them too
    assert value(found, "ptc_resume_nodes_total", partition="slurm", outcome="ready") == 1
    assert value(found, "ptc_resume_nodes_total", partition="slurm", outcome="failed") == 1
    assert value(
        found, "ptc_resume_failures_total", partition="slurm", reason="power on failed"
    ) == 1  # fmt: skip
    assert value(found, "ptc_resume_seconds_count", partition="slurm") == 1
    assert value(found, "ptc_resume_seconds_sum", partition="slurm") == 7.0
    assert value(found, "ptc_resume_seconds_bucket", partition="slurm", le="5.0") == 0
    assert value(found, "ptc_resume_seconds_bucket", partition="slurm", le="10.0") == 1
    assert value(found, "ptc_resume_step_seconds_sum", partition="slurm", step="playbook") == 4.0
    assert value(found, "ptc_pool_node_moves_total", partition="slurm", direction="added") == 2
    assert value(found, "ptc_pool_nodes", holder="slurm", site="local") == 2
    # a second scrape folds in only what is new: nothing counted twice
    again = scrape(env)
    assert value(again, "ptc_resume_nodes_total", partition="slurm", outcome="ready") == 1
    resume(env, {"nodes": ["node-0"], "ready": ["node-0"], "failed": {}, "timings": {"total": 3}})
    third = scrape(env)
    assert value(third, "ptc_resume_nodes_total", partition="slurm", outcome="ready") == 2
    assert value(third, "ptc_resume_seconds_count", partition="slurm") == 2
    assert value(third, "ptc_events", ) == len(env.manager.read().events)  # fmt: skip


def test_a_restarted_manager_counts_the_whole_log_again(env: Env) -> None:
    resume(env, {"nodes": ["node-2"], "ready": ["node-2"], "failed": {}, "timings": {"total": 3}})
    before = scrape(env)
    after = scrape(env.restart())
    key = ("ptc_resume_nodes_total", (("outcome", "ready"), ("partition", "slurm")))
    assert before[key] == after[key] == 1


def test_repairs_protection_and_the_api_s_own_latency_are_there(env: Env) -> None:
    body = {"holder": "head", "cause": "not responding", "lease": 600}
    claim = env.http.post("/v1/partitions/slurm/repairs/node-3", json=body,
                          headers=env.auth(env.slurm))  # fmt: skip
    assert claim.status_code == 200, claim.text
    end = env.http.post(
        "/v1/partitions/slurm/repairs/node-3/end",
        json={"holder": "head", "error": "configure: playbook failed", "timings": {}},
        headers=env.auth(env.slurm),
    )
    assert end.status_code == 200, end.text
    found = scrape(env)
    assert value(found, "ptc_repairs_total", partition="slurm", outcome="failed") == 1
    assert value(found, "ptc_partition_protected", partition="slurm") == 0
    # the route template, never a node's name, labels the latency
    routes = {dict(labels).get("route") for name, labels in found if name.startswith("ptc_manager_request_seconds")}  # fmt: skip
    assert "/v1/partitions/{partition}/repairs/{node}" in routes
    assert not any("node-3" in str(r) for r in routes)
    assert value(found, "ptc_manager_store_seconds_count", operation="write") >= 2


@pytest.mark.parametrize(
    ("why", "label"),
    [
        ("power on failed: node-2: did not start", "power on failed"),
        ("slurmd did not register within 90 s", "slurmd did not register within"),
        ("manager refused: node node-1 is held by partition ref", "manager refused"),
        ("", "unknown"),
    ],
)
def test_a_failure_s_label_has_few_values(why: str, label: str) -> None:
    assert failure_reason(why) == label


def test_an_event_that_cannot_be_counted_is_skipped_not_a_failed_scrape(env: Env) -> None:
    """Events written by an older manager could lack a field or hold another type: the scrape
    goes on without them."""

    def odd(state: Any) -> None:
        state.append(env.clock(), "resume-reported", partition="slurm", timings={"total": "n/a"})

    env.manager._update(odd)
    resume(env, {"nodes": ["node-0"], "ready": ["node-0"], "failed": {}, "timings": {"total": 3}})
    found = scrape(env)
    assert value(found, "ptc_resume_seconds_count", partition="slurm") == 1


def test_a_suspend_s_power_off_time_rides_on_its_release_into_a_histogram(env: Env) -> None:
    add = env.http.post(
        "/v1/partitions/slurm/nodes", json={"nodes": ["node-0", "node-1", "node-2"]},
        headers=env.auth(env.slurm),
    )  # fmt: skip
    assert add.status_code == 200, add.text
    for nodes, seconds in ((["node-0", "node-1"], 3.5), (["node-2"], None)):
        body: dict[str, Any] = {"nodes": nodes}
        if seconds is not None:
            body["power_off"] = seconds
        r = env.http.post(
            "/v1/partitions/slurm/nodes/release", json=body, headers=env.auth(env.slurm)
        )
        assert r.status_code == 200, r.text
    found = scrape(env)
    # one suspend timed (a release without a time, as ptc elastic release makes, is not one)
    assert value(found, "ptc_suspend_seconds_count", partition="slurm") == 1
    assert value(found, "ptc_suspend_seconds_sum", partition="slurm") == 3.5
    assert value(found, "ptc_pool_node_moves_total", partition="slurm", direction="released") == 3
    refused = env.http.post(
        "/v1/partitions/slurm/nodes/release", json={"nodes": ["node-0"], "power_off": -1},
        headers=env.auth(env.slurm),
    )  # fmt: skip
    assert refused.status_code == 422 and refused.json()["field"] == "power_off", refused.text
