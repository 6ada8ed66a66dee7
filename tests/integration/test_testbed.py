"""Acceptance for `ptc up` / `ptc down` on the local testbed (issue: profiles to nodes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lxml import etree
from naming import experiment_name
from remote import containers, ssh

from elastic.profile import rspec
from elastic.testbed.backends.local.network import namespace
from elastic.testbed.groups import node_groups

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COMPUTE = 3
TB, TWOLAN, GONE = (experiment_name(base) for base in ("tb", "twolan", "gone"))
PING = "tests/integration/playbooks/ping.yml"


@pytest.fixture(scope="module")
def cluster(experiment_factory) -> Path:  # type: ignore[no-untyped-def]
    return experiment_factory(TB, "profiles/slurm_cluster.py", f"computeNodeCount={COMPUTE}")


def manifest_of(expdir: Path) -> rspec.Topology:
    return rspec.parse_manifest((expdir / "manifest.xml").read_bytes())


def test_manifest_has_cloudlab_shape(cluster: Path) -> None:
    root = etree.fromstring((cluster / "manifest.xml").read_bytes())
    assert root.get("type") == "manifest"
    manifest = manifest_of(cluster)
    assert [n.client_id for n in manifest.nodes] == ["head"] + [f"node-{i}" for i in range(COMPUTE)]
    for node in manifest.nodes:
        assert node.login is not None and node.login.hostname == "127.0.0.1"
        assert node.component_id and node.sliver_id


def test_ansible_ping_reaches_every_node_over_ssh(cluster: Path) -> None:
    ansible = Path(sys.executable).with_name("ansible")
    proc = subprocess.run(
        [str(ansible), "all", "-i", str(cluster / "inventory" / "hosts.yml"), "-m", "ping", "-o"],
        stdin=subprocess.DEVNULL,  # Ansible refuses a non-blocking stdin, which CI may hand down
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"ANSIBLE_HOST_KEY_CHECKING": "False"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for node in ["head"] + [f"node-{i}" for i in range(COMPUTE)]:
        assert f"{node} | SUCCESS" in proc.stdout


def test_hostnames_and_lan_addresses_match_manifest(cluster: Path) -> None:
    for node in manifest_of(cluster).nodes:
        assert ssh(cluster, node.client_id, "hostname").stdout.strip() == node.client_id
        addresses = ssh(cluster, node.client_id, "ip -4 -o addr show").stdout
        for iface in node.interfaces:
            assert iface.ip and f"inet {iface.ip}/24" in addresses, (node.client_id, addresses)


def test_nodes_reach_each_other_by_address_and_name(cluster: Path) -> None:
    nodes = manifest_of(cluster).nodes
    for src in nodes:
        for dst in nodes:
            if src is dst:
                continue
            ip = dst.interfaces[0].ip
            ssh(cluster, src.client_id, f"ping -c1 -W2 {ip}")
            out = ssh(cluster, src.client_id, f"ping -c1 -W2 {dst.client_id}").stdout
            assert f"({ip})" in out, out  # the name resolves to the LAN address, not eth0


def test_geni_get_key_and_manifest(cluster: Path) -> None:
    public = (cluster / "ssh" / "id_ed25519.pub").read_text().split()[1]
    manifest = (cluster / "manifest.xml").read_text()
    for node in manifest_of(cluster).nodes:
        derived = ssh(cluster, node.client_id, "geni-get key | ssh-keygen -y -f /dev/stdin").stdout
        assert derived.split()[1] == public
        assert ssh(cluster, node.client_id, "geni-get manifest").stdout == manifest
        assert ssh(cluster, node.client_id, "geni-get client_id").stdout.strip() == node.client_id
        count = ssh(cluster, node.client_id, "geni-get param computeNodeCount").stdout.strip()
        assert count == str(COMPUTE)


def test_startup_script_ran_and_built_the_key_mesh(cluster: Path) -> None:
    for node in manifest_of(cluster).nodes:
        # The groups it announces are the ones the manifest carries to the inventory.
        motd = ssh(cluster, node.client_id, "cat /etc/motd").stdout
        groups = ", ".join(node_groups(node))
        assert f"ptc: cluster node ready (groups: {groups})" in motd
        assert ("slurm_controller" in groups) == (node.client_id == "head")
    # The mesh: head reaches a compute node as root with the experiment key, over the LAN.
    out = ssh(cluster, "head", "ssh -o BatchMode=yes -o StrictHostKeyChecking=no node-0 hostname")
    assert out.stdout.strip() == "node-0"


# Each would start at boot on a fresh install of its package; on the prepared image only the
# roles that own them enable them, on the nodes they belong to.
PACKAGED_SERVICES = (
    "slurmctld", "slurmd", "slurmdbd", "slurmrestd", "mariadb", "munge", "etcd",
    "nfs-ganesha", "nfs-server", "rpcbind", "chrony",
)  # fmt: skip


def test_the_prepared_image_carries_the_packages_and_starts_none_of_them(cluster: Path) -> None:
    """Nodes not yet deployed boot the default, prepared image: the roles' packages are there,
    nothing they ship runs or is enabled, and no install-time secret came with the image."""
    assert json.loads((cluster / "experiment.json").read_text())["image"] == "prepared"
    for node in ("head", "node-0"):
        installed = ssh(cluster, node, "dpkg-query -W -f '${Package}\\n' slurmd mariadb-server")
        assert installed.stdout.split() == ["mariadb-server", "slurmd"], (node, installed.stdout)
        units = " ".join(f"{u}.service" for u in PACKAGED_SERVICES)
        enabled = ssh(cluster, node, f"systemctl is-enabled {units} || true").stdout.split()
        assert enabled == ["disabled"] * len(PACKAGED_SERVICES), (node, enabled)
        active = ssh(cluster, node, f"systemctl is-active {units} || true").stdout.split()
        assert set(active) == {"inactive"}, (node, active)
        secrets = "/etc/munge/munge.key /etc/ssl/private/ssl-cert-snakeoil.key"
        left = ssh(cluster, node, f"ls {secrets} 2>/dev/null || true").stdout.strip()
        assert left == "", (node, left)


def test_an_unknown_image_is_refused_by_name(ptc) -> None:  # type: ignore[no-untyped-def]
    proc = ptc("up", "profiles/tests/single_node.py", "--local", "--name", "no-such-image",
               "--image", "golden")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--image golden" in proc.stderr and "prepared or bare" in proc.stderr, proc.stderr
    assert not (Path(os.environ["PTC_HOME"]) / "experiments" / "no-such-image").exists()


def test_up_of_an_existing_name_refuses(cluster: Path, ptc) -> None:  # type: ignore[no-untyped-def]
    proc = ptc("up", "profiles/slurm_cluster.py", "--local", "--name", TB)
    assert proc.returncode == 2
    assert "already exists" in proc.stderr
    assert (cluster / "manifest.xml").exists()


def test_status_and_list(cluster: Path, ptc) -> None:  # type: ignore[no-untyped-def]
    status = ptc("status", TB)
    assert status.returncode == 0
    for node in ["head", "node-0", "node-2"]:
        assert node in status.stdout
    assert "running" in status.stdout
    listing = ptc("list")
    assert TB in listing.stdout and "ready" in listing.stdout


def _netns_names() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def test_two_lans_are_two_isolated_networks(experiment_factory) -> None:  # type: ignore[no-untyped-def]
    expdir = experiment_factory(TWOLAN, "profiles/tests/two_lans.py")
    bridges = subprocess.run(
        ["ip", "-n", namespace(TWOLAN), "-o", "link", "show", "type", "bridge"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert len(bridges.strip().splitlines()) == 2
    manifest = manifest_of(expdir)
    by_link: dict[str, list[tuple[str, str]]] = {}
    for link in manifest.links:
        for ref in link.interface_refs:
            iface = manifest.interface(ref)
            assert iface is not None and iface.ip
            by_link.setdefault(link.client_id, []).append((iface.node, iface.ip))
    (lan_a, members_a), (lan_b, members_b) = sorted(by_link.items())
    only_a = [n for n, _ in members_a if n not in {m for m, _ in members_b}]
    only_b_ips = [ip for n, ip in members_b if n not in {m for m, _ in members_a}]
    same_lan_peer = next(ip for n, ip in members_a if n != only_a[0])
    ssh(expdir, only_a[0], f"ping -c1 -W2 {same_lan_peer}")
    for ip in only_b_ips:
        cut = ssh(expdir, only_a[0], f"ping -c1 -W1 {ip}", check=False)
        assert cut.returncode != 0, f"{only_a[0]} on {lan_a} reached {ip} on {lan_b}"


def test_down_leaves_nothing_behind(experiment_factory, ptc) -> None:  # type: ignore[no-untyped-def]
    expdir = experiment_factory(GONE, "profiles/tests/single_node.py")
    assert containers(GONE) and f"ptc-{GONE}" in _netns_names()
    proc = ptc("down", GONE)
    assert proc.returncode == 0, proc.stderr
    assert containers(GONE) == []
    assert f"ptc-{GONE}" not in _netns_names()
    assert not expdir.exists()
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"ptc-{GONE}-" not in procs  # no conmon or other process of the experiment survives


def test_a_name_in_use_outside_this_home_is_refused_and_left_alone(ptc, ptc_home: Path) -> None:  # type: ignore[no-untyped-def]
    other = experiment_name("other")
    ns = f"ptc-{other}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        proc = ptc("up", "profiles/tests/single_node.py", "--local", "--name", other)
        assert proc.returncode != 0
        assert f"network namespace {ns}" in proc.stderr and "outside this PTC_HOME" in proc.stderr
        assert ns in _netns_names(), "the other home's namespace was removed"
        assert containers(other) == []
        assert not (ptc_home / "experiments" / other).exists()
    finally:
        subprocess.run(["ip", "netns", "delete", ns], check=False)


def test_unknown_experiment_is_a_clear_error(ptc) -> None:  # type: ignore[no-untyped-def]
    for args in (["status", "nosuch"], ["down", "nosuch"], ["inventory", "nosuch"]):
        proc = ptc(*args)
        assert proc.returncode == 2
        assert "unknown experiment 'nosuch'" in proc.stderr


def test_bad_parameter_names_it_and_creates_nothing(ptc, ptc_home: Path) -> None:  # type: ignore[no-untyped-def]
    proc = ptc(
        "up",
        "profiles/slurm_cluster.py",
        "--local",
        "--name",
        "badparam",
        "--param",
        "computeNodeCount=0",
    )
    assert proc.returncode == 2
    assert "computeNodeCount" in proc.stderr
    assert not (ptc_home / "experiments" / "badparam").exists()
    assert containers("badparam") == []


def test_broken_profile_is_a_clear_error(ptc, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "broken.py"
    broken.write_text("import geni.portal as portal\nraise RuntimeError('profile bug here')\n")
    proc = ptc("up", str(broken), "--local", "--name", "broken")
    assert proc.returncode == 2
    assert "profile bug here" in proc.stderr


def test_request_with_dangling_interface_is_refused(tmp_path: Path, ptc) -> None:  # type: ignore[no-untyped-def]
    profile = tmp_path / "dangling.py"
    profile.write_text(
        "import geni.portal as portal\nimport geni.rspec.pg as pg\n"
        "pc = portal.Context()\nrequest = pc.makeRequestRSpec()\n"
        "a = request.RawPC('a')\nlink = request.LAN('lan')\n"
        "link.addInterface(a.addInterface('if0', pg.IPv4Address('10.0.0.1', '255.255.255.0')))\n"
        "pc.printRequestRSpec(request)\n"
    )
    # A profile cannot express a dangling reference, so break the rendered RSpec instead.
    xml = subprocess.run(
        [sys.executable, "-m", "elastic.cli", "profile", "render", str(profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    broken = xml.replace('interface_ref client_id="a:if0"', 'interface_ref client_id="a:if9"')
    assert broken != xml
    with pytest.raises(Exception, match="a:if9"):
        rspec.validate(rspec.parse_request(broken.encode()))


def test_manifest_parameters_round_trip(cluster: Path) -> None:
    params = manifest_of(cluster).parameters
    assert json.loads(json.dumps(params)).get("computeNodeCount") == str(COMPUTE)


def test_a_changed_host_key_is_refused_naming_the_node_until_replace(cluster: Path, ptc) -> None:  # type: ignore[no-untyped-def]
    """The local testbed pins every node's host key when it makes the node: a node whose key
    changes behind ptc's back is refused, by name; `ptc replace` pins the new node's key."""
    node = f"node-{COMPUTE - 1}"
    container = f"ptc-{TB}-{node}"
    assert container in containers(TB)
    config = (cluster / "inventory" / "ssh_config").read_text()
    assert "StrictHostKeyChecking yes" in config and "StrictHostKeyChecking no" not in config
    ssh(cluster, node, "true")  # the tests' shared connection is open, as after another test
    subprocess.run(
        ["podman", "exec", container, "sh", "-c",
         "rm -f /etc/ssh/ssh_host_*key* && ssh-keygen -A && systemctl restart ssh"],
        check=True, capture_output=True,
    )  # fmt: skip
    # An SSH connection Ansible keeps open (ControlPersist) predates the change: close it.
    port = next(n.login.port for n in manifest_of(cluster).nodes if n.client_id == node and n.login)
    master = ["ssh", "-o", f"ControlPath={Path.home()}/.ansible/cp/%C", "-p", str(port),
              "-l", "root", "127.0.0.1"]  # fmt: skip
    subprocess.run([*master[:1], "-O", "exit", *master[1:]], capture_output=True, check=False)
    for _ in range(50):
        if subprocess.run(
            [*master[:1], "-O", "check", *master[1:]], capture_output=True
        ).returncode:
            break
        time.sleep(0.1)
    refused = ptc("deploy", TB, "--playbook", PING, "--limit", node)
    assert refused.returncode != 0
    # OpenSSH's words, or mitogen's (the default strategy), for the same refusal.
    said = ("Host key verification failed", "mismatching host key")
    assert f"{node}: task" in refused.stderr and any(s in refused.stderr for s in said), (
        refused.stderr[-3000:]
    )
    # a connection of its own: one the tests shared before the change would still answer
    assert ssh(cluster, node, "true", check=False, fresh=True).returncode == 255

    replaced = ptc("replace", TB, node)
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    again = ptc("deploy", TB, "--playbook", PING, "--limit", node)
    assert again.returncode == 0, again.stderr[-3000:]
