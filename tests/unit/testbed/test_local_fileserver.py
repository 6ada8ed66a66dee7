"""The experiment's file server: where it listens, what it exports, what it is granted, and the
share filesystem it serves from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from testbed_support import SLURM_PROFILE

from elastic.errors import TestbedError
from elastic.profile import rspec
from elastic.profile.render import render_profile
from elastic.profile.topology import ExecuteService, Interface, Link, Node, Topology
from elastic.testbed.backends.local import etc_hosts, fileserver, network, privileges
from elastic.testbed.experiment import Experiment
from elastic.testbed.groups import STARTUP_SCRIPT


def render(**params: str) -> Topology:
    return rspec.parse_request(render_profile(SLURM_PROFILE, params))


def test_the_server_takes_the_highest_free_address_of_the_nfs_server_s_lan() -> None:
    topology = render(computeNodeCount="2")
    at = fileserver.address(topology, network.plan(topology))
    assert at is not None
    assert (at.lan_index, at.address, at.prefixlen, at.subnet) == (
        0,
        "10.10.1.254",
        24,
        "10.10.1.0/24",
    )
    # every node names it, after the nodes themselves
    block = etc_hosts.block(topology, network.plan(topology))
    assert f"10.10.1.254\t{fileserver.HOSTNAME}\n" in block
    assert block.index("node-1") < block.index(fileserver.HOSTNAME)


def _lan(addresses: list[str], netmask: str, groups: str = "nfs_server") -> Topology:
    """One LAN; its first node belongs to ``groups`` (given by its boot command, as profiles do)."""
    boot = ExecuteService(
        "sh", f"sudo /local/repository/profiles/{STARTUP_SCRIPT} --groups {groups}"
    )
    nodes = [
        Node(
            f"n{i}",
            interfaces=[Interface(f"n{i}:if0", f"n{i}", ip, netmask)],
            execute=[] if i else [boot],
        )
        for i, ip in enumerate(addresses)
    ]
    return Topology(nodes=nodes, links=[Link("lan", [f"n{i}:if0" for i in range(len(nodes))])])


def test_an_address_a_node_holds_is_skipped_and_a_full_lan_is_refused_by_name() -> None:
    topology = _lan(["192.168.0.1", "192.168.0.6"], "255.255.255.248")
    at = fileserver.address(topology, network.plan(topology))
    assert at is not None and at.address == "192.168.0.5"
    full = _lan([f"192.168.0.{i}" for i in range(1, 7)], "255.255.255.248")
    with pytest.raises(TestbedError, match=r"LAN lan: no address of 192\.168\.0\.0/29 is left"):
        fileserver.address(full, network.plan(full))


def test_no_server_without_an_nfs_server_node_on_a_lan() -> None:
    topology = _lan(["10.0.0.1", "10.0.0.2"], "255.255.255.0", groups="slurm_compute")
    assert fileserver.address(topology, network.plan(topology)) is None
    block = etc_hosts.block(topology, network.plan(topology))
    assert fileserver.HOSTNAME not in block


def test_every_share_is_exported_over_nfsv4_to_the_lan_only_with_root_squashed() -> None:
    config = fileserver.ganesha_config("10.10.1.0/24")
    exports = config.split("EXPORT {")[1:]
    assert len(exports) == len(fileserver.SHARES)
    for export, path in zip(exports, fileserver.SHARES.values(), strict=True):
        assert f"Path = {path};" in export and f"Pseudo = {path};" in export
        assert "Squash = Root_Squash;" in export and "Protocols = 4;" in export
        # nobody by default; read-write for the LAN's subnet alone
        assert export.index("Access_Type = None;") < export.index("CLIENT {")
        assert "Clients = 10.10.1.0/24;" in export


def test_the_server_is_granted_what_ganesha_needs_and_mounts_only_the_shares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTC_HOME", str(tmp_path))
    exp = Experiment(name="exp", testbed="local", profile="p.py", params={})
    at = fileserver.Address(0, "10.10.1.254", 24)
    args = fileserver.container_args(exp, at)
    granted = set(args[args.index("--cap-add") + 1].split(","))
    assert args[args.index("--cap-drop") + 1] == "all"
    assert granted == set(fileserver.CAPABILITIES)
    assert all(reason.strip() for reason in fileserver.CAPABILITIES.values())
    # what it needs that no node holds, and nothing that would give it the host
    assert granted - set(privileges.CAPABILITIES) == {"DAC_READ_SEARCH"}
    assert not granted & {"SYS_ADMIN", "NET_ADMIN", "MKNOD", "SYS_MODULE", "SYS_PTRACE"}
    volumes = [args[i + 1] for i, a in enumerate(args) if a == "--volume"]
    assert volumes == [
        f"{exp.shared_dir / share}:{mount}:nodev,nosuid"
        for share, mount in fileserver.SHARES.items()
    ]
    assert args[args.index("--network") + 1] == "ns:/run/netns/ptc-exp"
    # no node's container name (ptc-<experiment>-<client_id>) can be the server's
    assert "." in fileserver.container_name("exp") and "." in fileserver.HOSTNAME


@pytest.mark.skipif(os.geteuid() != 0, reason="loop mounts need root")
def test_the_shares_get_a_filesystem_of_their_own_kept_across_unmounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTC_HOME", str(tmp_path))
    exp = Experiment(name="exp", testbed="local", profile="p.py", params={})
    exp.dir.mkdir(parents=True)
    try:
        fileserver.prepare(exp)
    except TestbedError as err:
        pytest.skip(f"no loop mount on this machine: {err}")
    try:
        assert os.path.ismount(exp.shared_dir)
        assert os.stat(exp.shared_dir).st_dev != os.stat(tmp_path).st_dev
        assert sorted(p.name for p in exp.shared_dir.iterdir() if p.name != "lost+found") == sorted(
            fileserver.SHARES
        )
        mount = subprocess.run(
            ["findmnt", "-n", "-o", "OPTIONS", str(exp.shared_dir)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert {"nosuid", "nodev"} <= set(mount.strip().split(","))
        (exp.shared_dir / "home" / "kept").write_text("data\n")
        fileserver.prepare(exp)  # mounted: nothing to do
        fileserver.release(exp)
        assert not os.path.ismount(exp.shared_dir)
        fileserver.prepare(exp)  # after a host restart: the same filesystem again
        assert (exp.shared_dir / "home" / "kept").read_text() == "data\n"
    finally:
        fileserver.release(exp)


def test_a_shared_directory_with_files_but_no_filesystem_is_refused_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTC_HOME", str(tmp_path))
    exp = Experiment(name="old", testbed="local", profile="p.py", params={})
    (exp.shared_dir / "home").mkdir(parents=True)
    (exp.shared_dir / "home" / "thesis.tex").write_text("x")
    with pytest.raises(TestbedError, match=r"experiment old: .* holds files but is no filesystem"):
        fileserver.prepare(exp)
    assert (exp.shared_dir / "home" / "thesis.tex").read_text() == "x"
    assert not fileserver.image_path(exp).exists()
