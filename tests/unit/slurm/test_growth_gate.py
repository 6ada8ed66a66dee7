"""Growth across sites: the gate holds back the free nodes of the sites a policy does not grow
onto, for what the waiting jobs ask."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from elastic.errors import InputError
from elastic.slurm import hostlist
from elastic.slurm.commands import Slurm
from elastic.slurm.growth_gate import GrowthGate, free
from elastic.slurm.sites import parse_sites

SITES = parse_sites(
    {
        "sites": [
            {"name": "here", "price": 2, "nodes": "node-[0-1]"},
            {"name": "cheap", "price": 1, "nodes": "node-[2-3]"},
            {"name": "far", "price": 3, "nodes": "node-[4-5]"},
        ]
    },
    hostlist.expand,
)
AT_REST = dict.fromkeys(hostlist.expand("node-[0-5]"), "idle~")


@pytest.mark.parametrize(
    ("state", "is_free"),
    [("idle~", True), ("reserved~", True), ("idle", True), ("reserved", True),
     ("drained~", False), ("idle#", False), ("idle%", False), ("down~", False),
     ("allocated", False), ("idle~*", False), ("mixed", False)],
)  # fmt: skip
def test_only_idle_nodes_are_free(state: str, is_free: bool) -> None:
    assert free(state) is is_free


def test_cheapest_holds_back_every_site_but_the_cheapest_with_room() -> None:
    gate = GrowthGate("cheapest")
    assert gate.held_back(SITES, AT_REST, 0) == {
        "ptc-gated-here": ["node-0", "node-1"],
        "ptc-gated-far": ["node-4", "node-5"],
    }
    # three nodes asked for: the cheap site's two, then one of the next cheapest's
    assert gate.held_back(SITES, AT_REST, 3) == {
        "ptc-gated-here": ["node-1"],
        "ptc-gated-far": ["node-4", "node-5"],
    }
    # four: the next cheapest opens whole
    assert gate.held_back(SITES, AT_REST, 4) == {"ptc-gated-far": ["node-4", "node-5"]}
    # the cheap site busy: the next cheapest is the first choice, and keeps all its room
    busy = AT_REST | {"node-2": "allocated", "node-3": "idle#"}
    assert gate.held_back(SITES, busy, 1) == {"ptc-gated-far": ["node-4", "node-5"]}
    # a node still up is free, and the last a later choice holds back
    up = AT_REST | {"node-2": "allocated", "node-3": "allocated", "node-1": "idle"}
    assert gate.held_back(SITES, up | {"node-4": "idle"}, 3) == {"ptc-gated-far": ["node-5"]}
    # a paused site is no candidate, and its nodes are the pause's to hold
    assert gate.held_back(SITES, AT_REST, 1, closed=frozenset({"cheap"})) == {
        "ptc-gated-far": ["node-4", "node-5"]
    }
    # no free node anywhere: nothing to steer
    assert gate.held_back(SITES, dict.fromkeys(AT_REST, "allocated"), 4) == {}


def test_mycluster_grows_away_from_a_site_whose_nodes_do_not_come_up() -> None:
    """The cheap site's nodes stay powering up round after round while the dear one's run:
    MyCluster's liability-adjusted throughput moves growth off the cheap site."""
    gate = GrowthGate("mycluster")
    stuck = AT_REST | {"node-2": "idle#", "node-0": "allocated", "node-4": "allocated"}
    for _ in range(4):
        held = gate.held_back(SITES, stuck, 1)
    assert "ptc-gated-cheap" in held and "ptc-gated-here" not in held, held


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(InputError, match="growth policy: 'random' is not one of cheapest"):
        GrowthGate("random")


def test_a_site_a_waiting_job_asks_for_by_name_is_never_held_back() -> None:
    gate = GrowthGate("cheapest")
    # one job asks for the dearest site: it is let go, the policy's choice stays open
    assert gate.held_back(SITES, AT_REST, 1, asked=frozenset({"far"})) == {
        "ptc-gated-here": ["node-0", "node-1"]
    }
    # a feature that names no site changes nothing
    assert gate.held_back(SITES, AT_REST, 1, asked=frozenset({"bigmem"})) == {
        "ptc-gated-here": ["node-0", "node-1"],
        "ptc-gated-far": ["node-4", "node-5"],
    }


def test_the_features_waiting_jobs_ask_for_are_read_from_their_constraints() -> None:
    asked: list[list[str]] = []

    def squeue(argv: Sequence[str]) -> str:
        asked.append(list(argv))
        return "(null)\ncloud\nhere|cloud\n[far*2&bigmem]\n(gpu|ib),ssd:2\n"

    names = Slurm(squeue).pending_features("elastic")
    assert names == {"cloud", "here", "far", "bigmem", "gpu", "ib", "ssd"}
    assert asked == [
        ["squeue", "--noheader", "--states=PENDING", "--format=%f", "--partition", "elastic"]
    ]
