"""The live page's document (``elastic.manager.view``), the manager's page routes behind its
tokens, and the workstation's server of the page forwarding them (``page_proxy``)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from manager_env import NODES, T0, Env

from elastic.manager.client import ManagerClient
from elastic.manager.metrics import Metrics
from elastic.manager.model import JobRecord, Queue
from elastic.manager.page_proxy import create_app as create_proxy
from elastic.manager.view import pool_view, power_of, steady


def observer(env: Env) -> str:
    return (env.tmp / "tokens" / "observer.token").read_text().strip()


def view(env: Env) -> dict[str, Any]:
    """The page's document now, its taxonomy and waste from the metrics' fold, as served."""
    state = env.manager.read()
    overhead, wasted = Metrics(env.manager).pool_figures(state)
    return pool_view(state, env.clock(), 120.0, overhead=overhead, wasted_seconds=wasted)


def slurm_runs_a_job(env: Env) -> None:
    """slurm holds node-0 and node-1, a job runs on node-0, node-1 powers up; 2 jobs wait."""
    who = env.manager.authenticate(env.slurm)
    env.manager.add_nodes(who, "slurm", nodes=["node-0", "node-1"])
    env.manager.set_values(
        who,
        "slurm",
        {"node-0": 0.5, "node-1": 0.0},
        policy="LIFO",
        at=T0,
        jobs=[JobRecord(job_id="7", nodes=("node-0",), elapsed=30.0)],
        queue=Queue(
            {"node-0": "allocated", "node-1": "mixed#", "node-2": "idle~", "ghost": "idle"}, 2, 3
        ),
    )


@pytest.mark.parametrize(
    ("state", "power"),
    [("idle~", "off"), ("mixed#", "powering up"), ("idle%", "powering down"),
     ("allocated", "on"), ("down~", "off"), (None, "unknown")],
)  # fmt: skip
def test_power_is_read_from_slurm_s_state_suffix(state: str | None, power: str) -> None:
    assert power_of(state) == power


def test_the_view_shows_each_node_s_holder_power_state_and_job(env: Env) -> None:
    slurm_runs_a_job(env)
    env.clock.advance(12)
    doc = view(env)
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert set(nodes) == set(NODES)  # a node the pool does not know is not shown
    assert (nodes["node-0"]["holder"], nodes["node-0"]["power"], nodes["node-0"]["jobs"]) == (
        "slurm", "on", ["7"]
    )  # fmt: skip
    assert nodes["node-1"]["power"] == "powering up"
    assert (nodes["node-2"]["holder"], nodes["node-2"]["scheduler_state"]) == ("free", "idle~")
    assert nodes["node-3"]["scheduler_state"] is None and nodes["node-3"]["power"] == "unknown"
    slurm = next(p for p in doc["partitions"] if p["name"] == "slurm")
    assert slurm["pv_age"] == pytest.approx(12) and not slurm["pv_stale"]
    assert (slurm["pending_jobs"], slurm["pending_nodes"], slurm["running_jobs"]) == (2, 3, 1)
    assert doc["sites"] == [
        {"name": "local", "nodes": 4, "power": {"off": 1, "on": 1, "powering up": 1, "unknown": 1}}
    ]
    assert doc["events"][0]["seq"] == doc["last_event"]  # newest first


def test_a_reclamation_shows_its_deadline_jobs_and_then_its_waste(env: Env) -> None:
    slurm_runs_a_job(env)
    admin = env.manager.authenticate(env.admin)
    rec = env.manager.reclaim(admin, "slurm", 1, 60)
    doc = view(env)
    [shown] = doc["reclamations"]
    assert shown["nodes"] == rec.chosen and shown["remaining"] == pytest.approx(60)
    assert {n["name"]: n["reclamation"] for n in doc["nodes"]}[rec.chosen[0]] == rec.id
    env.clock.advance(61)
    env.manager.tick()
    doc = view(env)
    assert doc["reclamations"] == []
    finished = env.manager.reclamation(rec.id)
    assert doc["wasted_node_hours"] == pytest.approx((finished.wasted_cycles or 0.0) / 3600)


def test_the_resume_taxonomy_is_the_mean_of_the_reported_steps(env: Env) -> None:
    who = env.manager.authenticate(env.slurm)
    for seconds in (10.0, 20.0):
        env.manager.add_nodes(who, "slurm", nodes=["node-0"])
        timings = {"power_on": seconds, "playbook": 2 * seconds, "total": 3 * seconds}
        report = {"nodes": ["node-0"], "ready": ["node-0"], "timings": timings}
        env.manager.report_resume(who, "slurm", report)
        env.manager.delete_nodes(who, "slurm", ["node-0"])
    doc = view(env)
    assert doc["overhead"] == {"slurm": {"playbook": 30.0, "power_on": 15.0, "total": 45.0}}


def test_what_changes_by_the_clock_alone_does_not_count_as_a_change(env: Env) -> None:
    slurm_runs_a_job(env)
    first = view(env)
    env.clock.advance(5)
    later = view(env)
    assert first != later and steady(first) == steady(later)
    env.manager.delete_nodes(env.manager.authenticate(env.slurm), "slurm", ["node-1"])
    moved = view(env)
    assert steady(moved) != steady(later)


def test_the_page_and_its_document_want_a_token_and_the_observer_s_will_do(env: Env) -> None:
    for path in ("/ui", "/ui/app.js", "/v1/view", "/v1/view/stream"):
        assert env.http.get(path).status_code == 401, path
        wrong = env.http.get(path, headers=env.auth("wrong"))
        assert wrong.status_code == 401 and "<html" not in wrong.text, path
    seen = env.auth(observer(env))
    page = env.http.get("/ui", headers=seen)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'src="/ui/app.js"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert env.http.get("/ui/app.css", headers=seen).headers["content-type"].startswith("text/css")
    assert env.http.get("/ui/secrets.txt", headers=seen).status_code == 404
    assert env.http.get("/ui/..%2Fapp.py", headers=seen).status_code == 404
    assert [n["name"] for n in env.http.get("/v1/view", headers=seen).json()["nodes"]] == list(
        NODES
    )


def test_the_workstation_s_server_forwards_the_page_with_the_token_the_browser_lacks(
    env: Env,
) -> None:
    client = ManagerClient("http://testserver", observer(env), client=env.http)
    local = TestClient(create_proxy(client))
    assert local.get("/", follow_redirects=False).headers["location"] == "/ui"
    page = local.get("/ui")  # no Authorization: the server adds the observer's
    assert page.status_code == 200 and "The pool" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert local.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
    assert {n["name"] for n in local.get("/v1/view").json()["nodes"]} == set(NODES)
    assert local.get("/ui/nothing").status_code == 404
    # a token the managers refuse gives the browser their refusal, not a page
    refused = TestClient(create_proxy(ManagerClient("http://testserver", "wrong", client=env.http)))
    assert refused.get("/ui").status_code == 401


def test_the_page_s_events_come_from_the_active_manager_and_name_it(env: Env) -> None:
    """After a failover the standby answers 503 naming the active one: the stream goes there and
    says so first, which the page shows; with no manager answering it says that instead."""
    import httpx

    from elastic import wire

    asked: list[str] = []

    def standby(request: httpx.Request) -> httpx.Response:
        asked.append(f"a {request.url.path}")
        return httpx.Response(503, json={}, headers={wire.ACTIVE_HEADER: "http://b:8700"})

    def active(request: httpx.Request) -> httpx.Response:
        asked.append(f"b {request.url.path} {request.headers['authorization']}")
        return httpx.Response(200, text="event: view\ndata: {}\n\n")

    transports = {"http://a:8700": httpx.MockTransport(standby),
                  "http://b:8700": httpx.MockTransport(active)}  # fmt: skip
    client = ManagerClient(["http://a:8700", "http://b:8700"], "look", transports=transports)
    body = TestClient(create_proxy(client)).get("/v1/view/stream").text
    assert body.startswith('event: manager\ndata: {"url": "http://b:8700"}\n\n'), body
    assert body.endswith("event: view\ndata: {}\n\n")
    assert asked == ["a /v1/view/stream", "b /v1/view/stream Bearer look"]

    def gone(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    down = ManagerClient(
        ["http://a:8700"], "look", transports={"http://a:8700": httpx.MockTransport(gone)}
    )
    body = TestClient(create_proxy(down)).get("/v1/view/stream").text
    assert "event: unavailable" in body and "refused" in body


def test_the_stream_ends_when_its_manager_stops_being_the_active_one(env: Env) -> None:
    """So the browser connects again and is sent to the new active manager."""
    from elastic.manager import JsonFileStore, Manager, ManagerConfig, Tokens
    from elastic.manager.app import create_app

    class Fading:
        """Active for the request and one round of the stream, then a standby."""

        def __init__(self) -> None:
            self.asked = 0

        def is_active(self) -> bool:
            self.asked += 1
            return self.asked <= 2

        def active(self) -> str | None:
            return "https://other:8700" if self.asked > 2 else None

    manager = Manager(
        JsonFileStore(env.tmp / "state.json"), Tokens(env.tmp / "tokens"), clock=env.clock,
        notifier=env.notes, config=ManagerConfig(), leadership=Fading(),
    )  # fmt: skip
    http = TestClient(create_app(manager, run_loop=False))
    body = http.get("/v1/view/stream", headers=env.auth(observer(env))).text
    assert body.startswith("retry: 2000\n\nevent: view\ndata: {")
    assert body.count("event: view") == 1  # then it ended
