"""Per-interface link shaping on the local testbed: bandwidth, latency and loss, per direction.

What the RSpec says (``LinkProperty``: traffic from ``source_id`` to ``dest_id``) becomes, for
each node interface (a ``network.Wire``), a shaping of two directions:

- **from the node** into its LAN: a LAN member's property ``interface -> LAN``;
- **to the node**: a point-to-point link's property ``other interface -> interface`` (geni-lib
  writes an interface's own settings there: they shape what reaches it), or ``LAN -> interface``.

A shaped interface does not plug its veth straight into the LAN bridge. Its namespace end
(``pv<tag>``) and a second veth pair (``pw<tag>`` / ``pb<tag>``, with ``pb`` on the LAN bridge)
make a detour through which every frame of that interface passes:

    node ethN ── pv<tag> ══ [shaper] ══ pw<tag> ── pb<tag> ── LAN bridge

Bandwidth is a token bucket (``tbf``) on the egress of ``pv`` (to the node) and ``pw`` (from
the node). Latency and loss are netem's job, and where ``netem`` exists (probed once in the
experiment's namespace) it does that on the same two devices, which a small bridge ``ps<tag>``
joins. **This machine's kernel has no sch_netem**, so there the detour is instead
ptc's userspace stand-in for netem, ``linkemu.py``: one forwarding process per shaped interface,
started detached inside the experiment's namespace, recorded in ``links.json`` in the
experiment directory and stopped by ``ptc down``. ``check`` tells whether each one still runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from elastic import atomic, processes
from elastic.errors import InputError, TestbedError
from elastic.profile.topology import LinkProperty, Topology
from elastic.testbed.backends.local import network

EMULATOR = Path(__file__).with_name("linkemu.py")
STATE_FILE = "links.json"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0
MIN_BURST_BYTES = 64 * 1024


@dataclass(frozen=True)
class Shaping:
    """How one direction of one interface is shaped; None: not shaped in that respect."""

    capacity_kbps: int | None = None
    latency_ms: float | None = None
    loss: float | None = None

    @property
    def shaped(self) -> bool:
        return bool(self.capacity_kbps) or self.delayed or self.lossy

    @property
    def delayed(self) -> bool:
        return bool(self.latency_ms)

    @property
    def lossy(self) -> bool:
        return bool(self.loss)

    def describe(self) -> str:
        parts = []
        if self.capacity_kbps:
            parts.append(f"{self.capacity_kbps} kbit/s")
        if self.latency_ms:
            parts.append(f"{self.latency_ms:g} ms")
        if self.loss:
            parts.append(f"{self.loss:.4g} loss")
        return ", ".join(parts) or "unshaped"


UNSHAPED = Shaping()


@dataclass(frozen=True)
class Shaped:
    """A wire that leaves the plain bridge: its two directions and the devices of its detour."""

    wire: network.Wire
    from_node: Shaping
    to_node: Shaping

    @property
    def emulated(self) -> bool:
        """Needs latency or loss (netem, or the userspace stand-in where netem is missing)."""
        return any(s.delayed or s.lossy for s in (self.from_node, self.to_node))

    @property
    def lossy(self) -> bool:
        return self.from_node.lossy or self.to_node.lossy


def devices(experiment: str, wire: network.Wire) -> dict[str, str]:
    """The namespace devices of one wire: node-side veth, detour veth pair, small bridge."""
    tag = network.tag(experiment, wire.interface)
    return {"node": f"pv{tag}", "lan": f"pw{tag}", "port": f"pb{tag}", "bridge": f"ps{tag}"}


# -- the plan -------------------------------------------------------------------------------


def plan(topology: Topology, wires: list[network.Wire]) -> list[Shaped]:
    """Which wire is shaped how, in which direction; an InputError names what cannot be done.

    Decided from the request alone, before anything exists."""
    by_interface = {w.interface: w for w in wires}
    from_node: dict[str, tuple[LinkProperty, Shaping]] = {}
    to_node: dict[str, tuple[LinkProperty, Shaping]] = {}
    for link in topology.links:
        for prop in link.properties:
            if not prop.shaped:
                continue
            shaping = Shaping(prop.capacity_kbps, prop.latency_ms, prop.packet_loss)
            if prop.dest_id == link.client_id:
                target, side, iface = from_node, "from", prop.source_id
            else:
                target, side, iface = to_node, "to", prop.dest_id
            where = f"link {link.client_id!r}: property {prop.source_id} -> {prop.dest_id}"
            if iface not in link.interface_refs:
                raise InputError(f"{where}: {iface!r} is not an interface of the link")
            if iface not in by_interface:
                continue  # a wire not being set up now (modify wires only the added nodes)
            earlier = target.get(iface)
            if earlier is not None and earlier[1] != shaping:
                raise InputError(
                    f"{where}: the local testbed shapes the traffic {side} {iface!r} once, "
                    f"but {earlier[0].source_id} -> {earlier[0].dest_id} asks "
                    f"{earlier[1].describe()} and this one {shaping.describe()}"
                )
            target[iface] = (prop, shaping)
    shaped = []
    for wire in wires:
        out = from_node.get(wire.interface, (None, UNSHAPED))[1]
        into = to_node.get(wire.interface, (None, UNSHAPED))[1]
        if out.shaped or into.shaped:
            shaped.append(Shaped(wire, out, into))
    return shaped


# -- tc commands ----------------------------------------------------------------------------


def tbf_args(device: str, kbps: int) -> list[str]:
    """A token bucket at ``kbps``; the burst holds at least 4 ms of traffic (and 64 KiB)."""
    burst = max(MIN_BURST_BYTES, kbps * 1000 // 8 * 4 // 1000)
    return ["qdisc", "replace", "dev", device, "root", "tbf", "rate", f"{kbps}kbit",
            "burst", str(burst), "latency", "50ms"]  # fmt: skip


def netem_args(device: str, shaping: Shaping) -> list[str]:
    args = ["qdisc", "replace", "dev", device, "root", "netem", "limit", "1000"]
    if shaping.latency_ms:
        args += ["delay", f"{shaping.latency_ms:g}ms"]
    if shaping.loss:
        args += ["loss", f"{shaping.loss * 100:g}%"]
    if shaping.capacity_kbps:
        args += ["rate", f"{shaping.capacity_kbps}kbit"]
    return args


def emulator_args(experiment: str, shaped: Shaped) -> list[str]:
    """The command line of the userspace stand-in for netem for one wire."""
    dev = devices(experiment, shaped.wire)
    return [
        sys.executable, "-I", str(EMULATOR),
        "--node", dev["node"], "--lan", dev["lan"],
        "--label", f"{experiment}/{shaped.wire.interface}",
        "--from-node-delay-ms", f"{shaped.from_node.latency_ms or 0:g}",
        "--from-node-loss", f"{shaped.from_node.loss or 0:g}",
        "--to-node-delay-ms", f"{shaped.to_node.latency_ms or 0:g}",
        "--to-node-loss", f"{shaped.to_node.loss or 0:g}",
        "--seed", str(int(network.tag(experiment, shaped.wire.interface), 16)),
    ]  # fmt: skip


# -- applying -------------------------------------------------------------------------------

_netem: dict[str, bool] = {}


def netem_available(experiment: str) -> bool:
    """Whether ``tc qdisc add ... netem`` works here (tried on a scratch veth in the namespace)."""
    ns = network.namespace(experiment)
    if ns not in _netem:
        network.ip(
            "-n", ns, "link", "add", "ptcprobe0", "type", "veth", "peer", "name", "ptcprobe1"
        )
        try:
            proc = subprocess.run(
                ["tc", "-n", ns, "qdisc", "add", "dev", "ptcprobe0", "root", "netem",
                 "delay", "1ms"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            _netem[ns] = proc.returncode == 0
        finally:
            network.ip("-n", ns, "link", "delete", "ptcprobe0")
    return _netem[ns]


def apply(exp_dir: Path, experiment: str, shaped: list[Shaped], pids: dict[str, int]) -> None:
    """Build the detour of every shaped wire (its node end already exists, off the bridge).

    ``pids``: each node's container init, to limit its interface to one segment per frame
    where a direction loses packets."""
    if not shaped:
        return
    ns = network.namespace(experiment)
    netem = any(s.emulated for s in shaped) and netem_available(experiment)
    for s in shaped:
        dev = devices(experiment, s.wire)
        network.ip("-n", ns, "link", "add", dev["lan"], "type", "veth", "peer", "name", dev["port"])
        network.ip("-n", ns, "link", "set", dev["port"], "master", f"lan{s.wire.lan_index}", "up")
        if s.emulated and not netem:
            if s.lossy:
                # Loss is per frame: let no frame carry more than one segment through here.
                network.nsenter(pids[s.wire.node], "ip", "link", "set", s.wire.device,
                                "gso_max_segs", "1")  # fmt: skip
                network.ip("-n", ns, "link", "set", dev["port"], "gso_max_segs", "1")
            for name in ("lan", "node"):
                network.ip("-n", ns, "link", "set", dev[name], "up")
        else:
            network.ip("-n", ns, "link", "add", dev["bridge"], "type", "bridge")
            network.ip("-n", ns, "link", "set", dev["bridge"], "up")
            for name in ("lan", "node"):
                network.ip("-n", ns, "link", "set", dev[name], "master", dev["bridge"], "up")
        for device, shaping in ((dev["node"], s.to_node), (dev["lan"], s.from_node)):
            if netem and shaping.shaped:
                network.tc(ns, netem_args(device, shaping))
            elif shaping.capacity_kbps:
                network.tc(ns, tbf_args(device, shaping.capacity_kbps))
        userspace = s.emulated and not netem
        detour = Detour(
            interface=s.wire.interface,
            node=s.wire.node,
            device=s.wire.device,
            node_side=dev["node"],
            lan_side=dev["lan"],
            bridge=None if userspace else dev["bridge"],
            from_node=s.from_node.describe(),
            to_node=s.to_node.describe(),
        )
        _record(exp_dir, detour)  # first, so that `ptc down` finds its devices whatever follows
        if userspace:
            detour.pid = start(exp_dir, experiment, s)
            detour.log = str(exp_dir / "links" / f"{dev['node']}.log")
            _record(exp_dir, detour)


# -- what runs, recorded in the experiment ---------------------------------------------------


@dataclass
class Detour:
    """One shaped interface as recorded in the experiment's ``links.json``."""

    interface: str
    node: str
    device: str  # the node's ethN
    node_side: str  # pv<tag>: the namespace end of the node's veth
    lan_side: str  # pw<tag>: the detour's veth towards the LAN bridge
    bridge: str | None  # ps<tag> when the kernel shapes (tbf, netem); None with the emulator
    from_node: str  # what is done to each direction, for people
    to_node: str
    pid: int | None = None  # the userspace stand-in for netem, when it runs
    log: str | None = None


