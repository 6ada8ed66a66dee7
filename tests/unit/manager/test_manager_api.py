"""The manager's RPCs through its HTTP API, on a temporary state file with an injected clock."""

from __future__ import annotations

import math
import stat

import pytest
from manager_env import NODES, T0, Env

from elastic.cli.elastic import _describe as describe
from elastic.manager.client import ManagerClient, ReferenceClient
from elastic.policies import JobInfo, LifoPolicy, Snapshot, select_nodes, wasted_cycles


def add(env: Env, token: str, partition: str, **body: object) -> dict[str, object]:
    r = env.http.post(f"/v1/partitions/{partition}/nodes", json=body, headers=env.auth(token))
    assert r.status_code == 200, r.text
    out: dict[str, object] = r.json()
    return out


def owners(env: Env) -> dict[str, str | None]:
    r = env.http.get("/v1/nodes", headers=env.auth(env.admin))
    assert r.status_code == 200
    return {n["name"]: n["owner"] for n in r.json()}


# A known snapshot: j1 on node-0 (100 s), j2 on node-1+node-2 (500 s), node-3 idle.
JOBS = (
    JobInfo("j1", ("node-0",), 100.0, remaining=1000.0),
    JobInfo("j2", ("node-1", "node-2"), 500.0, remaining=10.0),
)


def report_lifo(env: Env, at: float) -> dict[str, float]:
    snap = Snapshot(at, NODES, JOBS)
    pv = LifoPolicy().evaluate(snap)
    jobs = [
        {"job_id": j.job_id, "nodes": list(j.nodes), "elapsed": j.elapsed, "remaining": j.remaining}
        for j in JOBS
    ]
    body = {"values": dict(pv.values), "policy": "LIFO", "time": at, "jobs": jobs}
    r = env.http.put("/v1/partitions/slurm/values", json=body, headers=env.auth(env.slurm))
    assert r.status_code == 200, r.text
    return dict(pv.values)


def slurm_holds_all(env: Env) -> None:
    add(env, env.slurm, "slurm", nodes=list(NODES))


def test_secrets_are_root_only_and_not_in_the_state(env: Env) -> None:
    tokens = env.tmp / "tokens"
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o700
    for f in tokens.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert stat.S_IMODE((env.tmp / "state.json").stat().st_mode) == 0o600
    state = env.state_bytes().decode()
    for token in (env.admin, env.slurm, env.ref):
        assert token not in state
    status = env.http.get("/v1/status", headers=env.auth(env.admin)).text
    assert env.slurm not in status and env.admin not in status


def test_tokens_wrong_missing_and_forbidden(env: Env) -> None:
    assert env.http.get("/v1/status").status_code == 401
    r = env.http.get("/v1/status", headers=env.auth("not-a-token"))
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert env.http.get("/v1/health").status_code == 200
    # a partition may not do an admin's work, nor read another partition's token
    r = env.http.post(
        "/v1/reclamations",
        json={"partition": "slurm", "count": 1, "grace": 1},
        headers=env.auth(env.ref),
    )
    assert r.status_code == 403
    assert env.http.get("/v1/partitions/slurm/token", headers=env.auth(env.ref)).status_code == 403
    r = env.http.get("/v1/partitions/slurm/token", headers=env.auth(env.slurm))
    assert r.json() == {"token": env.slurm}
    r = env.http.get("/v1/partitions/slurm/token", headers=env.auth(env.admin))
    assert r.json() == {"token": env.slurm}
    r = env.http.put("/v1/nodes/node-9", json={}, headers=env.auth(env.slurm))
    assert r.status_code == 403


