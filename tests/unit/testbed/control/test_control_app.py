"""The control service's API with a fake of nodeops: refusals name what they refuse and change
nothing; operations answer with their steps; the journal replays; busy nodes are refused."""

from __future__ import annotations

import stat
import threading
from typing import Any

import pytest
from control_support import FakeNodeOps, make_experiment, secret, settings_for
from fastapi.testclient import TestClient

from elastic.errors import TestbedError
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local.control import service
from elastic.testbed.backends.local.control.app import create_app
from elastic.testbed.experiment import Experiment


@pytest.fixture
def alpha() -> Experiment:
    return make_experiment("alpha")


@pytest.fixture
def beta() -> Experiment:
    return make_experiment("beta")


@pytest.fixture
def ops() -> FakeNodeOps:
    return FakeNodeOps()


def client(exp: Experiment, ops: FakeNodeOps) -> TestClient:
    return TestClient(create_app(settings_for(exp, ops)))


def auth(exp: Experiment) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret(exp)}"}


def operate(action: str, nodes: list[str], request_id: str = "r1") -> dict[str, Any]:
    return {"id": request_id, "action": action, "nodes": nodes}


def test_credential_file_is_root_only_and_unique_per_experiment(
    alpha: Experiment, beta: Experiment
) -> None:
    path = service.Places.of(alpha).credential
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(secret(alpha)) >= 32
    assert secret(alpha) != secret(beta)


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic abc", "Bearer "])
def test_missing_or_wrong_credential_is_401_and_nothing_runs(
    alpha: Experiment, ops: FakeNodeOps, header: str | None
) -> None:
    headers = {"Authorization": header} if header is not None else {}
    api = client(alpha, ops)
    answer = api.post("/v1/operations", json=operate("power_off", ["node-0"]), headers=headers)
    assert answer.status_code == 401
    assert "credential" in answer.json()["detail"]
    assert api.get("/v1/nodes", headers=headers).status_code == 401
    assert ops.calls == []
    assert not list(service.Places.of(alpha).journal.glob("*.json"))


def test_another_experiments_credential_is_401(
    alpha: Experiment, beta: Experiment, ops: FakeNodeOps
) -> None:
    answer = client(alpha, ops).post(
        "/v1/operations", json=operate("power_off", ["node-0"]), headers=auth(beta)
    )
    assert answer.status_code == 401
    assert ops.calls == []


def test_unknown_node_is_404_naming_it(alpha: Experiment, ops: FakeNodeOps) -> None:
    answer = client(alpha, ops).post(
        "/v1/operations", json=operate("power_off", ["node-0", "node-9"]), headers=auth(alpha)
    )
    assert answer.status_code == 404
    assert answer.json()["node"] == "node-9"
    assert "'node-9'" in answer.json()["detail"]
    assert ops.calls == []  # node-0 was not touched either
    assert ops.state["node-0"] == "running"


@pytest.mark.parametrize(
    "name",
    [
        "beta-node-0",
        "urn:publicid:IDN+ptc.local+node+beta-node-0",
        "urn:publicid:IDN+ptc.local+sliver+beta-node-0",
        "ptc-beta-node-0",
    ],
)
def test_another_experiments_node_is_403_naming_it(
    alpha: Experiment, beta: Experiment, ops: FakeNodeOps, name: str
) -> None:
    answer = client(alpha, ops).post(
        "/v1/operations", json=operate("power_off", ["head", name]), headers=auth(alpha)
    )
    assert answer.status_code == 403
    assert answer.json()["node"] == name
    assert "another experiment" in answer.json()["detail"]
    assert ops.calls == []


@pytest.mark.parametrize(
    "name",
    ["node-0", "alpha-node-0", "ptc-alpha-node-0", "urn:publicid:IDN+ptc.local+node+alpha-node-0"],
)
def test_own_node_by_any_of_its_names(alpha: Experiment, ops: FakeNodeOps, name: str) -> None:
    answer = client(alpha, ops).post(
        "/v1/operations", json=operate("power_off", [name]), headers=auth(alpha)
    )
    assert answer.status_code == 200, answer.text
    assert ops.calls == [("power_off", ["node-0"])]


def test_malformed_request_is_422_naming_the_field(alpha: Experiment, ops: FakeNodeOps) -> None:
    api = client(alpha, ops)
    answer = api.post("/v1/operations", json=operate("explode", ["node-0"]), headers=auth(alpha))
    assert answer.status_code == 422
    assert "action" in answer.json()["detail"]
    answer = api.post("/v1/operations", json=operate("power_on", []), headers=auth(alpha))
    assert answer.status_code == 422 and "nodes" in answer.json()["detail"]
    answer = api.post(
        "/v1/operations", json=operate("power_on", ["node-0"], "../x"), headers=auth(alpha)
    )
    assert answer.status_code == 422 and "id" in answer.json()["detail"]
    assert ops.calls == []


