"""build_inventory: groups, host vars, all.vars, ssh_config and group_vars from a manifest."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from testbed_support import RECORDINGS

from elastic import node_paths, paths
from elastic.errors import InputError, PtcError
from elastic.profile import rspec
from elastic.profile.topology import Login, Topology
from elastic.testbed.inventory import Reach, build_inventory, load_groups_file

RECONSTRUCTED = RECORDINGS / "reconstructed_cloudlab_utah_manifest.xml"


def reconstructed() -> Topology:
    return rspec.parse_manifest(RECONSTRUCTED.read_bytes())


def build(
    tmp_path: Path, t: Topology, testbed: str = "cloudlab", **choices: Any
) -> tuple[Path, dict[str, Any]]:
    """The inventory of ``t``; the reconstructed manifest lists alice's and bob's logins: alice."""
    out = tmp_path / "inv"
    if any(len(n.logins) > 1 for n in t.nodes) and "user" not in choices:
        choices["user"] = "alice"
    hosts = build_inventory(t, out, tmp_path / "key", testbed, **choices)
    return out, yaml.safe_load(hosts.read_text())


def members(inv: dict[str, Any], group: str) -> list[str]:
    return list(inv["all"]["children"][group]["hosts"])


def test_groups_from_reconstructed_manifest(tmp_path: Path) -> None:
    _, inv = build(tmp_path, reconstructed())
    for group in ("slurm_controller", "slurm_dbd", "nfs_server", "config_server"):
        assert members(inv, group) == ["head"]
    for group in ("slurm_compute", "nfs_client"):
        assert members(inv, group) == ["node-0", "node-1"]
    assert set(inv["all"]["children"]) == {
        "slurm_controller", "slurm_dbd", "nfs_server", "config_server", "slurm_compute",
        "nfs_client",
    }  # fmt: skip


def test_host_vars(tmp_path: Path) -> None:
    _, inv = build(tmp_path, reconstructed())
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
    out, inv = build(tmp_path, reconstructed())
    av = inv["all"]["vars"]
    assert av["ptc_testbed"] == "cloudlab"
    assert av["ptc_lan_subnet"] == "10.10.1.0/24"
    assert "StrictHostKeyChecking=accept-new" in av["ansible_ssh_common_args"]
    assert f"UserKnownHostsFile={out.resolve() / 'known_hosts'}" in av["ansible_ssh_common_args"]


def test_groups_are_copied_from_the_manifest_not_guessed(tmp_path: Path) -> None:
    t = reconstructed()
    t.node("node-1").execute.clear()  # named like a compute node, but the manifest says nothing
    _, inv = build(tmp_path, t)
    assert members(inv, "slurm_compute") == ["node-0"]
    assert "node-1" in inv["all"]["hosts"]  # still a host, in no cluster group


def test_lan_reach_for_an_inventory_built_on_a_node(tmp_path: Path) -> None:
    out = tmp_path / "inv"
    build_inventory(reconstructed(), out, Path(node_paths.MESH_KEY), "cloudlab", Reach.LAN)
    inv = yaml.safe_load((out / "hosts.yml").read_text())
    hv = inv["all"]["hosts"]["node-1"]
    assert (hv["ansible_host"], hv["ansible_port"], hv["ansible_user"]) == ("10.10.1.3", 22, "root")
    assert "HostName 10.10.1.3\n    Port 22\n    User root\n" in (out / "ssh_config").read_text()


def test_lan_reach_refuses_a_node_without_lan_address(tmp_path: Path) -> None:
    t = reconstructed()
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
    out, _ = build(tmp_path, reconstructed())
    text = (out / "ssh_config").read_text()
    assert (
        "Host node-0\n    HostName ms1012.utah.cloudlab.us\n    Port 22\n    User alice\n" in text
    )
    assert f"IdentityFile {(tmp_path / 'key').resolve()}" in text
    assert text.count("IdentitiesOnly yes") == 3


def test_ssh_config_is_understood_by_ssh(tmp_path: Path) -> None:
    out, _ = build(tmp_path, reconstructed())
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
    out, _ = build(tmp_path, reconstructed(), "local")
    gv = out / "group_vars" / "all"
    repo = paths.REPO_ROOT / "inventories" / "group_vars"
    expected = {p.name for p in (repo / "all").glob("*.yml")} | {"testbed.yml"}
    assert {p.name for p in gv.iterdir()} == expected
    assert (gv / "testbed.yml").read_bytes() == (repo / "local.yml").read_bytes()


def test_stale_group_vars_are_removed(tmp_path: Path) -> None:
    out, _ = build(tmp_path, reconstructed())
    stale = out / "group_vars" / "all" / "stale.yml"
    stale.write_text("x: 1\n")
    build(tmp_path, reconstructed())
    assert not stale.exists()


def test_manifest_without_logins_is_an_error(tmp_path: Path) -> None:
    t = reconstructed()
    for node in t.nodes:
        node.login = None
        node.other_logins.clear()
    with pytest.raises(PtcError, match="no node with a <login>"):
        build(tmp_path, t)


def test_bad_testbed_name(tmp_path: Path) -> None:
    with pytest.raises(PtcError, match="testbed name"):
        build(tmp_path, reconstructed(), "../etc")


def test_ansible_reads_the_inventory(tmp_path: Path) -> None:
    out, _ = build(tmp_path, reconstructed())
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


# --- whose login: a portal manifest lists every project member's ---------------------------

PORTAL_8X25 = RECORDINGS / "reconstructed_cloudlab_portal_manifest_8x25.xml"


def portal() -> Topology:
    return rspec.parse_manifest(PORTAL_8X25.read_bytes())


def users_of(inv: dict[str, Any]) -> set[str]:
    return {hv["ansible_user"] for hv in inv["all"]["hosts"].values()}


def context_file(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = Path.home() / ".bssw" / "geni" / "context.json"  # geni-lib's default (HOME is tmp)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_reconstructed_portal_manifest_has_many_logins_and_no_ptc_groups() -> None:
    t = portal()
    assert len(t.nodes) == 8
    assert all(len(n.logins) == 25 for n in t.nodes)
    assert t.node("node-0").login is not None
    assert t.node("node-0").login.username == "aaronk"  # the first is someone else's
    # round trip keeps every login, in order
    assert rspec.parse_manifest(rspec.write_manifest(t)) == t


def test_many_logins_and_no_hint_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        build_inventory(portal(), tmp_path / "inv", tmp_path / "key", "cloudlab")
    msg = str(info.value)
    assert "25 users" in msg and "node-0" in msg and "aaronk" in msg
    assert "--user" in msg and "geni-lib context" in msg
    assert not (tmp_path / "inv" / "hosts.yml").exists()


def test_the_two_user_recording_is_ambiguous_too(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"2 users .*alice, bob"):
        build_inventory(reconstructed(), tmp_path / "inv", tmp_path / "key", "cloudlab")


def test_explicit_user_is_used_on_every_host(tmp_path: Path) -> None:
    out, inv = build(tmp_path, portal(), user="mchen")
    assert users_of(inv) == {"mchen"}
    assert inv["all"]["hosts"]["node-3"]["ansible_host"] == "c220g5-110413.wisc.cloudlab.us"
    assert (out / "ssh_config").read_text().count("User mchen") == 8


def test_the_geni_lib_context_user_is_used(tmp_path: Path) -> None:
    context_file(tmp_path, {"framework": "emulab-ch2", "user-name": "mchen", "project": "p"})
    _, inv = build(tmp_path, portal(), user=None)
    assert users_of(inv) == {"mchen"}


def test_a_version_2_context_is_read(tmp_path: Path) -> None:
    path = tmp_path / "ctx.json"
    path.write_text(json.dumps({"version": 2, "users": [{"username": "qzhang", "keys": []}]}))
    hosts = build_inventory(portal(), tmp_path / "inv", tmp_path / "key", "cloudlab", context=path)
    assert users_of(yaml.safe_load(hosts.read_text())) == {"qzhang"}


def test_a_user_without_logins_is_refused_naming_the_nodes(tmp_path: Path) -> None:
    t = portal()
    t.node("node-5").other_logins = [lg for lg in t.node("node-5").other_logins
                                     if lg.username != "mchen"]  # fmt: skip
    with pytest.raises(InputError, match=r"'mchen' has no <login> on node\(s\) node-5"):
        build(tmp_path, t, user="mchen")
    with pytest.raises(InputError, match="'nobody' has no <login> on node"):
        build(tmp_path, portal(), user="nobody")
    context_file(tmp_path, {"user-name": "nobody"})
    with pytest.raises(InputError, match=r"none for 'nobody', the user of the geni-lib context"):
        build(tmp_path, portal(), user=None)


def test_the_chosen_user_is_kept_for_rebuilds(tmp_path: Path) -> None:
    build(tmp_path, portal(), user="mchen")
    _, inv = build(tmp_path, portal(), user=None)  # as `ptc modify` rebuilds it
    assert users_of(inv) == {"mchen"}
    _, inv = build(tmp_path, portal(), user="jsmith")
    assert users_of(inv) == {"jsmith"}


def test_a_single_user_manifest_needs_no_choice(tmp_path: Path) -> None:
    t = portal()
    for node in t.nodes:
        node.other_logins.clear()
    _, inv = build(tmp_path, t, user=None)
    assert users_of(inv) == {"aaronk"}


# --- groups for a manifest that carries none ---------------------------------------------


def test_a_foreign_manifest_gives_no_cluster_groups(tmp_path: Path) -> None:
    _, inv = build(tmp_path, portal(), user="mchen")
    assert inv["all"]["children"] == {}
    assert len(inv["all"]["hosts"]) == 8


def test_nodes_are_mapped_to_groups_explicitly(tmp_path: Path) -> None:
    head = ["slurm_controller", "slurm_dbd", "nfs_server"]
    mapping = {"node-0": head, **{f"node-{i}": ["slurm_compute", "nfs_client"] for i in (1, 2)}}
    _, inv = build(tmp_path, portal(), user="mchen", groups=mapping)
    assert members(inv, "slurm_controller") == ["node-0"]
    assert members(inv, "slurm_compute") == ["node-1", "node-2"]
    assert "node-7" in inv["all"]["hosts"] and all(
        "node-7" not in members(inv, g) for g in inv["all"]["children"]
    )
    # kept for rebuilds; an empty list clears one node's mapping
    _, inv = build(tmp_path, portal(), user=None, groups={"node-2": []})
    assert members(inv, "slurm_compute") == ["node-1"]
    assert members(inv, "slurm_controller") == ["node-0"]


def test_a_mapping_replaces_the_manifest_groups_of_that_node(tmp_path: Path) -> None:
    _, inv = build(tmp_path, reconstructed(), groups={"node-1": ["slurm_compute"]})
    assert members(inv, "slurm_compute") == ["node-0", "node-1"]
    assert members(inv, "nfs_client") == ["node-0"]


@pytest.mark.parametrize(
    ("groups", "fragments"),
    [
        ({"node-3": ["slurm_compute", "gpu"]}, ["node 'node-3'", "'gpu'", "known groups"]),
        ({"node-9": ["slurm_compute"]}, ["no node 'node-9'", "node-0, node-1"]),
    ],
)
def test_unknown_groups_and_nodes_are_refused_by_name(
    tmp_path: Path, groups: dict[str, list[str]], fragments: list[str]
) -> None:
    with pytest.raises(InputError) as info:
        build(tmp_path, portal(), user="mchen", groups=groups)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_groups_file(tmp_path: Path) -> None:
    path = tmp_path / "groups.yml"
    path.write_text("node-0: [slurm_controller, slurm_dbd]\nnode-1: slurm_compute,nfs_client\n")
    assert load_groups_file(path) == {
        "node-0": ["slurm_controller", "slurm_dbd"],
        "node-1": ["slurm_compute", "nfs_client"],
    }
    path.write_text("- node-0\n")
    with pytest.raises(InputError, match="must map node names"):
        load_groups_file(path)
    path.write_text("node-0: {a: 1}\n")
    with pytest.raises(InputError, match="node 'node-0' must map to a list"):
        load_groups_file(path)


def test_cli_inventory_user_group_and_groups_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from elastic.cli import experiment as experiment_cli
    from elastic.testbed.experiment import Experiment, State

    exp = Experiment("ptportal", "cloudlab", "(portal)", state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    exp.manifest_path.write_bytes(PORTAL_8X25.read_bytes())
    app = typer.Typer()
    experiment_cli.register(app)
    runner = CliRunner()

    result = runner.invoke(app, ["inventory", "ptportal"])
    assert isinstance(result.exception, InputError) and "--user" in str(result.exception)

    mapping = tmp_path / "groups.yml"
    mapping.write_text("node-0: [slurm_controller, slurm_dbd, nfs_server]\n")
    args = ["inventory", "ptportal", "--user", "mchen", "--groups-file", str(mapping)]
    result = runner.invoke(app, [*args, "--group", "node-1=slurm_compute,nfs_client"])
    assert result.exit_code == 0, result.output
    inv = yaml.safe_load(exp.inventory_path.read_text())
    assert users_of(inv) == {"mchen"}
    assert members(inv, "nfs_server") == ["node-0"]
    assert members(inv, "slurm_compute") == ["node-1"]

    result = runner.invoke(app, ["inventory", "ptportal", "--group", "node-2=slurm_compute,web"])
    assert isinstance(result.exception, InputError)
    assert "'node-2'" in str(result.exception) and "'web'" in str(result.exception)
    result = runner.invoke(app, ["inventory", "ptportal", "--group", "node-2"])
    assert isinstance(result.exception, InputError) and "NODE=GROUP" in str(result.exception)