def test_the_observer_token_reads_the_pool_and_changes_nothing(env: Env) -> None:
    """What a monitoring system holds: the metrics, the status, the nodes, the reclamations and
    the events; never a token, a node or a reclamation."""
    slurm_holds_all(env)
    observer = (env.tmp / "tokens" / "observer.token").read_text().strip()
    seen = env.auth(observer)
    for path in ("/metrics", "/v1/status", "/v1/nodes", "/v1/partitions", "/v1/reclamations",
                 "/v1/events"):  # fmt: skip
        assert env.http.get(path, headers=seen).status_code == 200, path
    refused = [
        env.http.get("/v1/partitions/slurm/token", headers=seen),
        env.http.get("/v1/values", headers=seen),
        env.http.post("/v1/partitions/ref/nodes", json={"count": 1}, headers=seen),
        env.http.post(
            "/v1/partitions/slurm/nodes/release", json={"nodes": NODES[:1]}, headers=seen
        ),
        env.http.post(
            "/v1/reclamations", json={"partition": "slurm", "count": 1, "grace": 1}, headers=seen
        ),
        env.http.post("/v1/partitions", json={"name": "mine"}, headers=seen),
    ]
    for r in refused:
        assert r.status_code == 403, (r.request.url, r.text)
        assert "only reads" in r.json()["message"]
    assert set(owners(env).values()) == {"slurm"}  # nothing moved
    # no partition may take the observer's name (its token's file is the observer's)
    r = env.http.post("/v1/partitions", json={"name": "observer"}, headers=env.auth(env.admin))
    assert r.status_code == 422 and r.json()["field"] == "name", r.text


def test_create_partition_and_discover(env: Env) -> None:
    r = env.http.post(
        "/v1/partitions", json={"name": "cloud", "endpoint": None}, headers=env.auth(env.admin)
    )
    assert r.status_code == 201
    token = r.json()["token"]
    assert env.http.get("/v1/nodes", headers=env.auth(token)).status_code == 200
    r = env.http.post("/v1/partitions", json={"name": "cloud"}, headers=env.auth(env.admin))
    assert r.status_code == 409 and r.json()["field"] == "name"
    nodes = {n["name"]: n for n in env.http.get("/v1/nodes", headers=env.auth(token)).json()}
    assert set(nodes) == set(NODES)
    assert nodes["node-3"]["features"] == ["gpu", "x86"] and nodes["node-3"]["cpus"] == 4
    assert all(n["owner"] is None and n["state"] == "free" for n in nodes.values())


def test_add_delete_and_ownership(env: Env) -> None:
    out = add(env, env.slurm, "slurm", nodes=["node-0", "node-1"])
    assert out["added"] == ["node-0", "node-1"]
    assert add(env, env.slurm, "slurm", nodes=["node-0"])["added"] == []  # a retried resume
    before = env.state_bytes()
    # ref cannot take slurm's node, add to slurm, or release slurm's node
    r = env.http.post(
        "/v1/partitions/ref/nodes", json={"nodes": ["node-0"]}, headers=env.auth(env.ref)
    )
    assert r.status_code == 409 and "slurm" in r.json()["message"]
    r = env.http.post(
        "/v1/partitions/slurm/nodes", json={"nodes": ["node-2"]}, headers=env.auth(env.ref)
    )
    assert r.status_code == 403
    r = env.http.post(
        "/v1/partitions/ref/nodes/release", json={"nodes": ["node-0"]}, headers=env.auth(env.ref)
    )
    assert r.status_code == 403
    r = env.http.post(
        "/v1/partitions/slurm/nodes/release", json={"nodes": ["node-0"]}, headers=env.auth(env.ref)
    )
    assert r.status_code == 403
    assert env.state_bytes() == before
    r = env.http.post(
        "/v1/partitions/slurm/nodes/release",
        json={"nodes": ["node-0"]},
        headers=env.auth(env.slurm),
    )
    assert r.json() == {"released": ["node-0"]}
    assert owners(env) == {"node-0": None, "node-1": "slurm", "node-2": None, "node-3": None}
    kinds = [e["kind"] for e in env.http.get("/v1/events", headers=env.auth(env.admin)).json()]
    assert kinds[-2:] == ["nodes-added", "nodes-deleted"]


