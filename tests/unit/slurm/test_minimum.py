"""Slurm's partition's minimum (``elastic_min_nodes``): nodes the partition holds from the start
and never gives up. A reclamation takes other nodes, even when a minimum node is the cheapest,
and is refused (field ``count``) when it would need one; DeleteNodes of one is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_slurm import Job
from slurm_env import World

from elastic.errors import InputError
from elastic.manager.errors import Conflict
from elastic.manager.service import ServiceConfig, apply_config


def with_minimum(world: World, *nodes: str) -> None:
    world.manager.ensure_partition("slurm", minimum=list(nodes))


def test_the_minimum_joins_the_partition_at_once(world: World) -> None:
    with_minimum(world, "node-0")
    assert world.owners() == {"node-0": "slurm", "node-1": None, "node-2": None, "node-3": None}
    added = [e for e in world.manager.events() if e["kind"] == "nodes-added"][-1]["data"]
    assert added == {"partition": "slurm", "nodes": ["node-0"], "minimum": True}
    with_minimum(world, "node-0")  # the service starting again changes nothing
    assert len([e for e in world.manager.events() if e["kind"] == "nodes-added"]) == 1


def test_a_reclamation_takes_other_nodes_than_the_minimum(world: World) -> None:
    with_minimum(world, "node-0")
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-1", "node-2"])
    # LIFO: idle node-0 would be the cheapest; busy node-1 (younger job) next, then node-2
    world.slurm.jobs = [Job("1", ["node-1"], elapsed="1:00"), Job("2", ["node-2"], elapsed="9:00")]
    values = world.client.report_pv()
    assert values["node-0"] < values["node-1"] < values["node-2"]
    rec = world.manager.reclaim(world.admin, "slurm", 1, 30)
    assert rec.chosen == ["node-1"]
    # two more would need node-0: refused, naming the field and the minimum, nothing changes
    before = world.manager.read().model_dump()
    with pytest.raises(InputError, match=r"count.*minimum \(node-0\)"):
        world.manager.reclaim(world.admin, "slurm", 2, 30)
    assert world.manager.read().model_dump() == before


def test_the_minimum_is_not_given_back(world: World) -> None:
    with_minimum(world, "node-0")
    with pytest.raises(Conflict, match="minimum"):
        world.manager.delete_nodes(world.admin, "slurm", ["node-0"])
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-1"])
    # a stray SuspendProgram (an administrator's power down): the minimum stays, node-1 goes
    assert world.client.suspend("node-[0-1]") == ["node-1"]
    assert world.owners()["node-0"] == "slurm" and world.owners()["node-1"] is None


def test_the_reference_client_reclaims_around_the_minimum(world: World) -> None:
    with_minimum(world, "node-0", "node-1")
    world.manager.add_nodes(world.admin, "slurm", nodes=["node-2", "node-3"])
    world.client.report_pv()
    got = world.manager.add_nodes(world.admin, "ref", count=2, grace=30)
    rec = world.manager.reclamation(got.reclamations[0])
    assert got.waiting == 2 and sorted(rec.chosen) == ["node-2", "node-3"]
    with pytest.raises(Conflict, match="count"):
        world.manager.add_nodes(world.admin, "ref", count=1, grace=30)


def test_the_service_configuration_names_the_minimum(world: World, tmp_path: Path) -> None:
    conf = tmp_path / "manager.yml"
    conf.write_text(
        "listen: 127.0.0.1\npartitions:\n  - {name: slurm, minimum: [node-3]}\n  - {name: ref}\n"
    )
    apply_config(world.manager, ServiceConfig.load(conf))
    assert world.manager.read().partitions["slurm"].minimum == ["node-3"]
    assert world.owners()["node-3"] == "slurm"
    conf.write_text("listen: 127.0.0.1\npartitions:\n  - {name: slurm, minimum: node-3}\n")
    with pytest.raises(InputError, match="minimum"):
        apply_config(world.manager, ServiceConfig.load(conf))
    conf.write_text("listen: 127.0.0.1\npartitions:\n  - {name: slurm, minimum: [node-9]}\n")
    with pytest.raises(InputError, match="minimum"):
        apply_config(world.manager, ServiceConfig.load(conf))
