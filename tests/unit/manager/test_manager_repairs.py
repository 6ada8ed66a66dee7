"""Node repairs in the manager, over its HTTP API: a claim is a lease in one loop's name, a failed
repair backs the node off (doubling, capped) and counts towards protected mode, a repaired node
starts the count again, and the status and event log say each step."""

from __future__ import annotations

from typing import Any

import pytest
from manager_env import Env

from elastic.cli.elastic import _describe as describe
from elastic.cli.elastic import _repairs
from elastic.manager import ManagerConfig
from elastic.manager.repairs import backoff


def claim(env: Env, node: str, holder: str, token: str | None = None) -> Any:
    body = {"holder": holder, "cause": "not responding", "lease": 600}
    return env.http.post(
        f"/v1/partitions/slurm/repairs/{node}", json=body, headers=env.auth(token or env.slurm)
    )


def end(env: Env, node: str, holder: str, error: str = "") -> Any:
    body = {"holder": holder, "error": error, "timings": {"reload": 3.0, "configure": 30.0}}
    return env.http.post(
        f"/v1/partitions/slurm/repairs/{node}/end", json=body, headers=env.auth(env.slurm)
    )


def record(env: Env, node: str) -> dict[str, Any]:
    parts = env.http.get("/v1/status", headers=env.auth(env.admin)).json()["partitions"]
    (slurm,) = [p for p in parts if p["name"] == "slurm"]
    return dict(slurm["repairs"][node])


def log(env: Env) -> list[dict[str, Any]]:
    return list(env.http.get("/v1/events", headers=env.auth(env.admin)).json())


@pytest.fixture
def repairing(env: Env) -> Env:
    env.manager.config = ManagerConfig(protect_after=3, repair_backoff=300, repair_backoff_max=900)
    return env


def test_one_loop_holds_a_node_until_it_ends_or_its_lease_lapses(repairing: Env) -> None:
    env = repairing
    assert claim(env, "node-1", "head:1").json() == {"claimed": True, "reason": ""}
    assert record(env, "node-1")["active"] and record(env, "node-1")["holder"] == "head:1"
    other = claim(env, "node-1", "backup:7").json()
    assert not other["claimed"] and other["reason"].startswith("head:1 is repairing it until")
    assert claim(env, "node-1", "head:1").json()["claimed"]  # its own claim again: renewed
    r = end(env, "node-1", "backup:7")
    assert r.status_code == 409 and "holds no repair" in r.text
    assert end(env, "node-1", "head:1").json()["repaired"] == 1
    assert not record(env, "node-1")["active"]
    started, done = [e for e in log(env) if "repair" in e["kind"]][-2:]
    assert describe(started) == "slurm: node-1: not responding (by head:1)"
    assert describe(done) == (
        "slurm: node-1 back in 0 s (reload 3.0 s, configure 30.0 s)"
    )  # fmt: skip
    env.clock.advance(601)
    assert claim(env, "node-2", "head:1").json()["claimed"]
    env.clock.advance(601)  # head:1 died mid-repair: its claim lapses
    assert claim(env, "node-2", "backup:7").json()["claimed"]


def test_failures_back_off_doubling_to_the_cap_and_count_towards_protection(
    repairing: Env,
) -> None:
    env = repairing
    for n, wait in enumerate((300, 600, 900), start=1):
        assert claim(env, "node-1", "head:1").json()["claimed"], n
        out = end(env, "node-1", "head:1", error="configure: task 'x' failed").json()
        assert out["failures"] == n and out["not_before"] == env.clock() + wait
        refused = claim(env, "node-1", "head:1").json()["reason"]
        if n < 3:
            assert refused.startswith(f"its last {n} repair(s) failed; the next may start")
        else:  # the third in a row put the partition in protected mode
            assert refused == "partition slurm is in protected mode"
        env.clock.advance(wait)
    failed = [e for e in log(env) if e["kind"] == "repair-failed"]
    assert [e["data"]["failures"] for e in failed] == [1, 2, 3]
    assert describe(failed[0]).startswith(
        "slurm: node-1: configure: task 'x' failed; failure 1 in a row, the next repair at "
    )
    # three failed repairs in a row: protected, and no repair starts while it lasts
    kinds = [e["kind"] for e in log(env)]
    assert kinds[-1] == "partition-protected"
    assert "repair: configure: task 'x' failed" in log(env)[-1]["data"]["reason"]
    assert claim(env, "node-2", "head:1").json()["reason"] == (
        "partition slurm is in protected mode"
    )  # fmt: skip
    assert _repairs({"node-1": record(env, "node-1")}).startswith("node-1 failed 3x, next ")


def test_a_repaired_node_starts_the_count_again(repairing: Env) -> None:
    env = repairing
    for node in ("node-1", "node-2"):
        claim(env, node, "head:1")
        end(env, node, "head:1", error="reload: podman start failed")
    claim(env, "node-3", "head:1")
    end(env, "node-3", "head:1")
    guard = env.http.get("/v1/partitions", headers=env.auth(env.slurm)).json()[0]["protection"]
    assert guard["failures"] == 0 and guard["since"] is None


def test_only_the_partition_repairs_its_nodes_and_never_a_node_held_elsewhere(
    repairing: Env,
) -> None:
    env = repairing
    assert claim(env, "node-1", "ref:1", token=env.ref).status_code == 403
    r = env.http.post(
        "/v1/partitions/ref/nodes", json={"nodes": ["node-2"]}, headers=env.auth(env.ref)
    )
    assert r.status_code == 200, r.text
    r = claim(env, "node-2", "head:1")
    assert r.status_code == 409 and "held by 'ref'" in r.text
    assert claim(env, "node-9", "head:1").status_code == 404


def test_backoff_doubles_from_the_base_and_never_passes_the_cap() -> None:
    assert [backoff(n, 60, 600) for n in range(6)] == [0, 60, 120, 240, 480, 600]
    assert backoff(10_000, 60, 600) == 600  # no overflow for a node failing for ever


def test_a_node_handed_to_the_lender_is_not_said_to_be_back() -> None:
    event = {
        "kind": "node-repaired",
        "data": {
            "partition": "slurm",
            "node": "node-3",
            "cause": "its machine is lent to another experiment",
            "seconds": 0.2,
            "timings": {"hand over": 0.2},
        },
    }
    assert describe(event) == (
        "slurm: node-3 handed over (its machine is lent to another experiment; hand over 0.2 s)"
    )
