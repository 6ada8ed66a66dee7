"""`ptc node power-off / power-on / reload / status` on real node containers.

One undeployed experiment (``ptc up`` only: these need SSH and the LAN, not Slurm) of a head
and two compute nodes, and one of `profiles/tests/shaped_lan.py` for the shaping a node must
get back. Every test leaves its nodes running."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from naming import experiment_name
from remote import ssh

from elastic.errors import InputError
from elastic.profile import rspec
from elastic.testbed import known_hosts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = experiment_name("nodeops")
SHAPED = experiment_name("nodeopsl")
LATENCY_MS = 20.0


@pytest.fixture(scope="module")
def exp(experiment_factory: Callable[..., Path]) -> Path:
    return experiment_factory(NAME, "profiles/slurm_cluster.py", "computeNodeCount=2")


def inspect(name: str, node: str) -> dict[str, Any]:
    out = subprocess.run(
        ["podman", "container", "inspect", f"ptc-{name}-{node}"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    state: dict[str, Any] = json.loads(out)[0]["State"]
    return state


def power(ptc: Any, verb: str, name: str, *nodes: str) -> None:
    proc = ptc("node", verb, name, *nodes, timeout=600)
    assert proc.returncode == 0, f"ptc node {verb} {' '.join(nodes)}:\n{proc.stderr[-3000:]}"


def node_status(ptc: Any, name: str) -> dict[str, str]:
    proc = ptc("node", "status", name, "--json")
    assert proc.returncode == 0, proc.stderr
    nodes: dict[str, str] = json.loads(proc.stdout)["nodes"]
    return nodes


def login(expdir: Path, node: str) -> tuple[str, int]:
    found = rspec.parse_manifest((expdir / "manifest.xml").read_bytes()).node(node).login
    assert found is not None
    return found.hostname, found.port


def pinned(expdir: Path, node: str) -> list[str]:
    return known_hosts.pinned(expdir / "inventory" / "known_hosts", *login(expdir, node))


def lan_address(expdir: Path, node: str) -> str:
    out = ssh(expdir, node, "ip -4 -o addr show eth1").stdout
    match = re.search(r"inet (\S+)", out)
    assert match, out
    return match.group(1)


def test_a_powered_off_node_is_a_stopped_container(exp: Path, ptc: Any) -> None:
    ssh(exp, "node-0", "true")
    power(ptc, "power-off", NAME, "node-0")
    try:
        state = inspect(NAME, "node-0")
        assert not state["Running"] and state["Status"] == "exited"
        # podman's figures for a stopped container: no process, no memory held
        [stats] = json.loads(subprocess.run(
            ["podman", "stats", "--no-stream", "--format", "json", f"ptc-{NAME}-node-0"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout)  # fmt: skip
        assert (stats["pids"], stats["mem_usage"]) == ("0", "0B / 0B"), stats
        assert ssh(exp, "node-0", "true", check=False).returncode != 0
        assert node_status(ptc, NAME) == {
            "head": "running",
            "node-0": "stopped",
            "node-1": "running",
        }
        status = ptc("status", NAME).stdout
        assert re.search(r"node-0\s*│\s*stopped", status), status
        ping = ssh(exp, "head", "ping -c 1 -W 2 node-0", check=False)
        assert ping.returncode != 0, "the LAN still answers for a stopped node"
        power(ptc, "power-off", NAME, "node-0")  # again: nothing to do
    finally:
        power(ptc, "power-on", NAME, "node-0")


def test_power_on_gives_the_node_back_with_its_disk_keys_and_lan(exp: Path, ptc: Any) -> None:
    address = lan_address(exp, "node-0")
    keys = pinned(exp, "node-0")
    ssh(exp, "node-0", "echo kept > /root/power-marker")
    before = inspect(NAME, "node-0")["Pid"]
    power(ptc, "power-off", NAME, "node-0")
    power(ptc, "power-on", NAME, "node-0")

    state = inspect(NAME, "node-0")
    assert state["Running"] and state["Pid"] != before
    # the inventory checks host keys strictly: this connection is the proof they are the same
    assert ssh(exp, "node-0", "cat /root/power-marker").stdout == "kept\n"
    assert pinned(exp, "node-0") == keys
    assert lan_address(exp, "node-0") == address
    assert "node-0" in ssh(exp, "node-0", "cat /etc/hosts").stdout
    ssh(exp, "head", "ping -c 1 -W 5 node-0")  # over the experiment's LAN, by name
    ssh(exp, "node-0", "ping -c 1 -W 5 node-1")

    power(ptc, "power-on", NAME, "node-0")  # a running node: nothing happens
    assert inspect(NAME, "node-0")["Pid"] == state["Pid"]


def test_reload_gives_a_fresh_disk_with_new_pinned_keys_and_the_same_address(
    exp: Path, ptc: Any
) -> None:
    address = lan_address(exp, "node-1")
    keys = pinned(exp, "node-1")
    ssh(exp, "node-1", "echo old > /root/reload-marker")
    power(ptc, "reload", NAME, "node-1")

    assert ssh(exp, "node-1", "test -e /root/reload-marker", check=False).returncode == 1
    fresh = pinned(exp, "node-1")
    assert fresh and not set(fresh) & set(keys), "the fresh disk has new host keys, pinned"
    assert lan_address(exp, "node-1") == address
    ssh(exp, "head", "ping -c 1 -W 5 node-1")
    assert node_status(ptc, NAME)["node-1"] == "running"


def test_an_unknown_node_is_refused_naming_it(exp: Path, ptc: Any) -> None:
    before = inspect(NAME, "node-0")["Pid"]
    proc = ptc("node", "power-off", NAME, "node-0", "nodex")
    assert proc.returncode == InputError.exit_code
    assert "no node 'nodex'" in " ".join(proc.stderr.split())
    assert inspect(NAME, "node-0")["Running"] and inspect(NAME, "node-0")["Pid"] == before


def test_a_shaped_node_gets_its_shaping_back(
    experiment_factory: Callable[..., Path], ptc: Any
) -> None:
    """`slow`'s interface on `lan` is delayed by the userspace stand-in for netem: after a
    power cycle a new emulator runs for it, and a ping's round trip still carries the delay."""
    expdir = experiment_factory(
        SHAPED, "profiles/tests/shaped_lan.py", f"latency={LATENCY_MS}", "loss=0"
    )
    power(ptc, "power-off", SHAPED, "slow")
    power(ptc, "power-on", SHAPED, "slow")
    [detour] = json.loads((expdir / "links.json").read_text())["detours"]
    assert detour["node"] == "slow" and detour["pid"]
    assert Path(f"/proc/{detour['pid']}").exists(), "the link emulator is not running again"
    out = ssh(expdir, "slow", "ping -n -c 5 -i 0.2 -W 2 10.80.0.1").stdout
    match = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/", out)
    assert match and float(match.group(1)) >= LATENCY_MS, out


def test_a_node_powered_off_through_a_modify_learns_the_new_names_at_power_on(
    exp: Path, ptc: Any
) -> None:
    power(ptc, "power-off", NAME, "node-1")
    try:
        proc = ptc("modify", NAME, "--param", "computeNodeCount=3", timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert node_status(ptc, NAME)["node-1"] == "stopped", "modify started a powered-off node"
    finally:
        power(ptc, "power-on", NAME, "node-1")
    try:
        assert re.search(
            r"^10\.10\.1\.\d+\s.*\bnode-2$", ssh(exp, "node-1", "cat /etc/hosts").stdout, re.M
        )
        ssh(exp, "node-1", "ping -c 1 -W 5 node-2")
    finally:
        proc = ptc("modify", NAME, "--param", "computeNodeCount=2", timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
