"""Several managers, one active, in-process: a standby answers 503 naming the active
one and does nothing in its loop; the client, given every manager, finds the active one and
gives up after a bounded time; a POST retried with the same Idempotency-Key (its answer lost)
is applied once. The election itself runs on a real etcd in tests/unit/configserver."""

from __future__ import annotations

import socket

import httpx
import pytest
from fastapi.testclient import TestClient
from manager_env import Clock, Env

from elastic.manager import JsonFileStore, Manager, ManagerConfig, Tokens
from elastic.manager.app import create_app
from elastic.manager.client import ManagerClient, ManagerUnreachable
from elastic.manager.core import request_key
from elastic.wire import ACTIVE_HEADER

ACTIVE = "http://10.10.1.201:8700"
STANDBY = "http://10.10.1.202:8700"
DEAD = "http://10.10.1.203:8700"


class Standby:
    def is_active(self) -> bool:
        return False

    def active(self) -> str | None:
        return ACTIVE


def standby_manager(env: Env) -> Manager:
    """A second manager on the same state and tokens that is not the active one."""
    return Manager(
        JsonFileStore(env.tmp / "state.json"),
        Tokens(env.tmp / "tokens"),
        clock=env.clock,
        notifier=env.notes,
        config=ManagerConfig(notify_interval=60.0, max_pv_age=120.0),
        leadership=Standby(),
    )


def standby_of(env: Env) -> TestClient:
    return TestClient(create_app(standby_manager(env), run_loop=False))


def bridge(
    app: TestClient, calls: list[str], lose_first_answer: bool = False
) -> httpx.MockTransport:
    """An httpx transport into a FastAPI app; optionally the first answer is lost after the
    app handled the request (as when the manager's node dies mid-answer)."""
    lost = [lose_first_answer]

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.host}")
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        got = app.request(
            request.method,
            request.url.path,
            params=request.url.params,
            headers=headers,
            content=request.content,
        )
        if lost[0]:
            lost[0] = False
            raise httpx.ReadError("connection reset by peer", request=request)
        return httpx.Response(got.status_code, headers=got.headers, content=got.content)

    return httpx.MockTransport(handle)


def refused(calls: list[str]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.host}")
        raise httpx.ConnectError("no route to host", request=request)

    return httpx.MockTransport(handle)


def with_pv(env: Env) -> None:
    env.http.post(
        "/v1/partitions/slurm/nodes",
        json={"nodes": ["node-0", "node-1"]},
        headers=env.auth(env.slurm),
    ).raise_for_status()
    env.http.put(
        "/v1/partitions/slurm/values",
        json={"values": {"node-0": 0.2, "node-1": 0.7}, "policy": "LIFO"},
        headers=env.auth(env.slurm),
    ).raise_for_status()


def kinds(env: Env, kind: str) -> list[dict[str, object]]:
    return [e for e in env.manager.events() if e["kind"] == kind]


def test_a_standby_answers_503_naming_the_active_one_and_does_nothing(env: Env) -> None:
    with_pv(env)
    env.http.post(
        "/v1/reclamations",
        json={"partition": "slurm", "count": 1, "grace": 30},
        headers=env.auth(env.admin),
    ).raise_for_status()
    manager = standby_manager(env)
    standby = TestClient(create_app(manager, run_loop=False))
    got = standby.get("/v1/status", headers=env.auth(env.admin))
    assert got.status_code == 503
    assert got.headers[ACTIVE_HEADER] == ACTIVE and got.json()["active"] == ACTIVE
    assert got.json()["error"] == "NotActive"
    assert standby.get("/v1/status").status_code == 503  # before any authentication
    health = standby.get("/v1/health").json()
    assert health == {"ok": True, "active": False, "active_manager": ACTIVE}
    assert standby.get("/openapi.json").status_code == 200
    assert env.http.get("/v1/health").json()["active"] is True

    before = env.state_bytes()
    env.clock.advance(31)  # past the deadline: only the active manager may act on it
    manager.tick()
    assert env.state_bytes() == before and env.notes.calls == []
    env.manager.tick()
    assert kinds(env, "reclamation-finished")


def test_a_standby_serves_its_metrics_behind_the_tokens(env: Env) -> None:
    """Prometheus scrapes every manager: a standby reads the same replicated state."""
    standby = standby_of(env)
    got = standby.get("/metrics", headers=env.auth(env.admin))
    assert got.status_code == 200 and 'ptc_pool_nodes{holder="free",site="local"} 4.0' in got.text
    assert standby.get("/metrics").status_code == 401


def test_the_client_finds_the_active_manager_among_every_endpoint(env: Env) -> None:
    calls: list[str] = []
    transports = {
        DEAD: refused(calls),
        STANDBY: bridge(standby_of(env), calls),
        ACTIVE: bridge(env.http, calls),
    }
    client = ManagerClient(f"{DEAD},{STANDBY},{ACTIVE}", env.admin, transports=transports)
    assert {n["name"] for n in client.status()["nodes"]} >= {"node-0"}
    assert calls == ["GET 10.10.1.203", "GET 10.10.1.202", "GET 10.10.1.201"]
    assert client.url == ACTIVE  # asked first from now on
    calls.clear()
    client.discover()
    assert calls == ["GET 10.10.1.201"]


def test_a_standby_s_hint_is_followed_first(env: Env) -> None:
    calls: list[str] = []
    transports = {
        STANDBY: bridge(standby_of(env), calls),
        DEAD: refused(calls),
        ACTIVE: bridge(env.http, calls),
    }
    ManagerClient([STANDBY, DEAD, ACTIVE], env.admin, transports=transports).status()
    assert calls == ["GET 10.10.1.202", "GET 10.10.1.201"]  # the 503 named the active one


