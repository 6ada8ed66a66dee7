"""Selectors of `ptc run`: groups, names and globs, in inventory order, and clear errors."""

from __future__ import annotations

import pytest

from elastic.errors import InputError, NotFoundError
from elastic.remote.select import Hosts, select

INVENTORY = {
    "all": {
        "hosts": {"head": {}, "node-0": {}, "node-1": {}, "node-2": {}, "cfg-1": {}},
        "children": {
            "slurm_controller": {"hosts": {"head": None}},
            "slurm_compute": {"hosts": {"node-0": None, "node-1": None, "node-2": None}},
            "config_server": {"hosts": {"head": None, "cfg-1": None}},
        },
    }
}
HOSTS = Hosts.from_inventory(INVENTORY)


def test_a_group_a_name_and_all() -> None:
    assert select("slurm_compute", HOSTS) == ["node-0", "node-1", "node-2"]
    assert select("cfg-1", HOSTS) == ["cfg-1"]
    assert select("all", HOSTS) == ["head", "node-0", "node-1", "node-2", "cfg-1"]


def test_globs_match_host_names() -> None:
    assert select("node-*", HOSTS) == ["node-0", "node-1", "node-2"]
    assert select("node-[02]", HOSTS) == ["node-0", "node-2"]
    assert select("*-1", HOSTS) == ["node-1", "cfg-1"]


def test_terms_combine_once_each_in_inventory_order() -> None:
    assert select("cfg-1, node-1,slurm_controller,config_server", HOSTS) == [
        "head",
        "node-1",
        "cfg-1",
    ]


def test_a_term_that_matches_nothing_is_named_with_what_exists() -> None:
    with pytest.raises(NotFoundError, match=r"'node-9'.*groups: all, config_server.*hosts: head"):
        select("node-0,node-9", HOSTS)
    with pytest.raises(NotFoundError, match="'gpu-\\*'"):
        select("gpu-*", HOSTS)


@pytest.mark.parametrize("selector", ["", " ", "node-0,", ",,"])
def test_empty_terms_are_refused(selector: str) -> None:
    with pytest.raises(InputError, match="empty term"):
        select(selector, HOSTS)


def test_hosts_only_in_a_group_still_count() -> None:
    hosts = Hosts.from_inventory({"all": {"children": {"g": {"hosts": {"a": None, "b": None}}}}})
    assert select("all", hosts) == ["a", "b"]
    assert select("g", hosts) == ["a", "b"]