def test_nodes_lists_this_experiments_states(alpha: Experiment, ops: FakeNodeOps) -> None:
    answer = client(alpha, ops).get("/v1/nodes", headers=auth(alpha))
    assert answer.status_code == 200
    assert answer.json() == {
        "experiment": "alpha",
        "nodes": {"head": "running", "node-0": "running", "node-1": "running"},
    }


def test_operation_answers_with_steps_and_is_journaled(alpha: Experiment, ops: FakeNodeOps) -> None:
    api = client(alpha, ops)
    answer = api.post(
        "/v1/operations", json=operate("power_off", ["node-0", "node-1"]), headers=auth(alpha)
    )
    body = answer.json()
    assert answer.status_code == 200
    assert body["state"] == "done" and body["replayed"] is False and body["attempts"] == 1
    assert [s["node"] for s in body["steps"]] == ["node-0", "node-1"]
    assert all(s["step"] == "podman" for s in body["steps"])
    ats = [s["at"] for s in body["steps"]]
    assert ats == sorted(ats)
    assert ops.state["node-0"] == ops.state["node-1"] == "exited"
    assert api.get("/v1/operations/r1", headers=auth(alpha)).json()["state"] == "done"


def test_same_request_id_replays_the_recorded_result(alpha: Experiment, ops: FakeNodeOps) -> None:
    api = client(alpha, ops)
    first = api.post("/v1/operations", json=operate("power_off", ["node-0"]), headers=auth(alpha))
    again = api.post("/v1/operations", json=operate("power_off", ["node-0"]), headers=auth(alpha))
    assert first.status_code == again.status_code == 200
    assert again.json()["replayed"] is True
    assert again.json()["started"] == first.json()["started"]
    assert ops.calls == [("power_off", ["node-0"])]
    # a new service (a restart) on the same journal replays it too
    restarted = client(alpha, ops)
    answer = restarted.post(
        "/v1/operations", json=operate("power_off", ["node-0"]), headers=auth(alpha)
    )
    assert answer.json()["replayed"] is True
    assert ops.calls == [("power_off", ["node-0"])]


def test_request_id_reused_for_another_operation_is_409(
    alpha: Experiment, ops: FakeNodeOps
) -> None:
    api = client(alpha, ops)
    api.post("/v1/operations", json=operate("power_off", ["node-0"]), headers=auth(alpha))
    answer = api.post("/v1/operations", json=operate("power_on", ["node-0"]), headers=auth(alpha))
    assert answer.status_code == 409
    assert "'r1'" in answer.json()["detail"]
    assert len(ops.calls) == 1


def test_failure_names_node_and_step_and_is_replayed(alpha: Experiment, ops: FakeNodeOps) -> None:
    ops.fail = "node-1"
    api = client(alpha, ops)
    answer = api.post(
        "/v1/operations", json=operate("power_on", ["node-0", "node-1"]), headers=auth(alpha)
    )
    assert answer.status_code == 502
    assert (answer.json()["node"], answer.json()["step"]) == ("node-1", "start")
    assert answer.json()["operation"]["state"] == "failed"
    again = api.post(
        "/v1/operations", json=operate("power_on", ["node-0", "node-1"]), headers=auth(alpha)
    )
    assert again.status_code == 502 and again.json()["operation"]["replayed"] is True
    assert len(ops.calls) == 1


def test_no_free_machine_is_a_marked_503_the_client_raises_as_no_capacity(
    alpha: Experiment, ops: FakeNodeOps
) -> None:
    """A testbed without a free machine is a condition of the site, not a failure of the
    node: the answer says so, and the client's error is a NoCapacity the head pauses on."""
    import httpx

    from elastic.errors import NoCapacity
    from elastic.testbed.backends.local.control.client import _answer

    api = client(alpha, ops)
    api.post("/v1/operations", json=operate("release", ["node-0"], "rel"), headers=auth(alpha))
    ops.full = True
    answer = api.post("/v1/operations", json=operate("allocate", ["node-0"]), headers=auth(alpha))
    assert answer.status_code == 503 and answer.json()["capacity"] is True, answer.json()
    assert "the local testbed has" in answer.json()["detail"]
    with pytest.raises(NoCapacity, match="503: experiment 'alpha' needs 1"):
        _answer(httpx.Response(503, json=answer.json()))
    ops.full, ops.fail = False, "node-1"
    broken = api.post(
        "/v1/operations", json=operate("power_on", ["node-1"], "r2"), headers=auth(alpha)
    )
    assert broken.status_code == 502 and broken.json()["capacity"] is False
    with pytest.raises(TestbedError) as caught:
        _answer(httpx.Response(502, json=broken.json()))
    assert not isinstance(caught.value, NoCapacity)