def test_no_active_manager_gives_up_after_the_failover_timeout(env: Env) -> None:
    calls: list[str] = []
    clock = Clock(0.0)
    client = ManagerClient(
        [DEAD, STANDBY],
        env.admin,
        transports={DEAD: refused(calls), STANDBY: bridge(standby_of(env), calls)},
        failover_timeout=5.0,
        clock=clock,
        sleep=clock.advance,
    )
    with pytest.raises(ManagerUnreachable, match="within 5 s") as err:
        client.status()
    assert DEAD in str(err.value) and "standby" in str(err.value)
    # Rounds a fifth of a second apart, bounded; the manager that could not be reached is asked
    # again only every 2 s (recheck), not in every round.
    dead = [c for c in calls if DEAD.split("//")[1].split(":")[0] in c]
    assert 4 <= len(calls) <= 26 + 3
    assert 1 <= len(dead) <= 3


def test_a_frozen_manager_s_silence_moves_the_request_on(env: Env) -> None:
    """A frozen node's kernel still completes the TCP handshake, then nothing answers: a real
    listening socket that never accepts. The POST goes to the next manager with the same
    Idempotency-Key once the read timeout passes, and is applied once."""
    with_pv(env)
    calls: list[str] = []
    with socket.socket() as frozen:
        frozen.bind(("127.0.0.1", 0))
        frozen.listen(8)
        silent = f"http://127.0.0.1:{frozen.getsockname()[1]}"
        client = ManagerClient(
            [silent, ACTIVE],
            env.admin,
            timeout=0.5,
            transports={ACTIVE: bridge(env.http, calls)},
            sleep=lambda _: None,
        )
        rec = client.reclaim("slurm", 1, 30)
    assert calls == ["POST 10.10.1.201"]
    assert client.url == ACTIVE and client.urls[-1] == silent  # asked last from now on
    assert list(env.manager.read().reclamations) == [rec["id"]]


def test_a_post_whose_answer_was_lost_is_applied_once(env: Env) -> None:
    with_pv(env)
    calls: list[str] = []
    client = ManagerClient(
        [ACTIVE],
        env.admin,
        transports={ACTIVE: bridge(env.http, calls, lose_first_answer=True)},
        sleep=lambda _: None,
    )
    rec = client.reclaim("slurm", 1, 30)
    assert calls == ["POST 10.10.1.201", "POST 10.10.1.201"]
    assert list(env.manager.read().reclamations) == [rec["id"]]
    assert len(kinds(env, "reclamation-started")) == 1


def test_the_same_key_replays_and_a_key_reused_elsewhere_is_refused(env: Env) -> None:
    with_pv(env)
    headers = {**env.auth(env.admin), "Idempotency-Key": "k-1"}
    body = {"partition": "slurm", "count": 1, "grace": 30}
    first = env.http.post("/v1/reclamations", json=body, headers=headers)
    again = env.http.post("/v1/reclamations", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert len(kinds(env, "reclamation-started")) == 1
    other = env.http.post(
        "/v1/partitions/ref/nodes", json={"count": 1}, headers={**headers, **env.auth(env.ref)}
    )
    assert other.status_code == 422 and other.json()["field"] == "Idempotency-Key"
    bad = env.http.post(
        "/v1/reclamations", json=body, headers={**headers, "Idempotency-Key": "a b"}
    )
    assert bad.status_code == 422


def test_requests_are_forgotten_after_a_while(env: Env) -> None:
    admin = env.manager.authenticate(env.admin)
    with request_key("old"):
        env.manager.register_node(admin, "node-9")
    assert "old" in env.manager.read().requests
    env.clock.advance(3600)
    with request_key("new"):
        env.manager.register_node(admin, "node-8")
    assert set(env.manager.read().requests) == {"new"}


def test_a_repeated_job_report_is_logged_once(env: Env) -> None:
    with_pv(env)
    slurm = env.manager.authenticate(env.slurm)
    admin = env.manager.authenticate(env.admin)
    rec = env.manager.reclaim(admin, "slurm", 1, 30)
    report = [{"job_id": "7", "elapsed": 5.0, "node_count": 1, "requeued": True}]
    env.manager.report_jobs(slurm, rec.id, report)
    env.manager.report_jobs(slurm, rec.id, report)
    assert len(kinds(env, "jobs-requeued")) == 1


def test_a_change_that_changes_nothing_writes_nothing(env: Env) -> None:
    admin = env.manager.authenticate(env.admin)
    before = env.state_bytes()
    env.manager.register_node(admin, "node-0", cpus=4, memory_mb=8192, features=["x86"])
    env.manager.ensure_partition("slurm", "http://10.10.1.1:8701")
    assert env.state_bytes() == before


class Campaigning:
    """A leadership that campaigns: the app starts it and stops (resigns) it with itself."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def is_active(self) -> bool:
        return "start" in self.calls

    def active(self) -> str | None:
        return ACTIVE

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")


def test_the_app_campaigns_while_it_runs_and_resigns_as_it_stops(env: Env) -> None:
    leadership = Campaigning()
    env.manager.leadership = leadership
    with TestClient(create_app(env.manager, run_loop=False)) as http:
        assert leadership.calls == ["start"]
        assert http.get("/v1/status", headers=env.auth(env.admin)).status_code == 200
    assert leadership.calls == ["start", "stop"]