@dataclass(frozen=True)
class EmulatorStatus:
    interface: str
    node: str
    device: str
    pid: int
    running: bool


def state_path(exp_dir: Path) -> Path:
    return exp_dir / STATE_FILE


def load(exp_dir: Path) -> list[Detour]:
    path = state_path(exp_dir)
    if not path.is_file():
        return []
    return [Detour(**d) for d in json.loads(path.read_text())["detours"]]


def _save(exp_dir: Path, detours: list[Detour]) -> None:
    atomic.write_json(state_path(exp_dir), {"detours": [asdict(d) for d in detours]})


def _record(exp_dir: Path, detour: Detour) -> None:
    _save(exp_dir, [*(d for d in load(exp_dir) if d.interface != detour.interface), detour])


def start(exp_dir: Path, experiment: str, shaped: Shaped) -> int:
    """Start one emulator detached in the experiment's namespace; its pid once it forwards."""
    dev = devices(experiment, shaped.wire)
    log_path = exp_dir / "links" / f"{dev['node']}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["ip", "netns", "exec", network.namespace(experiment), *emulator_args(experiment, shaped)]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,  # outlives `ptc up`, and no terminal signal reaches it
            close_fds=True,
        )
    assert proc.stdout is not None
    ready = _read_ready(proc)
    proc.stdout.close()
    if not ready:
        proc.kill()
        proc.wait()
        tail = log_path.read_text(errors="replace")[-2000:]
        raise TestbedError(
            f"node {shaped.wire.node}: the link emulator of {shaped.wire.interface} did not "
            f"start (exit {proc.returncode}):\n{tail}"
        )
    return proc.pid