def test_manager_values(env: Env) -> None:
    add(env, env.slurm, "slurm", nodes=["node-0"])
    r = env.http.get("/v1/values", headers=env.auth(env.ref))
    assert r.json() == {"node-0": 1.0, "node-1": 0.0, "node-2": 0.0, "node-3": 0.0}
    r = env.http.get("/v1/values", headers=env.auth(env.slurm))
    assert "node-0" not in r.json()


def test_set_values_rules(env: Env) -> None:
    add(env, env.slurm, "slurm", nodes=["node-0", "node-1"])
    h = env.auth(env.slurm)
    r = env.http.put("/v1/partitions/ref/values", json={"values": {}}, headers=h)
    assert r.status_code == 403
    r = env.http.put("/v1/partitions/slurm/values", json={"values": {"node-0": 1.5}}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "values.node-0"
    r = env.http.put("/v1/partitions/slurm/values", json={"values": {"node-7": 0.5}}, headers=h)
    assert r.status_code == 404 and r.json()["field"] == "values"
    r = env.http.put(
        "/v1/partitions/slurm/values", json={"values": {}, "time": T0 + 3600}, headers=h
    )
    assert r.status_code == 422 and r.json()["field"] == "time"
    r = env.http.put(
        "/v1/partitions/slurm/values", json={"values": {"node-0": 0.2, "node-2": 0.1}}, headers=h
    )
    assert r.status_code == 200
    assert r.json()["ignored"] == ["node-2"] and r.json()["pv"]["values"] == {"node-0": 0.2}


def test_reclaim_picks_what_the_policy_names_and_notifies(env: Env) -> None:
    slurm_holds_all(env)
    values = report_lifo(env, T0)
    expected = select_nodes(LifoPolicy().evaluate(Snapshot(T0, NODES, JOBS)), 2)
    assert expected == ["node-3", "node-0"]  # idle first, then the youngest job
    env.clock.advance(10)
    r = env.http.post(
        "/v1/reclamations",
        json={"partition": "slurm", "count": 2, "grace": 30},
        headers=env.auth(env.admin),
    )
    assert r.status_code == 201, r.text
    rec = r.json()
    assert rec["chosen"] == expected and rec["values"] == values
    assert rec["deadline"] == T0 + 10 + 30 and rec["policy"] == "LIFO"
    env.manager.tick()
    assert len(env.notes.calls) == 1
    endpoint, token, payload = env.notes.calls[0]
    assert endpoint == "http://10.10.1.1:8701" and token == env.slurm
    assert payload["nodes"] == expected and payload["deadline"] == T0 + 40
    assert "r1" in payload["reason"]
    env.clock.advance(10)
    env.manager.tick()
    assert len(env.notes.calls) == 1  # not again within the minute
    states = {
        n["name"]: n["state"] for n in env.http.get("/v1/nodes", headers=env.auth(env.ref)).json()
    }
    assert states["node-3"] == "reclaiming" and states["node-1"] == "allocated"
    # a second reclamation cannot take the nodes already under reclamation
    r = env.http.post(
        "/v1/reclamations",
        json={"partition": "slurm", "count": 3, "grace": 30},
        headers=env.auth(env.admin),
    )
    assert r.status_code == 422 and r.json()["field"] == "count"


def test_renotified_every_interval_until_released(env: Env) -> None:
    slurm_holds_all(env)
    report_lifo(env, T0)
    env.manager.reclaim(env.manager.authenticate(env.admin), "slurm", 2, 300)
    env.notes.fail = True
    env.manager.tick()
    assert env.manager.reclamation("r1").notify_error.startswith("ConnectionError")
    env.notes.fail = False
    env.clock.advance(60)
    env.manager.tick()
    assert len(env.notes.calls) == 2 and env.manager.reclamation("r1").notify_error == ""
    env.http.post(
        "/v1/partitions/slurm/nodes/release",
        json={"nodes": ["node-3", "node-0"]},
        headers=env.auth(env.slurm),
    )
    env.clock.advance(60)
    env.manager.tick()
    assert len(env.notes.calls) == 2
    rec = env.manager.reclamation("r1")
    assert rec.state == "done" and rec.forced == [] and rec.wasted_cycles == 0.0


def test_deadline_forces_release_and_logs_simulator_waste(env: Env) -> None:
    slurm_holds_all(env)
    report_lifo(env, T0)
    env.clock.advance(20)  # the PV is 20 s old when the reclamation starts
    grace = 30.0
    env.manager.reclaim(env.manager.authenticate(env.admin), "slurm", 3, grace)
    chosen = env.manager.reclamation("r1").chosen
    assert chosen == ["node-3", "node-0", "node-1"]
    env.clock.advance(5)
    env.http.post(  # the idle node goes at once
        "/v1/partitions/slurm/nodes/release",
        json={"nodes": ["node-3"]},
        headers=env.auth(env.slurm),
    )
    env.clock.advance(24)
    env.manager.tick()
    assert env.manager.reclamation("r1").state == "pending"
    env.clock.advance(1)  # the deadline
    env.manager.tick()
    rec = env.manager.reclamation("r1")
    assert rec.state == "done" and rec.forced == ["node-0", "node-1"]
    assert owners(env) == {"node-0": None, "node-1": None, "node-2": "slurm", "node-3": None}
    finished = [e for e in env.manager.events() if e["kind"] == "reclamation-finished"][-1]["data"]
    # Both jobs were still running at the deadline. The simulator's formula on the same jobs,
    # elapsed taken at the reclamation (PV time + 20 s):
    shifted = tuple(JobInfo(j.job_id, j.nodes, j.elapsed + 20, remaining=math.inf) for j in JOBS)
    expected = wasted_cycles(Snapshot(T0 + 20, NODES, shifted), chosen, grace)
    assert finished["wasted_cycles"] == expected.total == (120 + 30) * 1 + (520 + 30) * 2
    killed = {j["job_id"]: (j["elapsed"], j["node_count"]) for j in finished["jobs_killed"]}
    assert killed == {"j1": (120.0, 1), "j2": (520.0, 2)}
    assert finished["forced"] == ["node-0", "node-1"] and finished["released"] == {"node-3": 5.0}
    started = [e for e in env.manager.events() if e["kind"] == "reclamation-started"][-1]["data"]
    assert started["policy"] == "LIFO" and started["grace"] == grace and started["chosen"] == chosen
    # predicted from time limits: j2 has 10 s left at the PV, so it "finishes" within the GP
    predicted = wasted_cycles(
        Snapshot(
            T0 + 20,
            NODES,
            (
                JobInfo("j1", ("node-0",), 120.0, remaining=980.0),
                JobInfo("j2", ("node-1", "node-2"), 520.0, remaining=0.0),
            ),
        ),
        chosen,
        grace,
    ).total
    assert started["predicted_wasted_cycles"] == predicted == 150.0


def test_stale_or_missing_pv_is_refused_and_nothing_changes(env: Env) -> None:
    slurm_holds_all(env)
    body = {"partition": "slurm", "count": 1, "grace": 10}
    before = env.state_bytes()
    r = env.http.post("/v1/reclamations", json=body, headers=env.auth(env.admin))
    assert r.status_code == 409 and r.json()["field"] == "pv"
    report_lifo(env, T0)
    env.clock.advance(121)
    before = env.state_bytes()
    r = env.http.post("/v1/reclamations", json=body, headers=env.auth(env.admin))
    assert r.status_code == 409 and "old" in r.json()["message"]
    assert env.state_bytes() == before


def test_restart_mid_reclamation_completes_at_the_deadline(env: Env) -> None:
    slurm_holds_all(env)
    report_lifo(env, T0)
    env.manager.reclaim(env.manager.authenticate(env.admin), "slurm", 2, 60)
    env.manager.tick()
    env2 = env.restart()
    r = env2.http.get("/v1/status", headers=env2.auth(env.admin))
    assert [rec["id"] for rec in r.json()["reclamations"]] == ["r1"]
    env.clock.advance(59)
    env2.manager.tick()
    assert env2.manager.reclamation("r1").state == "pending"
    env.clock.advance(1)
    env2.manager.tick()
    assert env2.manager.reclamation("r1").state == "done"
    assert owners(env2)["node-3"] is None and owners(env2)["node-0"] is None


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"partition": "slurm", "count": 5, "grace": 10}, 422, "count"),
        ({"partition": "slurm", "count": 0, "grace": 10}, 422, "count"),
        ({"partition": "slurm", "count": 1, "grace": -1}, 422, "grace"),
        ({"partition": "nope", "count": 1, "grace": 10}, 404, "partition"),
        ({"partition": "slurm", "count": 1}, 422, "grace"),
    ],
)
def test_bad_reclaim_names_the_field_and_changes_nothing(
    env: Env, body: dict[str, object], status: int, field: str
) -> None:
    slurm_holds_all(env)
    report_lifo(env, T0)
    before = env.state_bytes()
    r = env.http.post("/v1/reclamations", json=body, headers=env.auth(env.admin))
    assert r.status_code == status, r.text
    assert r.json()["field"] == field and field in r.json()["message"]
    assert env.state_bytes() == before


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/v1/partitions/ref/nodes", {"count": 5}, 422, "count"),
        ("/v1/partitions/ref/nodes", {"count": 2, "grace": -5}, 422, "grace"),
        ("/v1/partitions/ref/nodes", {"nodes": ["node-9"]}, 404, "nodes"),
        ("/v1/partitions/ref/nodes", {"nodes": ["node-1"], "count": 1}, 422, "nodes"),
        ("/v1/partitions/ghost/nodes", {"count": 1}, 404, "partition"),
        ("/v1/partitions/ref/nodes/release", {"nodes": ["node-9"]}, 404, "nodes"),
        ("/v1/partitions/ref/nodes/release", {"nodes": []}, 422, "nodes"),
        ("/v1/partitions/ref/nodes/release", {"nodes": ["node-1"]}, 409, "nodes"),
    ],
)
def test_bad_add_and_release_name_the_field(
    env: Env, path: str, body: dict[str, object], status: int, field: str
) -> None:
    add(env, env.ref, "ref", nodes=["node-0"])
    before = env.state_bytes()
    r = env.http.post(path, json=body, headers=env.auth(env.admin))
    assert r.status_code == status, r.text
    assert r.json()["field"] == field
    assert env.state_bytes() == before


