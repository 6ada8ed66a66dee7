"""build_inventory: groups, host vars, all.vars, ssh_config and group_vars from a manifest."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from testbed_support import RECORDINGS

from elastic import paths
from elastic.errors import InputError, PtcError
from elastic.testbed import rspec
from elastic.testbed.inventory import Reach, build_inventory
from elastic.testbed.topology import Login, Topology

RECORDED = RECORDINGS / "recorded_cloudlab_utah_manifest.xml"


def recorded() -> Topology:
    return rspec.parse_manifest(RECORDED.read_bytes())


def build(tmp_path: Path, t: Topology, testbed: str = "cloudlab") -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "inv"
    hosts = build_inventory(t, out, tmp_path / "key", testbed)
    return out, yaml.safe_load(hosts.read_text())


def members(inv: dict[str, Any], group: str) -> list[str]:
    return list(inv["all"]["children"][group]["hosts"])


def test_groups_from_recorded_manifest(tmp_path: Path) -> None:
    _, inv = build(tmp_path, recorded())
    for group in ("slurm_controller", "slurm_dbd", "nfs_server", "config_server"):
        assert members(inv, group) == ["head"]
    for group in ("slurm_compute", "nfs_client"):
        assert members(inv, group) == ["node-0", "node-1"]
    assert set(inv["all"]["children"]) == {
        "slurm_controller", "slurm_dbd", "nfs_server", "config_server", "slurm_compute",
        "nfs_client",
    }  # fmt: skip


def test_host_vars(tmp_path: Path) -> None:
    _, inv = build(tmp_path, recorded())
    hv = inv["all"]["hosts"]["node-1"]
    assert hv == {
        "ansible_host": "ms1039.utah.cloudlab.us",
        "ansible_port": 22,
        "ansible_user": "alice",
        "ansible_ssh_private_key_file": str((tmp_path / "key").resolve()),
        "ptc_lan_address": "10.10.1.3",
        "ptc_lan_addresses": {"lan": "10.10.1.3"},
    }


def test_all_vars(tmp_path: Path) -> None:
    out, inv = build(tmp_path, recorded())
    av = inv["all"]["vars"]
    assert av["ptc_testbed"] == "cloudlab"
    assert av["ptc_lan_subnet"] == "10.10.1.0/24"
    assert "StrictHostKeyChecking=no" in av["ansible_ssh_common_args"]
    assert f"UserKnownHostsFile={out.resolve() / 'known_hosts'}" in av["ansible_ssh_common_args"]


def test_groups_are_copied_from_the_manifest_not_guessed(tmp_path: Path) -> None:
    t = recorded()
    t.node("node-1").execute.clear()  # named like a compute node, but the manifest says nothing
    _, inv = build(tmp_path, t)
    assert members(inv, "slurm_compute") == ["node-0"]
    assert "node-1" in inv["all"]["hosts"]  # still a host, in no cluster group


def test_lan_reach_for_an_inventory_built_on_a_node(tmp_path: Path) -> None:
    out = tmp_path / "inv"
    build_inventory(recorded(), out, Path("/root/.ssh/id_ed25519"), "cloudlab", Reach.LAN)
    inv = yaml.safe_load((out / "hosts.yml").read_text())
    hv = inv["all"]["hosts"]["node-1"]
    assert (hv["ansible_host"], hv["ansible_port"], hv["ansible_user"]) == ("10.10.1.3", 22, "root")
    assert "HostName 10.10.1.3\n    Port 22\n    User root\n" in (out / "ssh_config").read_text()


def test_lan_reach_refuses_a_node_without_lan_address(tmp_path: Path) -> None:
    t = recorded()
    t.node("node-0").interfaces.clear()
    with pytest.raises(InputError, match="node-0"):
        build_inventory(t, tmp_path / "inv", tmp_path / "key", "cloudlab", Reach.LAN)


def test_groups_by_execute_service_and_multi_lan_addresses(tmp_path: Path) -> None:
    # two_lans-like: compute nodes not named node-N, head on two LANs, local logins.
    t = rspec.parse_request(
        b"""<rspec xmlns="http://www.geni.net/resources/rspec/3" type="request">
        <node client_id="head"><interface client_id="head:if1"><ip address="10.10.1.1"
          netmask="255.255.255.0"/></interface><interface client_id="head:if2"><ip
          address="10.10.2.1" netmask="255.255.255.0"/></interface></node>
        <node client_id="a-0"><interface client_id="a-0:if1"><ip address="10.10.1.2"
          netmask="255.255.255.0"/></interface><services><execute shell="bash"
          command="sudo bash /local/repository/profiles/startup.sh --groups slurm_compute"/></services></node>
        <node client_id="store"/>
        <link client_id="lan-a"><interface_ref client_id="head:if1"/>
          <interface_ref client_id="a-0:if1"/></link>
        <link client_id="lan-b"><interface_ref client_id="head:if2"/></link></rspec>"""
    )
    for i, name in enumerate(("head", "a-0")):
        t.node(name).login = Login("127.0.0.1", 40000 + i, "root")
    _, inv = build(tmp_path, t, "local")
    assert list(inv["all"]["hosts"]) == ["head", "a-0"]  # "store" has no login
    assert inv["all"]["hosts"]["head"]["ptc_lan_addresses"] == {
        "lan-a": "10.10.1.1",
        "lan-b": "10.10.2.1",
    }
    assert inv["all"]["hosts"]["head"]["ptc_lan_address"] == "10.10.1.1"
    assert members(inv, "slurm_compute") == ["a-0"]


def test_ssh_config_entries(tmp_path: Path) -> None:
    out, _ = build(tmp_path, recorded())
    text = (out / "ssh_config").read_text()
    assert (
        "Host node-0\n    HostName ms1012.utah.cloudlab.us\n    Port 22\n    User alice\n" in text
    )
    assert f"IdentityFile {(tmp_path / 'key').resolve()}" in text
    assert text.count("IdentitiesOnly yes") == 3


def test_ssh_config_is_understood_by_ssh(tmp_path: Path) -> None:
    out, _ = build(tmp_path, recorded())
    proc = subprocess.run(
        ["ssh", "-G", "-F", str(out / "ssh_config"), "node-1"],
        capture_output=True,
        text=True,
        check=True,
    )
    settings = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert settings["hostname"] == "ms1039.utah.cloudlab.us"
    assert settings["user"] == "alice"
    assert settings["port"] == "22"


def test_group_vars_copied_with_testbed_file(tmp_path: Path) -> None:
    out, _ = build(tmp_path, recorded(), "local")
    gv = out / "group_vars" / "all"
    repo = paths.REPO_ROOT / "inventories" / "group_vars"
    expected = {p.name for p in (repo / "all").glob("*.yml")} | {"testbed.yml"}
    assert {p.name for p in gv.iterdir()} == expected
    assert (gv / "testbed.yml").read_bytes() == (repo / "local.yml").read_bytes()


def test_stale_group_vars_are_removed(tmp_path: Path) -> None:
    out, _ = build(tmp_path, recorded())
    stale = out / "group_vars" / "all" / "stale.yml"
    stale.write_text("x: 1\n")
    build(tmp_path, recorded())
    assert not stale.exists()


def test_manifest_without_logins_is_an_error(tmp_path: Path) -> None:
    t = recorded()
    for node in t.nodes:
        node.login = None
    with pytest.raises(PtcError, match="no node with a <login>"):
        build(tmp_path, t)


def test_bad_testbed_name(tmp_path: Path) -> None:
    with pytest.raises(PtcError, match="testbed name"):
        build(tmp_path, recorded(), "../etc")


def test_ansible_reads_the_inventory(tmp_path: Path) -> None:
    out, _ = build(tmp_path, recorded())
    exe = Path(paths.REPO_ROOT / ".venv" / "bin" / "ansible-inventory")
    if not exe.exists():
        pytest.skip("ansible-inventory not installed in the venv")
    proc = subprocess.run(
        [str(exe), "-i", str(out / "hosts.yml"), "--host", "node-0"],
        capture_output=True,
        text=True,
        check=True,
    )
    host = yaml.safe_load(proc.stdout)
    assert host["ansible_host"] == "ms1012.utah.cloudlab.us"
    assert host["ptc_testbed"] == "cloudlab"
    assert host["ptc_cluster_name"] == "ptc"  # from group_vars/all/