def _read_ready(proc: subprocess.Popen[bytes]) -> bool:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(START_TIMEOUT):
            return False
    return proc.stdout.readline().strip() == b"ready"


def alive(detour: Detour) -> bool:
    """Whether the recorded emulator still runs and is that one (not a reused pid)."""
    if detour.pid is None:
        return False
    try:
        cmdline = Path(f"/proc/{detour.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        _running(detour.pid)
        and str(EMULATOR).encode() in cmdline
        and detour.node_side.encode() in cmdline
    )


def check(exp_dir: Path) -> list[EmulatorStatus]:
    """Every recorded emulator, and whether it still runs."""
    return [
        EmulatorStatus(d.interface, d.node, d.device, d.pid, alive(d))
        for d in load(exp_dir)
        if d.pid is not None
    ]


def stop(exp_dir: Path) -> None:
    """Stop every emulator of the experiment (its devices go with the namespace)."""
    detours = load(exp_dir)
    for d in detours:
        if alive(d):
            assert d.pid is not None
            _terminate(d.pid)
    if detours:
        _save(exp_dir, [])


def stop_strays(experiment: str) -> None:
    """Stop any emulator left in the experiment's namespace that ``links.json`` does not name
    (a `ptc up` killed between starting one and recording it)."""
    ns = network.namespace(experiment)
    proc = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False)
    for word in proc.stdout.split():
        try:
            cmdline = Path(f"/proc/{word}/cmdline").read_bytes()
        except OSError:
            continue
        if str(EMULATOR).encode() in cmdline:
            _terminate(int(word))


def release(exp_dir: Path, experiment: str, nodes: set[str]) -> None:
    """Undo the detours of removed nodes: their emulators and namespace devices."""
    detours = load(exp_dir)
    going = [d for d in detours if d.node in nodes]
    ns = network.namespace(experiment)
    for d in going:
        if alive(d):
            assert d.pid is not None
            _terminate(d.pid)
        for device in (d.lan_side, d.bridge):
            if device:
                subprocess.run(["ip", "-n", ns, "link", "delete", device],
                               capture_output=True, check=False)  # fmt: skip
    if going:
        _save(exp_dir, [d for d in detours if d not in going])


def _terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        if not _running(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def _running(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is a child of this process
    return processes.running(pid)
