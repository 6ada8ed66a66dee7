"""One list of groups: the profile, elastic.testbed.groups and site.yml must agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from elastic import paths
from elastic.errors import InputError
from elastic.profile.render import render_request
from elastic.profile.topology import ExecuteService, Node
from elastic.testbed.groups import KNOWN_GROUPS, node_groups

SITE = paths.REPO_ROOT / "site.yml"
PROFILE = paths.REPO_ROOT / "profiles" / "slurm_cluster.py"


def site_groups() -> set[str]:
    """Every group a play of site.yml targets (host patterns split on : & !)."""
    plays = yaml.safe_load(SITE.read_text())
    found: set[str] = set()
    for play in plays:
        for part in re.split(r"[:,&!]+", str(play["hosts"])):
            if part and part != "all":
                found.add(part)
    return found


def profile_groups(**params: str) -> dict[str, tuple[str, ...]]:
    rendered = render_request(PROFILE, params)
    return {n.client_id: node_groups(n) for n in rendered.topology.nodes}


def test_site_yml_targets_only_known_groups() -> None:
    unknown = site_groups() - set(KNOWN_GROUPS)
    assert not unknown, f"site.yml targets groups missing from KNOWN_GROUPS: {sorted(unknown)}"


def test_profile_gives_only_known_groups_and_every_known_group_is_used() -> None:
    given = profile_groups(configServerCount="3", computeNodeCount="2")
    used = {g for groups in given.values() for g in groups}
    assert used <= set(KNOWN_GROUPS)
    # A known group neither the profile nor site.yml uses is a stale entry.
    assert set(KNOWN_GROUPS) <= used | site_groups()


def test_profile_shape() -> None:
    given = profile_groups(configServerCount="3", computeNodeCount="2")
    assert given["head"] == ("slurm_controller", "slurm_dbd", "nfs_server", "config_server")
    assert given["node-0"] == given["node-1"] == ("slurm_compute", "nfs_client")
    assert given["cfg-1"] == given["cfg-2"] == ("config_server",)
    assert sorted(n for n, g in given.items() if "config_server" in g) == ["cfg-1", "cfg-2", "head"]


def test_one_config_server_member_is_the_head() -> None:
    given = profile_groups()
    assert [n for n, g in given.items() if "config_server" in g] == ["head"]


def test_even_config_server_count_is_refused() -> None:
    with pytest.raises(InputError, match="configServerCount"):
        profile_groups(configServerCount="2")


def test_groups_come_only_from_the_boot_command() -> None:
    named_like_compute = Node("node-0", execute=[ExecuteService("bash", "apt-get update")])
    assert node_groups(named_like_compute) == ()
    carried = Node(
        "x", execute=[ExecuteService("bash", "sudo bash /r/startup.sh --groups nfs_client")]
    )
    assert node_groups(carried) == ("nfs_client",)


def test_unknown_group_in_a_manifest_names_node_and_group() -> None:
    node = Node("n1", execute=[ExecuteService("bash", "startup.sh --groups slurm_compute,gpu")])
    with pytest.raises(InputError, match=r"'n1'.*'gpu'"):
        node_groups(node)


@pytest.mark.parametrize("path", sorted(Path(paths.REPO_ROOT / "roles").glob("*")))
def test_no_role_is_unreachable_from_site_yml(path: Path) -> None:
    text = SITE.read_text()
    assert f"role: {path.name}" in text or f"name: {path.name}" in text, path.name