def test_acquire_reclaims_from_slurm_when_the_pool_is_empty(env: Env) -> None:
    slurm_holds_all(env)
    report_lifo(env, T0)
    before = env.state_bytes()
    r = env.http.post("/v1/partitions/ref/nodes", json={"count": 2}, headers=env.auth(env.ref))
    assert r.status_code == 409 and r.json()["field"] == "count"  # no grace, no reclamation
    assert env.state_bytes() == before
    out = add(env, env.ref, "ref", count=2, grace=30)
    assert out["added"] == [] and out["waiting"] == 2 and out["reclamations"] == ["r1"]
    rec = env.manager.reclamation("r1")
    assert rec.beneficiary == "ref" and rec.chosen == ["node-3", "node-0"]
    env.http.post(
        "/v1/partitions/slurm/nodes/release",
        json={"nodes": ["node-3"]},
        headers=env.auth(env.slurm),
    )
    assert owners(env)["node-3"] == "ref"
    env.clock.advance(30)
    env.manager.tick()
    assert owners(env) == {"node-0": "ref", "node-1": "slurm", "node-2": "slurm", "node-3": "ref"}


def test_acquire_with_features(env: Env) -> None:
    out = add(env, env.ref, "ref", count=1, features=["gpu"])
    assert out["added"] == ["node-3"]
    r = env.http.post(
        "/v1/partitions/ref/nodes",
        json={"count": 1, "features": ["gpu"]},
        headers=env.auth(env.ref),
    )
    assert r.status_code == 422 and r.json()["field"] == "count"


