"""Per-interface shaping on the local testbed: which interface gets what, in which direction,
the commands that do it, the userspace stand-in for netem's forwarding logic, and its records.

The stand-in itself forwarding real frames needs root and network namespaces; that runs in
tests/integration/test_links.py (and benchmarks/link_emulator.py measures it)."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from testbed_support import SLURM_PROFILE, TEST_PROFILES

from elastic.errors import InputError, PtcError
from elastic.profile.render import render_request
from elastic.profile.topology import Interface, Link, LinkProperty, Node, Topology
from elastic.testbed.backends.local import linkemu, links, network


def shaped_plan(profile: str, **params: object) -> dict[str, links.Shaped]:
    topo = render_request(TEST_PROFILES / profile, params).topology
    return {s.wire.interface: s for s in links.plan(topo, network.plan(topo))}


def test_lan_member_is_shaped_from_the_node_into_the_lan_only() -> None:
    plan = shaped_plan("shaped_lan.py")
    assert set(plan) == {"slow:if0"}  # a's interfaces and slow's other one stay bridge ports
    slow = plan["slow:if0"]
    assert slow.wire.node == "slow" and slow.wire.device == "eth1"
    assert slow.from_node == links.Shaping(capacity_kbps=20000, latency_ms=20.0)
    assert slow.to_node == links.UNSHAPED
    assert slow.emulated and not slow.lossy


def test_lan_member_loss_and_no_latency() -> None:
    slow = shaped_plan("shaped_lan.py", latency=0, loss="0.01")["slow:if0"]
    assert slow.from_node == links.Shaping(capacity_kbps=20000, loss=0.01)
    assert slow.emulated and slow.lossy


def test_bandwidth_only_needs_no_emulation() -> None:
    slow = shaped_plan("shaped_lan.py", latency=0)["slow:if0"]
    assert slow.from_node == links.Shaping(capacity_kbps=20000)
    assert not slow.emulated


def test_point_to_point_properties_shape_what_reaches_each_interface() -> None:
    # geni-lib writes b:if0 -> a:if0 with a's settings: they shape the traffic that reaches a.
    plan = shaped_plan("shaped_pair.py")
    assert plan["a:if0"].to_node == links.Shaping(50000, 20.0, None)
    assert plan["a:if0"].from_node == links.UNSHAPED
    assert plan["b:if0"].to_node == links.Shaping(20000, 5.0, 0.01)
    assert plan["b:if0"].from_node == links.UNSHAPED


def test_shaped_pair_as_a_lan_shapes_each_member_towards_the_lan() -> None:
    plan = shaped_plan("shaped_pair.py", lan=True, latency=7.5)
    assert plan["a:if0"].from_node == links.Shaping(50000, 7.5, None)
    assert plan["b:if0"].from_node == links.Shaping(20000, 5.0, 0.01)
    assert plan["a:if0"].to_node == plan["b:if0"].to_node == links.UNSHAPED


def three_on_a_link(*props: LinkProperty) -> Topology:
    nodes = [
        Node(n, interfaces=[Interface(f"{n}:if0", n, f"10.0.0.{i + 1}", "255.255.255.0")])
        for i, n in enumerate("xyz")
    ]
    return Topology(nodes, [Link("l", ["x:if0", "y:if0", "z:if0"], "link", list(props))])


def test_one_destination_shaped_differently_by_two_sources_is_refused_and_named() -> None:
    topo = three_on_a_link(
        LinkProperty("x:if0", "z:if0", latency_ms=5),
        LinkProperty("y:if0", "z:if0", latency_ms=9),
    )
    with pytest.raises(
        InputError, match=r"link 'l': property y:if0 -> z:if0: .*traffic to 'z:if0'"
    ):
        links.plan(topo, network.plan(topo))


def test_the_same_shaping_from_two_sources_is_one_shaping() -> None:
    topo = three_on_a_link(
        LinkProperty("x:if0", "z:if0", latency_ms=5),
        LinkProperty("y:if0", "z:if0", latency_ms=5),
    )
    (only,) = links.plan(topo, network.plan(topo))
    assert only.wire.interface == "z:if0" and only.to_node == links.Shaping(latency_ms=5)


def test_a_whole_lan_bandwidth_caps_what_every_member_sends() -> None:
    nodes = [Node(n, interfaces=[Interface(f"{n}:if0", n, None)]) for n in "pq"]
    topo = Topology(nodes, [Link.shaped("lan", ["p:if0", "q:if0"], bandwidth_kbps=100000)])
    plan = links.plan(topo, network.plan(topo))
    assert {s.wire.node: s.from_node.capacity_kbps for s in plan} == {"p": 100000, "q": 100000}
    assert all(s.to_node == links.UNSHAPED for s in plan)


def test_only_the_wires_being_set_up_are_planned() -> None:
    topo = render_request(TEST_PROFILES / "shaped_pair.py", {}).topology
    wires = [w for w in network.plan(topo) if w.node == "b"]  # as `ptc modify` adding b
    assert [s.wire.interface for s in links.plan(topo, wires)] == ["b:if0"]


def test_devices_of_a_detour_fit_linux_names_and_are_per_experiment() -> None:
    wire = network.plan(render_request(TEST_PROFILES / "shaped_lan.py", {}).topology)[0]
    one, two = links.devices("lk1", wire), links.devices("lk2", wire)
    assert one["node"].startswith("pv") and one["lan"].startswith("pw")
    assert all(len(name) <= 15 for name in one.values())
    assert one != two


def test_token_bucket_and_netem_commands() -> None:
    assert links.tbf_args("pwX", 20000)[:8] == [
        "qdisc", "replace", "dev", "pwX", "root", "tbf", "rate", "20000kbit",
    ]  # fmt: skip
    big = links.tbf_args("pwX", 10_000_000)  # 10 Gbit/s: the burst holds 4 ms of it
    assert int(big[big.index("burst") + 1]) == 5_000_000
    netem = links.netem_args("pvX", links.Shaping(50000, 20.0, 0.01))
    assert netem[4:] == ["root", "netem", "limit", "1000", "delay", "20ms", "loss", "1%",
                         "rate", "50000kbit"]  # fmt: skip


def test_emulator_gets_each_direction_the_right_way_round() -> None:
    plan = shaped_plan("shaped_pair.py")
    args = links.emulator_args("lk1", plan["b:if0"])
    dev = links.devices("lk1", plan["b:if0"].wire)

    def value(flag: str) -> str:
        return args[args.index(flag) + 1]

    assert args[1:3] == ["-I", str(links.EMULATOR)]
    assert (value("--node"), value("--lan")) == (dev["node"], dev["lan"])
    assert (value("--to-node-delay-ms"), value("--to-node-loss")) == ("5", "0.01")
    assert (value("--from-node-delay-ms"), value("--from-node-loss")) == ("0", "0")
    parsed = linkemu.parse(args[3:])  # the emulator accepts what the testbed gives it
    assert parsed.to_node_delay_ms == 5 and parsed.to_node_loss == 0.01


@pytest.mark.parametrize("bad", [["--to-node-loss", "1"], ["--from-node-delay-ms", "-1"]])
def test_emulator_refuses_impossible_settings(bad: list[str]) -> None:
    with pytest.raises(SystemExit):
        linkemu.parse(["--node", "a", "--lan", "b", *bad])


# -- the forwarding logic, over datagram socket pairs instead of AF_PACKET -------------------


def direction(delay: float, loss: float = 0.0, limit: int = 1000) -> tuple[
    linkemu.Direction, socket.socket, socket.socket
]:  # fmt: skip
    src_in, src = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    dst, dst_out = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (src, dst, dst_out):
        s.setblocking(False)  # as the emulator's sockets are
    d = linkemu.Direction("test", src, dst, delay, loss, limit, linkemu.random.Random(1))
    return d, src_in, dst_out


def received(sock: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(sock.recv(2048))
        except BlockingIOError:
            return out


def test_a_frame_is_held_until_its_due_time_and_order_is_kept() -> None:
    d, into, out = direction(delay=0.020)
    into.send(b"one")
    into.send(b"two")
    d.receive(bytearray(4096), now=100.0)
    assert d.release(now=100.019) == pytest.approx(100.020)  # not yet: the configured delay
    assert received(out) == []
    assert d.release(now=100.020) is None
    assert received(out) == [b"one", b"two"]
    assert d.forwarded == 2


def test_without_delay_frames_go_straight_through() -> None:
    d, into, out = direction(delay=0.0)
    into.send(b"x")
    d.receive(bytearray(4096), now=5.0)
    assert received(out) == [b"x"] and not d.queue


def lose(loss: float, frames: int) -> tuple[linkemu.Direction, int]:
    d, into, out = direction(delay=0.0, loss=loss)
    delivered = 0
    for i in range(frames):
        into.send(str(i).encode())
        d.receive(bytearray(4096), now=0.0)
        delivered += len(received(out))
    return d, delivered


def test_loss_drops_the_seeded_share_and_forwards_the_rest() -> None:
    d, delivered = lose(0.25, 400)
    assert d.lost + d.forwarded == 400 and delivered == d.forwarded
    assert 0 < d.lost < 400
    # the generator is seeded: the same settings drop the same frames every run
    assert lose(0.25, 400)[0].lost == d.lost


def test_a_full_queue_drops_like_netem() -> None:
    d, into, _ = direction(delay=1.0, limit=3)
    for _ in range(5):
        into.send(b"f")
    d.receive(bytearray(4096), now=0.0)
    assert len(d.queue) == 3 and d.overflow == 2


# -- records of what runs -------------------------------------------------------------------


def fake_emulator(node_side: str) -> subprocess.Popen[bytes]:
    """A process whose command line is an emulator's (it only sleeps): no root needed."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(links.EMULATOR),
         "--node", node_side],
    )  # fmt: skip


