"""Protected mode on the Slurm side: failed resumes in a row (through the real manager) put the
partition in it; the client then puts the pool's Slurm partitions DOWN (jobs wait), refuses
resumes without counting them, and once the admin ends it puts UP again only the partitions it
put DOWN."""

from __future__ import annotations

import json
from pathlib import Path

from slurm_env import World

from elastic.manager import ManagerConfig
from elastic.slurm.client import SlurmElasticClient


def protect(world: World, after: int = 2) -> None:
    world.manager.config = ManagerConfig(protect_after=after)
    world.prov.fail = "configure"
    for node in ("node-2", "node-3")[:after]:
        world.client.resume(node)
    world.prov.fail = ""


def test_failed_resumes_protect_and_the_pool_s_partitions_go_down(world: World) -> None:
    protect(world)
    assert world.client.manager.protection("slurm")["protected"]
    assert world.client.sync_protection() == {"down": ["main"], "up": []}
    # only the partitions with pool nodes: the head's own is left running
    assert world.slurm.partitions == {"main": ["DOWN", "node-[0-3]"], "debug": ["UP", "head"]}
    assert world.client.sync_protection() == {"down": [], "up": []}  # once


def test_a_resume_while_protected_is_refused_and_not_counted(world: World) -> None:
    protect(world)
    before = world.client.manager.protection("slurm")["failures"]
    world.prov.calls.clear()
    result = world.client.resume("node-0")
    assert result.ready == [] and result.failed["node-0"].startswith("partition protected: since")
    assert world.prov.calls == []  # no machine was started
    assert world.slurm.reasons["node-0"].startswith("ptc resume: partition protected")
    assert world.client.manager.protection("slurm")["failures"] == before
    assert world.owners()["node-0"] is None


def test_unprotect_puts_up_only_what_the_client_put_down(world: World, tmp_path: Path) -> None:
    marks = tmp_path / "protected.json"
    world.client.config = type(world.client.config)(
        partition="slurm", register_timeout=10, register_poll=2, protected_file=marks
    )
    world.slurm.partitions["other"] = ["DOWN", "node-[2-3]"]  # someone else's DOWN
    protect(world)
    world.client.sync_protection()
    assert json.loads(marks.read_text()) == ["main"]
    assert marks.stat().st_mode & 0o777 == 0o600  # root's: the client runs as root
    # a new client (a restart) reads what its predecessor put DOWN
    old = world.client
    world.client = SlurmElasticClient(
        old.slurm, old.manager, old.policy, provisioner=world.prov, config=old.config,
        clock=world.clock, sleep=world.clock.sleep,
    )  # fmt: skip
    world.manager.unprotect(world.admin, "slurm")
    assert world.client.sync_protection() == {"down": [], "up": ["main"]}
    assert world.slurm.partitions["main"][0] == "UP"
    assert world.slurm.partitions["other"][0] == "DOWN"
    assert json.loads(marks.read_text()) == []
    # resumes go ahead again
    assert world.client.resume("node-0").ready == ["node-0"]


def test_a_set_slurm_partition_is_the_only_one_touched(world: World) -> None:
    world.client.config = type(world.client.config)(
        partition="slurm", slurm_partition="debug", register_timeout=10, register_poll=2
    )
    protect(world)
    assert world.client.sync_protection() == {"down": ["debug"], "up": []}
    assert world.slurm.partitions["main"][0] == "UP"