def test_restart_after_an_interrupted_operation_runs_it_once_more(
    alpha: Experiment, ops: FakeNodeOps
) -> None:
    settings = settings_for(alpha, ops)
    # what a service killed mid-operation leaves: the record, started, and nothing after
    settings.journal.start("r1", "power_on", ["node-0"])
    api = TestClient(create_app(settings_for(alpha, ops)))  # the restarted service
    assert api.get("/v1/operations/r1", headers=auth(alpha)).json()["state"] == "interrupted"
    answer = api.post("/v1/operations", json=operate("power_on", ["node-0"]), headers=auth(alpha))
    body = answer.json()
    assert answer.status_code == 200
    assert (body["state"], body["attempts"], body["replayed"]) == ("done", 2, False)
    assert len(body["interrupted"]) == 1
    assert ops.calls == [("power_on", ["node-0"])]
    again = api.post("/v1/operations", json=operate("power_on", ["node-0"]), headers=auth(alpha))
    assert again.json()["replayed"] is True
    assert ops.calls == [("power_on", ["node-0"])]


def test_concurrent_request_for_a_busy_node_is_409(alpha: Experiment, ops: FakeNodeOps) -> None:
    ops.gate = threading.Event()
    ops.hold = {"node-0", "node-1"}
    api = client(alpha, ops)
    answers: dict[str, Any] = {}

    def first() -> None:
        answers["first"] = api.post(
            "/v1/operations", json=operate("power_off", ["node-0", "node-1"]), headers=auth(alpha)
        )

    worker = threading.Thread(target=first)
    worker.start()
    assert ops.entered.wait(10)
    busy = api.post("/v1/operations", json=operate("reload", ["node-1"], "r2"), headers=auth(alpha))
    free = api.post("/v1/operations", json=operate("reload", ["head"], "r3"), headers=auth(alpha))
    ops.gate.set()
    worker.join(10)
    assert busy.status_code == 409
    assert busy.json()["node"] == "node-1" and "'r1'" in busy.json()["detail"]
    assert free.status_code == 200
    assert answers["first"].status_code == 200
    assert ops.calls == [("power_off", ["node-0", "node-1"]), ("reload", ["head"])]
    # the refused request was not journaled: it can be sent again once the node is free
    retry = api.post(
        "/v1/operations", json=operate("reload", ["node-1"], "r2"), headers=auth(alpha)
    )
    assert retry.status_code == 200 and retry.json()["replayed"] is False


def test_same_request_id_while_it_runs_waits_for_its_result(
    alpha: Experiment, ops: FakeNodeOps
) -> None:
    ops.gate = threading.Event()
    api = client(alpha, ops)
    answers: list[Any] = []

    def send() -> None:
        answers.append(
            api.post("/v1/operations", json=operate("power_off", ["node-0"]), headers=auth(alpha))
        )

    workers = [threading.Thread(target=send) for _ in range(2)]
    workers[0].start()
    assert ops.entered.wait(10)
    workers[1].start()
    ops.gate.set()
    for w in workers:
        w.join(10)
    assert [a.status_code for a in answers] == [200, 200]
    assert sorted(a.json()["replayed"] for a in answers) == [False, True]
    assert ops.calls == [("power_off", ["node-0"])]


def test_failure_place_read_from_nodeops_message(alpha: Experiment, ops: FakeNodeOps) -> None:
    def fails(exp: Experiment, nodes: Any, on_event: Any = None) -> None:
        raise TestbedError("node node-0: power on: podman start failed: no such container")

    ops.power_on = fails  # type: ignore[method-assign]
    answer = client(alpha, ops).post(
        "/v1/operations", json=operate("power_on", ["node-0"]), headers=auth(alpha)
    )
    assert answer.status_code == 502
    assert (answer.json()["node"], answer.json()["step"]) == ("node-0", "podman start")