def detour(interface: str, node: str, pid: int | None) -> links.Detour:
    return links.Detour(
        interface=interface, node=node, device="eth1", node_side=f"pv{node}",
        lan_side=f"pw{node}", bridge=None, from_node="20 ms", to_node="unshaped", pid=pid,
    )  # fmt: skip


def test_check_tells_a_running_emulator_from_a_dead_one_and_stop_ends_them(
    tmp_path: Path,
) -> None:
    running, dead = fake_emulator("pvslow"), fake_emulator("pvother")
    dead.kill()
    dead.wait()
    links._save(
        tmp_path,
        [
            detour("slow:if0", "slow", running.pid),
            detour("other:if0", "other", dead.pid),
            detour("bw:if0", "bw", None),  # a kernel-shaped detour has no process
        ],
    )
    got = {s.node: s.running for s in links.check(tmp_path)}
    assert got == {"slow": True, "other": False}

    links.stop(tmp_path)
    assert running.wait(timeout=10) is not None
    assert links.load(tmp_path) == []


def test_a_reused_pid_is_not_taken_for_the_emulator(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not links.alive(detour("slow:if0", "slow", other.pid))
    finally:
        other.kill()
        other.wait()


def test_records_survive_a_round_trip_and_are_written_atomically(tmp_path: Path) -> None:
    links._record(tmp_path, detour("slow:if0", "slow", 123))
    links._record(tmp_path, detour("slow:if0", "slow", 456))  # replaces, never duplicates
    assert [d.pid for d in links.load(tmp_path)] == [456]
    assert [p.name for p in tmp_path.iterdir()] == ["links.json"]  # no temporary file left


def test_stopping_ends_the_process() -> None:
    proc = fake_emulator("pvx")
    links._terminate(proc.pid)
    assert proc.wait(timeout=30) is not None


# -- the Slurm cluster profile: one configuration-server member far away --------------------


def test_slurm_cluster_delays_only_the_last_config_server_member() -> None:
    topo = render_request(
        SLURM_PROFILE, {"configServerCount": 3, "configServerLatency": 25}
    ).topology
    (far,) = links.plan(topo, network.plan(topo))
    assert far.wire.node == "cfg-2"
    assert far.from_node == links.Shaping(latency_ms=25.0) and far.to_node == links.UNSHAPED


def test_slurm_cluster_without_latency_is_not_shaped() -> None:
    topo = render_request(SLURM_PROFILE, {"configServerCount": 3}).topology
    assert links.plan(topo, network.plan(topo)) == []


def test_slurm_cluster_refuses_a_latency_with_one_member_naming_both_parameters() -> None:
    with pytest.raises(PtcError, match=r"configServerLatency.*configServerCount"):
        render_request(SLURM_PROFILE, {"configServerLatency": 25})


class GoneSocket:
    """A packet socket whose device was deleted: reads fail with ENETDOWN."""

    def recv_into(self, buf: bytearray) -> int:
        raise OSError(errno.ENETDOWN, "Network is down")


def test_a_device_that_goes_away_ends_the_emulator() -> None:
    d, _, _ = direction(delay=0.0)
    d.src = GoneSocket()  # type: ignore[assignment]
    with pytest.raises(linkemu.DeviceGone, match="Network is down"):
        d.receive(bytearray(64), now=0.0)