def test_reference_client_library(env: Env) -> None:
    slurm_holds_all(env)
    env.http.post(
        "/v1/partitions/slurm/nodes/release",
        json={"nodes": ["node-2"]},
        headers=env.auth(env.slurm),
    )
    report_lifo_partial = {"node-0": 0.5, "node-1": 0.7, "node-3": 0.0}
    env.http.put(
        "/v1/partitions/slurm/values",
        json={"values": report_lifo_partial, "policy": "LIFO"},
        headers=env.auth(env.slurm),
    )
    client = ReferenceClient(ManagerClient("http://testserver", env.ref, client=env.http), "ref")
    ticks = iter(range(100))
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the manager's loop runs while the client waits
        slept.append(seconds)
        env.clock.advance(seconds)
        env.manager.tick()

    client = ReferenceClient(
        ManagerClient("http://testserver", env.ref, client=env.http),
        "ref",
        clock=lambda: float(next(ticks)),
        sleep=sleep,
    )
    got = client.acquire(2, grace=4, wait=30, poll=2)
    assert got.added == ["node-2"] and got.reclamations == ["r1"]
    assert got.complete and got.nodes == ["node-2", "node-3"] and slept
    assert client.release(["node-2"]) == ["node-2"]
    assert client.held() == ["node-3"]
    from elastic.errors import InputError

    with pytest.raises(InputError, match="count"):
        client.acquire(9)


