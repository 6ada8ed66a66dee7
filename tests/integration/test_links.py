"""Per-interface link shaping on the local testbed: latency, loss and bandwidth.

One experiment of `profiles/tests/shaped_lan.py`: `a` and `slow` on two LANs. What `slow`
sends into `lan` is delayed by LATENCY_MS, loses 1 % and is capped at 20 Mbit/s; over `plain`
the same two nodes are not shaped. This kernel has no sch_netem, so the delay and loss come from
ptc's userspace stand-in for netem (linkemu.py).

"Tests never assert timings" forbids performance targets. The one bound asserted here is the
behaviour under test: the emulator never sends a frame before the configured delay has passed,
so a ping's round trip through it cannot be shorter than the configured latency. Its other
side, that the unshaped interfaces do not get that delay, compares with the same configured
figure.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from naming import experiment_name
from remote import ssh

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = experiment_name("lklinks")
LATENCY_MS = 20.0
BANDWIDTH_KBPS = 20000
ADDRESS = {
    "a": "10.80.0.1",
    "slow": "10.80.0.2",
    "far-1": "10.80.0.11",
    "a-plain": "10.81.0.1",
    "slow-plain": "10.81.0.2",
}


@pytest.fixture(scope="module")
def lan(experiment_factory) -> Path:  # type: ignore[no-untyped-def]
    return experiment_factory(
        NAME,
        "profiles/tests/shaped_lan.py",
        f"latency={LATENCY_MS}",
        f"bandwidth={BANDWIDTH_KBPS}",
        "loss=0.01",
    )


def min_rtt(expdir: Path, src: str, dst: str) -> float:
    """The smallest round trip of a few pings, in ms (a lost one or two do not matter)."""
    out = ssh(expdir, src, f"ping -n -c 10 -i 0.2 -W 2 {ADDRESS[dst]}", check=False).stdout
    match = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/", out)
    assert match, f"no reply from {dst} to {src}:\n{out}"
    return float(match.group(1))


def detours(expdir: Path) -> list[dict[str, object]]:
    records: list[dict[str, object]] = json.loads((expdir / "links.json").read_text())["detours"]
    return records


def in_namespace(*cmd: str) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", f"ptc-{NAME}", *cmd], capture_output=True, text=True, check=True
    ).stdout


def test_only_the_shaped_interface_gets_an_emulator(lan: Path) -> None:
    (only,) = detours(lan)
    assert only["interface"] == "slow:if0" and only["device"] == "eth1"
    assert only["from_node"] == f"{BANDWIDTH_KBPS} kbit/s, {LATENCY_MS:g} ms, 0.01 loss"
    assert only["to_node"] == "unshaped"
    cmdline = Path(f"/proc/{only['pid']}/cmdline").read_bytes().split(b"\0")
    assert b"--from-node-delay-ms" in cmdline and b"20" in cmdline


def test_round_trip_through_the_shaped_interface_is_at_least_its_latency(lan: Path) -> None:
    # a -> slow is not delayed, slow's reply is: the configured one-way latency bounds the RTT.
    assert min_rtt(lan, "a", "slow") >= LATENCY_MS
    assert min_rtt(lan, "slow", "a") >= LATENCY_MS


def test_the_same_nodes_unshaped_interfaces_do_not_get_that_delay(lan: Path) -> None:
    assert min_rtt(lan, "a", "slow-plain") < LATENCY_MS
    assert min_rtt(lan, "slow", "a-plain") < LATENCY_MS


def test_bandwidth_is_capped_on_the_shaped_direction_only(lan: Path) -> None:
    (only,) = detours(lan)
    out = in_namespace("tc", "qdisc", "show", "dev", str(only["lan_side"]))
    assert "tbf" in out and "rate 20Mbit" in out, out
    assert "tbf" not in in_namespace("tc", "qdisc", "show", "dev", str(only["node_side"]))
    # lossy: one segment per frame, so that loss is per packet
    assert "gso_max_segs 1 " in ssh(lan, "slow", "ip -d link show eth1").stdout


def test_modify_shapes_an_added_node_and_status_says_when_its_emulator_died(
    lan: Path,
    ptc,  # type: ignore[no-untyped-def]
) -> None:
    assert "not running" not in ptc("status", NAME).stdout
    assert ptc("modify", NAME, "-p", "extra=1").returncode == 0
    far = {str(d["node"]): d for d in detours(lan)}["far-1"]
    assert far["from_node"] == f"{BANDWIDTH_KBPS} kbit/s, {LATENCY_MS:g} ms, 0.01 loss"
    pid = int(str(far["pid"]))
    assert alive(pid)
    assert min_rtt(lan, "a", "far-1") >= LATENCY_MS  # far-1's replies are delayed, as slow's

    subprocess.run(["kill", "-KILL", str(pid)], check=True)
    status = ptc("status", NAME)
    assert status.returncode == 0
    far_line = next(line for line in status.stdout.splitlines() if "far-1" in line)
    assert "link emulator of eth1 not running" in far_line
    assert "not running" not in next(ln for ln in status.stdout.splitlines() if "slow" in ln)

    assert ptc("modify", NAME, "-p", "extra=0").returncode == 0
    assert [d["node"] for d in detours(lan)] == ["slow"]
    assert str(far["lan_side"]) not in in_namespace("ip", "-o", "link", "show")


def test_down_stops_the_emulator(lan: Path, ptc) -> None:  # type: ignore[no-untyped-def]
    (slow,) = detours(lan)
    pid = int(str(slow["pid"]))
    assert alive(pid)
    assert ptc("down", NAME).returncode == 0
    assert not alive(pid)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"ptc-{NAME}" not in namespaces


def alive(pid: int) -> bool:
    """Whether ``pid`` is a link emulator still running (not gone, not a zombie)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return b"linkemu" in cmdline and state != "Z"