def test_release_parks_and_only_parked_nodes_are_allocated_back_with_their_new_keys(
    alpha: Experiment, beta: Experiment, ops: FakeNodeOps
) -> None:
    c = client(alpha, ops)
    r = c.post("/v1/operations", json=operate("release", ["node-0"], "rel"), headers=auth(alpha))
    assert r.status_code == 200, r.json()
    assert ops.calls == [("release(park)", ["node-0"])]  # through the service, a release parks
    assert experiments.load("alpha").parked == ["node-0"]
    # refused, naming the node, before anything runs: a node it holds (409), one released by
    # its user (403), another experiment's (403), nobody's (404)
    user_released = experiments.load("alpha")
    ops.release(user_released, ["node-1"])  # as `ptc node release`: released, not parked
    ops.calls.clear()
    for nodes, status, named in [
        (["head"], 409, "head"),
        (["node-1"], 403, "node-1"),
        (["beta-node-0"], 403, "beta-node-0"),
        (["node-7"], 404, "node-7"),
    ]:
        r = c.post(
            "/v1/operations", json=operate("allocate", nodes, f"a-{named}"), headers=auth(alpha)
        )
        assert r.status_code == status, (nodes, r.json())
        assert r.json()["node"] == named
    assert ops.calls == []
    r = c.post(
        "/v1/operations", json=operate("allocate", ["ptc-alpha-node-0"], "a"), headers=auth(alpha)
    )
    assert r.status_code == 200, r.json()
    assert ops.calls == [("allocate", ["node-0"])]
    hosts = r.json()["hosts"]
    assert hosts == {"node-0": {"addresses": ["10.10.1.2"], "keys": ["ssh-ed25519 NEWnode-0"]}}
    assert experiments.load("alpha").parked == []
    # the same request again (a client whose answer was lost) replays, with the same keys
    again = c.post("/v1/operations", json=operate("allocate", ["node-0"], "a"), headers=auth(alpha))
    assert again.json()["replayed"] is True and again.json()["hosts"] == hosts
    assert ops.calls == [("allocate", ["node-0"])]


def test_an_allocate_stopped_after_its_work_is_finished_by_its_repeat_not_done_twice(
    alpha: Experiment, ops: FakeNodeOps
) -> None:
    """The service stopped after node-0 was allocated but before the journal said so: the
    repeat (same request id, a restarted service) finds node-0 held and answers with its keys,
    without allocating it a second time (which would be refused as held)."""
    c = client(alpha, ops)
    assert (
        c.post(
            "/v1/operations", json=operate("release", ["node-0"], "rel"), headers=auth(alpha)
        ).status_code
        == 200
    )
    settings = settings_for(alpha, ops)
    settings.journal.start("alloc", "allocate", ["node-0"])
    ops.allocate(experiments.load("alpha"), ["node-0"])  # the work the stop did not record
    ops.calls.clear()
    api = TestClient(create_app(settings_for(alpha, ops)))  # the restarted service
    answer = api.post(
        "/v1/operations", json=operate("allocate", ["node-0"], "alloc"), headers=auth(alpha)
    )
    assert answer.status_code == 200, answer.json()
    assert ops.calls == []
    assert answer.json()["hosts"]["node-0"]["keys"] == ["ssh-ed25519 NEWnode-0"]


def test_hosts_gives_each_node_s_pinned_keys_to_its_experiment_only(
    alpha: Experiment, ops: FakeNodeOps
) -> None:
    c = client(alpha, ops)
    assert c.get("/v1/hosts").status_code == 401
    c.post("/v1/operations", json=operate("release", ["node-0"], "rel"), headers=auth(alpha))
    c.post("/v1/operations", json=operate("allocate", ["node-0"], "al"), headers=auth(alpha))
    hosts = c.get("/v1/hosts", headers=auth(alpha)).json()["hosts"]
    assert hosts["node-0"] == {"addresses": ["10.10.1.2"], "keys": ["ssh-ed25519 NEWnode-0"]}
    assert set(hosts) == {"head", "node-0", "node-1"}


def test_metrics_count_operations_refusals_and_node_states_behind_the_credential(
    alpha: Experiment, ops: FakeNodeOps
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    api = client(alpha, ops)
    assert api.get("/metrics").status_code == 401
    wrong = api.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert wrong.status_code == 401 and "ptc_" not in wrong.text
    api.post("/v1/operations", json=operate("power_off", ["node-0"]), headers=auth(alpha))
    ops.fail = "node-1"
    api.post("/v1/operations", json=operate("power_on", ["node-1"], "r2"), headers=auth(alpha))
    # a replay is not a second operation
    api.post("/v1/operations", json=operate("power_on", ["node-1"], "r2"), headers=auth(alpha))
    api.post("/v1/operations", json=operate("power_on", ["node-9"], "r3"), headers=auth(alpha))
    got = api.get("/metrics", headers=auth(alpha))
    assert got.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(got.text)
        for s in family.samples
    }
    count = "ptc_control_operation_seconds_count"
    assert samples[(count, (("action", "power_off"), ("outcome", "ok")))] == 1
    assert samples[(count, (("action", "power_on"), ("outcome", "failed")))] == 1
    assert samples[("ptc_control_refusals_total", (("status", "404"),))] == 1
    assert samples[("ptc_control_refusals_total", (("status", "401"),))] == 2
    states = {
        labels[0][1]: v for (name, labels), v in samples.items() if name == "ptc_control_nodes"
    }
    assert states == {"running": 2, "exited": 1}, states  # the fake's states, as podman's