def test_events_paging(env: Env) -> None:
    add(env, env.slurm, "slurm", nodes=["node-0"])
    all_events = env.http.get("/v1/events", headers=env.auth(env.ref)).json()
    assert [e["seq"] for e in all_events] == list(range(1, len(all_events) + 1))
    tail = env.http.get(
        "/v1/events", params={"since": len(all_events) - 1}, headers=env.auth(env.ref)
    )
    assert tail.json() == all_events[-1:]
    r = env.http.get("/v1/events", params={"since": -1}, headers=env.auth(env.ref))
    assert r.status_code == 422 and r.json()["field"] == "since"


def test_a_partition_reports_its_resumes_to_the_event_log_and_only_its_own(env: Env) -> None:
    body = {
        "nodes": ["node-0", "node-1"],
        "ready": ["node-0"],
        "failed": {"node-1": "power on failed: no machine"},
        "timings": {"manager": 0.1, "power_on": 3.5, "total": 4.0},
    }
    r = env.http.post("/v1/partitions/slurm/resumes", json=body, headers=env.auth(env.slurm))
    assert r.status_code == 200, r.text
    (event,) = [e for e in env.http.get("/v1/events", headers=env.auth(env.admin)).json()
                if e["kind"] == "resume-reported"]  # fmt: skip
    assert event["data"] == {"partition": "slurm", "called_off": [], **body}
    assert describe(event) == (
        "slurm: ready node-0 (manager 0.1 s, power_on 3.5 s, total 4.0 s); "
        "failed node-1: power on failed: no machine"
    )
    # another partition's token may not report for this one; an unknown partition is named
    r = env.http.post("/v1/partitions/slurm/resumes", json=body, headers=env.auth(env.ref))
    assert r.status_code == 403, r.text
    r = env.http.post("/v1/partitions/nope/resumes", json=body, headers=env.auth(env.admin))
    assert r.status_code == 404 and "nope" in r.text, r.text
    # a step's name or seconds out of shape: refused, naming the field
    for bad in ({"timings": {"Power On": 1.0}}, {"timings": {"total": -1}}, {"nodes": []}):
        r = env.http.post(
            "/v1/partitions/slurm/resumes", json={**body, **bad}, headers=env.auth(env.slurm)
        )
        assert r.status_code == 422, r.text
        assert next(iter(bad)) in r.text, r.text
