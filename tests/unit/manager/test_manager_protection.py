"""Protected mode: failed resumes in a row put a partition in it, a node that came up starts the
count again, resumes a power down called off count for nothing; the admin (or the cool-down)
ends it, and the event log says each step."""

from __future__ import annotations

from typing import Any

import pytest
from manager_env import Env

from elastic.cli.elastic import _describe as describe
from elastic.manager import ManagerConfig
from elastic.manager.client import ManagerClient


def report(env: Env, ready: list[str], failed: dict[str, str], **extra: Any) -> None:
    nodes = sorted({*ready, *failed})
    body = {"nodes": nodes, "ready": ready, "failed": failed, **extra}
    r = env.http.post("/v1/partitions/slurm/resumes", json=body, headers=env.auth(env.slurm))
    assert r.status_code == 200, r.text


def guard(env: Env, partition: str = "slurm") -> dict[str, Any]:
    parts = env.http.get("/v1/partitions", headers=env.auth(env.slurm)).json()
    (found,) = [p["protection"] for p in parts if p["name"] == partition]
    return dict(found)


def kinds(env: Env) -> list[str]:
    log = env.http.get("/v1/events", headers=env.auth(env.admin)).json()
    return [e["kind"] for e in log if e["kind"].startswith(("partition-protected", "partition-un"))]


@pytest.fixture
def protecting(env: Env) -> Env:
    env.manager.config = ManagerConfig(protect_after=3, protect_cooldown=0.0)
    return env


def test_failures_in_a_row_protect_the_partition_and_a_node_that_came_up_resets(
    protecting: Env,
) -> None:
    env = protecting
    report(env, [], {"node-0": "power on failed: no init", "node-1": "power on failed: no init"})
    assert guard(env)["failures"] == 2 and not guard(env)["protected"]
    report(env, ["node-2"], {"node-3": "configure failed: task 'x' failed"})
    # node-2 came up: the count starts again, node-3's failure is the first of a new run
    assert guard(env)["failures"] == 1 and not guard(env)["protected"]
    report(env, [], {"node-0": "power on failed: no init"})
    report(env, [], {"node-1": "slurmd did not register within 90 s"})
    now = guard(env)
    assert now["protected"] and now["since"] == env.clock()
    assert now["reason"] == (
        "3 node resume(s) failed in a row; the last, node-1: slurmd did not register within 90 s"
    )
    assert kinds(env) == ["partition-protected"]
    log = env.http.get("/v1/events", headers=env.auth(env.admin)).json()
    assert describe(log[-1]) == f"slurm: protected mode: {now['reason']}"
    # another partition is not protected by this one's failures
    assert not guard(env, "ref")["protected"]


def test_resumes_called_off_by_a_power_down_count_for_nothing(protecting: Env) -> None:
    env = protecting
    off = {n: "called off: powered down (idle~)" for n in ("node-0", "node-1", "node-2")}
    report(env, [], off, called_off=sorted(off))
    report(env, [], off, called_off=sorted(off))
    assert guard(env)["failures"] == 0 and not guard(env)["protected"]


def test_only_the_admin_ends_it_and_the_count_starts_again(protecting: Env) -> None:
    env = protecting
    report(env, [], {n: "power on failed" for n in ("node-0", "node-1", "node-2")})
    assert guard(env)["protected"]
    r = env.http.post("/v1/partitions/slurm/unprotect", headers=env.auth(env.slurm))
    assert r.status_code == 403 and "admin" in r.text, r.text
    assert guard(env)["protected"]
    admin = ManagerClient("http://testserver", env.admin, client=env.http)
    assert admin.unprotect("slurm") is True
    after = guard(env)
    assert not after["protected"] and after["failures"] == 0 and after["ended"] == env.clock()
    assert admin.unprotect("slurm") is False  # not protected: nothing changes
    assert kinds(env) == ["partition-protected", "partition-unprotected"]
    r = env.http.post("/v1/partitions/nope/unprotect", headers=env.auth(env.admin))
    assert r.status_code == 404 and "nope" in r.text, r.text


def test_a_cool_down_ends_it_on_the_manager_s_tick(protecting: Env) -> None:
    env = protecting
    env.manager.config = ManagerConfig(protect_after=1, protect_cooldown=600.0)
    report(env, [], {"node-0": "power on failed"})
    assert guard(env)["protected"]
    env.clock.advance(599)
    env.manager.tick()
    assert guard(env)["protected"]
    env.clock.advance(1)
    env.manager.tick()
    assert not guard(env)["protected"]
    log = env.http.get("/v1/events", headers=env.auth(env.admin)).json()
    assert log[-1]["kind"] == "partition-unprotected" and log[-1]["data"]["by"] == "cool-down"


def test_zero_never_protects(env: Env) -> None:
    env.manager.config = ManagerConfig(protect_after=0)
    for _ in range(3):
        report(env, [], {n: "power on failed" for n in ("node-0", "node-1", "node-2", "node-3")})
    assert guard(env)["failures"] == 12 and not guard(env)["protected"]
