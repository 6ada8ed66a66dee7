"""Node operations (power off/on, reload, states) against a fake podman.

The fake stands in for the podman CLI only: it keeps each container's state, pid and port and
answers the few commands the local backend sends. The wiring functions (``network.attach``,
``links.apply``) are recorded, not run, so that a power-on can be compared with creation."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import types
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from testbed_support import SLURM_PROFILE, TEST_PROFILES, StandInBackend
from typer.testing import CliRunner

from elastic import atomic
from elastic.errors import InputError, NotFoundError, TestbedError
from elastic.events import Event, Kind, collect
from elastic.profile import rspec
from elastic.profile.render import render_request
from elastic.profile.topology import Login, Topology
from elastic.testbed import experiment as experiments
from elastic.testbed import known_hosts, lifecycle, membership, nodeops, power_hold
from elastic.testbed.backends.local import backend as local
from elastic.testbed.backends.local import capacity, links, network, provisioning
from elastic.testbed.experiment import Experiment, State
from elastic.testbed.loans import Loan, LoanBook
from elastic.testbed.loans import State as LoanState

KEYS = "ssh-ed25519 AAAAkey-{node} root@{node}\n"


@dataclass
class Container:
    running: bool
    pid: int
    port: int
    status: str = ""
    keys: str = ""
    hosts: str = "127.0.0.1 localhost\n"


@dataclass
class FakePodman:
    """The podman CLI, as far as node power goes: stop, start, inspect, exec."""

    containers: dict[str, Container]
    calls: list[tuple[str, ...]] = field(default_factory=list)
    fail: str | None = None  # a subcommand that fails
    hold: threading.Event | None = None  # a start (or `held_verb`) waits for it
    held_verb: str = "start"
    holding: threading.Event = field(default_factory=threading.Event)
    moves_port: bool = False

    def run(
        self, *args: str, check: bool = True, input: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        verb, name = args[0], args[-1]
        out, rc = "", 0
        if verb == self.held_verb and self.hold is not None:
            self.holding.set()
            assert self.hold.wait(30)
        if verb == self.fail:
            rc = 125
        elif verb == "stop":
            self.containers[name].running = False
        elif verb == "start":
            c = self.containers[name]
            c.running, c.pid = True, c.pid + 1000  # a new init, in a new network namespace
            if self.moves_port:
                c.port += 1
        elif verb == "exec":
            out, rc = self._exec(args, input)
        elif verb == "ps" and args[-2:] == ("--format", "json"):
            out = self._listing(args)
        elif verb == "rm":
            for gone in args[1:]:
                self.containers.pop(gone, None)
        if check and rc:
            raise TestbedError(f"podman {' '.join(args[:2])} failed: fake failure")
        return subprocess.CompletedProcess(["podman", *args], rc, out, "")

    def _exec(self, args: tuple[str, ...], input: bytes | None) -> tuple[str, int]:
        container = args[2] if args[1] == "-i" else args[1]
        c = self.containers[container]
        command = " ".join(args[2:])
        if "ssh_host_" in command:
            return c.keys, 0
        if "execute.status" in command:
            return "0\n", 0
        if command.endswith("cat /etc/hosts"):
            return c.hosts, 0
        if "/etc/hosts" in command and input is not None:
            c.hosts = input.decode()
            return "", 0
        raise AssertionError(f"unexpected podman exec {args}")

    def _listing(self, args: tuple[str, ...]) -> str:
        """``podman ps -a --filter label=EXPERIMENT_LABEL=NAME --format json``."""
        label = f"label={local.podman.EXPERIMENT_LABEL}="
        experiment = next(a.removeprefix(label) for a in args if a.startswith(label))
        return json.dumps([
            {"Names": [name], "State": c.status or ("running" if c.running else "exited")}
            for name, c in self.containers.items()
            if name.startswith(local.podman.container_name(experiment, ""))
        ])  # fmt: skip

    def inspect(self, name: str) -> dict[str, Any] | None:
        c = self.containers.get(name)
        if c is None:
            return None
        status = c.status or ("running" if c.running else "exited")
        return {
            "State": {"Running": c.running, "Status": status, "Pid": c.pid},
            "NetworkSettings": {"Ports": {"22/tcp": [{"HostPort": str(c.port)}]}},
        }

    def verbs(self) -> list[tuple[str, str]]:
        return [(c[0], c[-1]) for c in self.calls if c[0] in ("stop", "start")]


@dataclass
class Wiring:
    attached: list[tuple[str, int, bool]] = field(default_factory=list)  # interface, pid, bridge
    applied: list[tuple[list[links.Shaped], dict[str, int]]] = field(default_factory=list)
    released: list[set[str]] = field(default_factory=list)
    ssh_waits: list[tuple[str, int, str]] = field(default_factory=list)
    prepared: list[str] = field(default_factory=list)  # experiments whose shares were mounted


def made(name: str, profile: Path, params: dict[str, str]) -> tuple[Experiment, Topology]:
    """A ready local experiment as `ptc up` leaves it: manifest, inventory, pinned keys."""
    exp = Experiment(name, "local", str(profile), params, state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    request = render_request(profile, params).topology
    manifest = replace(request, nodes=[
        replace(n, login=Login("127.0.0.1", 2200 + i, "root"))
        for i, n in enumerate(request.nodes)
    ])  # fmt: skip
    atomic.write_bytes(exp.manifest_path, rspec.write_manifest(manifest))
    exp.key_path.parent.mkdir(parents=True)
    exp.key_path.with_suffix(".pub").write_text("ssh-ed25519 AAAAexp ptc\n")
    lifecycle.write_inventory(exp)
    for i, node in enumerate(request.nodes):
        known_hosts.pin(
            exp.inventory_dir / "known_hosts",
            "127.0.0.1",
            2200 + i,
            known_hosts.public_keys(KEYS.format(node=node.client_id), node.client_id),
        )
    return exp, request


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> tuple[FakePodman, Wiring]:
    podman = FakePodman({})
    wiring = Wiring()
    monkeypatch.setattr(local.podman, "run", podman.run)
    monkeypatch.setattr(local.podman, "inspect", podman.inspect)
    monkeypatch.setattr(
        local.podman, "exec_", lambda name, *cmd, check=True: podman.run("exec", name, *cmd)
    )

    def attach(experiment: str, wire: network.Wire, pid: int, bridge: bool = True) -> None:
        wiring.attached.append((wire.interface, pid, bridge))

    def apply(exp_dir: Path, experiment: str, shaped: list[links.Shaped], pids: Any) -> None:
        wiring.applied.append((shaped, dict(pids)))

    def release(exp_dir: Path, experiment: str, nodes: set[str]) -> None:
        wiring.released.append(set(nodes))

    def wait_for_ssh(host: str, port: int, node: str) -> None:
        wiring.ssh_waits.append((host, port, node))

    monkeypatch.setattr(local.network, "attach", attach)
    monkeypatch.setattr(local.links, "apply", apply)
    monkeypatch.setattr(local.links, "release", release)
    monkeypatch.setattr(local, "_wait_for_ssh", wait_for_ssh)
    # the share filesystem is a real loop mount (test_local_fileserver.py mounts one); these
    # nodes are fake, and nothing here may leave a mount behind
    monkeypatch.setattr(local.fileserver, "prepare", lambda exp: wiring.prepared.append(exp.name))
    # the namespace's leftover veth ends are deleted with `ip`; nothing to delete here
    monkeypatch.setattr(
        local,
        "subprocess",
        types.SimpleNamespace(run=lambda *a, **k: subprocess.CompletedProcess(a, 0, "", "")),
    )
    monkeypatch.setattr(
        lifecycle.backends,
        "get",
        lambda testbed, site=None, on_event=None: local.LocalBackend(None, on_event),
    )
    return podman, wiring


def boot(podman: FakePodman, exp: Experiment, request: Topology, **running: bool) -> None:
    for i, node in enumerate(request.nodes):
        podman.containers[local.podman.container_name(exp.name, node.client_id)] = Container(
            running=running.get(node.client_id.replace("-", "_"), True),
            pid=100 + i,
            port=2200 + i,
            keys=KEYS.format(node=node.client_id),
        )


def test_power_off_stops_running_nodes_only_and_undoes_their_wiring(
    fake: tuple[FakePodman, Wiring],
) -> None:
    podman, wiring = fake
    exp, request = made("off", SLURM_PROFILE, {"computeNodeCount": "2"})
    boot(podman, exp, request, node_1=False)
    ready = exp.node_dir("node-0") / "geni" / "ready"
    ready.parent.mkdir(parents=True)
    ready.write_text("1\n")
    events: list[Event] = []
    nodeops.power_off(exp, ["node-0", "node-1"], collect(events))
    assert podman.verbs() == [("stop", "ptc-off-node-0")], "a stopped node is stopped again"
    stop = next(c for c in podman.calls if c[0] == "stop")
    assert stop[1:3] == ("--time", str(local.STOP_GRACE)), "systemd gets its grace to shut down"
    assert {"node-0"} in wiring.released and not ready.exists()
    assert nodeops.states(exp) == {"head": "running", "node-0": "stopped", "node-1": "stopped"}
    timed = [e.data for e in events if e.kind is Kind.STATUS and "seconds" in e.data]
    assert [(d["node"], d["step"]) for d in timed] == [("node-0", "stop")]
    assert events[-1].topic == "power-off" and events[-1].kind is Kind.END


def test_power_on_rewires_the_node_exactly_as_at_creation(
    fake: tuple[FakePodman, Wiring],
) -> None:
    """The shaped node's interfaces are attached again with its new pid, and the same shaping
    (the plan made from the request at creation) is applied again."""
    podman, wiring = fake
    exp, request = made("on", TEST_PROFILES / "shaped_lan.py", {"latency": "20"})
    boot(podman, exp, request, slow=False)
    events: list[Event] = []
    nodeops.power_on(exp, ["slow"], collect(events))

    container = podman.containers["ptc-on-slow"]
    assert podman.verbs() == [("start", "ptc-on-slow")] and container.running
    wires = network.plan(request)
    at_creation = links.plan(request, wires)
    mine = [w for w in wires if w.node == "slow"]
    shaped_here = {s.wire.interface for s in at_creation if s.wire.node == "slow"}
    assert shaped_here, "the profile shapes slow's interface"
    assert wiring.attached == [
        (w.interface, container.pid, w.interface not in shaped_here) for w in mine
    ]
    [(shaped, pids)] = wiring.applied
    assert shaped == [s for s in at_creation if s.wire.node == "slow"]
    assert pids == {"slow": container.pid}
    assert wiring.ssh_waits == [("127.0.0.1", container.port, "slow")]
    assert (exp.node_dir("slow") / "geni" / "ready").is_file()
    assert "10.80.0.1" in container.hosts, "/etc/hosts names the other nodes"
    steps = [e.data["step"] for e in events if e.kind is Kind.STATUS and "step" in e.data]
    assert steps == ["start", "wire", "sshd", "ready"]


def test_power_on_of_a_running_node_does_nothing(fake: tuple[FakePodman, Wiring]) -> None:
    podman, wiring = fake
    exp, request = made("idem", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request)
    nodeops.power_on(exp, ["node-0", "head"])
    assert podman.verbs() == [] and wiring.attached == [] and wiring.ssh_waits == []


def test_power_on_refuses_host_keys_that_are_not_the_pinned_ones(
    fake: tuple[FakePodman, Wiring],
) -> None:
    podman, _ = fake
    exp, request = made("keys", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request, node_0=False)
    podman.containers["ptc-keys-node-0"].keys = KEYS.format(node="impostor")
    with pytest.raises(TestbedError, match=r"node node-0: power on: its host keys are not"):
        nodeops.power_on(exp, ["node-0"])
    assert podman.verbs() == [("start", "ptc-keys-node-0"), ("stop", "ptc-keys-node-0")]
    assert nodeops.states(exp)["node-0"] == "stopped", "a refused node is left powered off"


def test_power_on_refuses_a_moved_ssh_port(fake: tuple[FakePodman, Wiring]) -> None:
    podman, _ = fake
    podman.moves_port = True
    exp, request = made("port", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request, node_0=False)
    with pytest.raises(TestbedError, match=r"node node-0: power on: its SSH port moved"):
        nodeops.power_on(exp, ["node-0"])


def test_a_failed_step_names_the_node_and_the_step(fake: tuple[FakePodman, Wiring]) -> None:
    podman, _ = fake
    podman.fail = "start"
    exp, request = made("fails", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request, node_0=False)
    with pytest.raises(TestbedError, match=r"node node-0: power on: podman start failed"):
        nodeops.power_on(exp, ["node-0"])
    podman.fail = "stop"
    with pytest.raises(TestbedError, match=r"node head: power off: podman stop failed"):
        nodeops.power_off(exp, ["head"])


@pytest.mark.parametrize("operation", [nodeops.power_off, nodeops.power_on, nodeops.reload])
def test_an_unknown_node_is_refused_before_anything_changes(
    fake: tuple[FakePodman, Wiring], operation: Any
) -> None:
    podman, _ = fake
    exp, request = made("unknown", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request, node_0=False)
    before = sorted((p, p.read_bytes()) for p in exp.dir.rglob("*") if p.is_file())
    with pytest.raises(NotFoundError, match=r"no node 'nodex'; its nodes are head, node-0"):
        operation(exp, ["head", "nodex"])
    assert podman.calls == []
    assert sorted((p, p.read_bytes()) for p in exp.dir.rglob("*") if p.is_file()) == before


def test_a_missing_container_is_named(fake: tuple[FakePodman, Wiring]) -> None:
    podman, _ = fake
    exp, request = made("gone", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request)
    del podman.containers["ptc-gone-node-0"]
    assert nodeops.states(exp) == {"head": "running", "node-0": "missing"}
    with pytest.raises(TestbedError, match=r"node node-0: power on: its container .* not exist"):
        nodeops.power_on(exp, ["node-0"])


def test_states_keep_podmans_word_for_other_states(fake: tuple[FakePodman, Wiring]) -> None:
    podman, _ = fake
    exp, request = made("paused", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request)
    podman.containers["ptc-paused-node-0"].status = "paused"
    assert nodeops.states(exp) == {"head": "running", "node-0": "paused"}


def test_an_experiment_that_is_not_ready_is_refused(fake: tuple[FakePodman, Wiring]) -> None:
    exp, _ = made("busy", SLURM_PROFILE, {"computeNodeCount": "1"})
    exp.state = State.MODIFYING
    exp.save()
    with pytest.raises(InputError, match=r"power off: experiment 'busy' is modifying"):
        nodeops.power_off(exp, ["node-0"])


def test_reload_goes_the_replace_way_and_rewrites_inventory_and_host_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reload is `ptc replace`: the backend's replace_nodes, the new logins in the inventory,
    the old host keys gone (a pinning backend pins the new ones as it makes the node)."""
    exp, _ = made("reload", SLURM_PROFILE, {"computeNodeCount": "1"})
    replaced: list[list[str]] = []

    class Replacing(StandInBackend):
        def preflight(self) -> None:
            pass

        def replace_nodes(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
            replaced.append(nodes)
            manifest = rspec.parse_manifest(exp.manifest())
            for node in manifest.nodes:
                if node.client_id in nodes and node.login:
                    node.login = Login(node.login.hostname, node.login.port + 100, "root")
            return rspec.write_manifest(manifest)

    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: Replacing())
    events: list[Event] = []
    nodeops.reload(exp, ["node-0", "node-0"], collect(events))
    assert replaced == [["node-0"]]
    assert experiments.load("reload").state is State.READY
    assert "ansible_port: 2301" in (exp.inventory_dir / "hosts.yml").read_text()
    pins = exp.inventory_dir / "known_hosts"
    assert known_hosts.pinned(pins, "127.0.0.1", 2201) == [], "the old node's key is kept"
    assert known_hosts.pinned(pins, "127.0.0.1", 2200) == ["ssh-ed25519 AAAAkey-head"]
    assert events[-1].topic == "reload" and events[-1].kind is Kind.END


def test_operations_on_one_experiment_run_one_at_a_time(
    fake: tuple[FakePodman, Wiring],
) -> None:
    """A power-off asked while a power-on is under way waits for it: they share the
    experiment's namespace and records."""
    podman, _ = fake
    exp, request = made("serial", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request, node_0=False)
    podman.hold = threading.Event()
    on = threading.Thread(target=nodeops.power_on, args=(exp, ["node-0"]))
    on.start()
    assert podman.holding.wait(30)
    off = threading.Thread(target=nodeops.power_off, args=(exp, ["head"]))
    off.start()
    off.join(1.0)  # time for the power-off to overtake, were nothing stopping it
    podman.hold.set()
    on.join(30)
    off.join(30)
    verbs = [c[0] for c in podman.calls]
    assert verbs.index("stop") > max(i for i, v in enumerate(verbs) if v == "exec"), verbs
    assert podman.verbs() == [("start", "ptc-serial-node-0"), ("stop", "ptc-serial-head")]


def test_the_cli_shows_states_as_json_and_exits_2_on_an_unknown_node(
    fake: tuple[FakePodman, Wiring],
) -> None:
    from elastic.cli import node as node_cli

    podman, _ = fake
    exp, request = made("cli", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request, node_0=False)
    runner = CliRunner()
    got = runner.invoke(node_cli.app, ["status", "cli", "--json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["nodes"] == {"head": "running", "node-0": "stopped"}
    got = runner.invoke(node_cli.app, ["power-on", "cli", "nodex"])
    assert isinstance(got.exception, NotFoundError) and got.exception.exit_code == 2
    assert "no node 'nodex'" in str(got.exception)


# -- release and allocate -----------------------------------------------------------------------


class Moving(StandInBackend):
    """A backend that records release and allocate and answers as a testbed would: the
    manifest without the released nodes, or with the allocated ones given logins."""

    def __init__(self) -> None:
        self.released: list[list[str]] = []
        self.allocated: list[tuple[Topology, list[str]]] = []

    def preflight(self) -> None:
        pass

    def power_states(self, exp: Experiment) -> dict[str, str]:
        return {n.client_id: "running" for n in rspec.parse_manifest(exp.manifest()).nodes}

    def release(self, exp: Experiment, nodes: list[str]) -> bytes:
        self.released.append(nodes)
        return rspec.write_manifest(membership.without(rspec.parse_manifest(exp.manifest()), nodes))

    def allocate(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        self.allocated.append((request, nodes))
        current = {n.client_id: n for n in rspec.parse_manifest(exp.manifest()).nodes}
        nodes_after = [
            current.get(n.client_id) or replace(n, login=Login("127.0.0.1", 2300 + i, "root"))
            for i, n in enumerate(request.nodes)
        ]
        return rspec.write_manifest(replace(request, nodes=nodes_after))


@pytest.fixture
def moving(monkeypatch: pytest.MonkeyPatch) -> Moving:
    backend = Moving()
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: backend)
    return backend


def test_release_takes_nodes_out_of_the_records_and_remembers_them(moving: Moving) -> None:
    exp, _ = made("rel", SLURM_PROFILE, {"computeNodeCount": "2"})
    events: list[Event] = []
    nodeops.release(exp, ["node-1"], collect(events))
    assert moving.released == [["node-1"]]
    after = experiments.load("rel")
    assert after.state is State.READY and after.released == ["node-1"]
    names = [n.client_id for n in rspec.parse_manifest(after.manifest()).nodes]
    assert names == ["head", "node-0"]
    assert "node-1" not in (exp.inventory_dir / "hosts.yml").read_text()
    assert "node-1" not in exp.ssh_config_path.read_text()
    pins = exp.inventory_dir / "known_hosts"
    assert known_hosts.pinned(pins, "127.0.0.1", 2202) == [], "the released node's key is kept"
    assert known_hosts.pinned(pins, "127.0.0.1", 2201) == ["ssh-ed25519 AAAAkey-node-0"]
    assert events[-1].topic == "release" and events[-1].kind is Kind.END
    # A released node is "missing" to the testbed's power states.
    assert nodeops.states(after)["node-1"] == "missing"


@pytest.mark.parametrize(("state", "word"), [("lent", "lent"), ("lending", "missing"),
                                             ("returning", "missing")])  # fmt: skip
def test_a_released_node_whose_machine_is_lent_is_lent(
    moving: Moving, state: LoanState, word: str
) -> None:
    """Only a finished loan says "lent": a lend or give-back half done is the lending's to
    finish, and the machine is not where the loan says yet."""
    exp, _ = made("lnt", SLURM_PROFILE, {"computeNodeCount": "2"})
    nodeops.release(exp, ["node-1"])
    LoanBook(exp.loans_path).put(Loan("node-1", "other", "lent-node-1", state))
    assert nodeops.states(experiments.load("lnt"))["node-1"] == word


def test_release_refuses_unknown_released_and_last_nodes(moving: Moving) -> None:
    exp, _ = made("relx", SLURM_PROFILE, {"computeNodeCount": "1"})
    with pytest.raises(NotFoundError, match=r"has no node 'nodex'"):
        nodeops.release(exp, ["nodex"])
    with pytest.raises(InputError, match=r"head, node-0 are the last nodes of experiment 'relx'"):
        nodeops.release(exp, ["head", "node-0"])
    nodeops.release(exp, ["node-0"])
    with pytest.raises(NotFoundError, match=r"no node 'node-0' \(node-0 already released\)"):
        nodeops.release(experiments.load("relx"), ["node-0"])
    with pytest.raises(InputError, match=r"head is the last node"):
        nodeops.release(experiments.load("relx"), ["head"])
    assert moving.released == [["node-0"]]


def test_allocate_brings_a_released_node_back_with_its_addresses(moving: Moving) -> None:
    exp, request = made("back", SLURM_PROFILE, {"computeNodeCount": "2"})
    nodeops.release(exp, ["node-1"])
    nodeops.allocate(experiments.load("back"), ["node-1"])
    asked, nodes = moving.allocated[0]
    assert nodes == ["node-1"]
    assert asked.node("node-1").interfaces == request.node("node-1").interfaces
    after = experiments.load("back")
    assert after.released == [] and after.state is State.READY
    manifest = rspec.parse_manifest(after.manifest())
    assert [n.client_id for n in manifest.nodes] == ["head", "node-0", "node-1"]
    assert "node-1" in (exp.inventory_dir / "hosts.yml").read_text()


def test_allocate_refuses_present_and_unknown_nodes_before_anything(moving: Moving) -> None:
    exp, _ = made("alx", SLURM_PROFILE, {"computeNodeCount": "1"})
    with pytest.raises(InputError, match=r"already holds node 'node-0'"):
        nodeops.allocate(exp, ["node-0"])
    with pytest.raises(NotFoundError, match=r"request of experiment 'alx' has no node 'lent-0'"):
        nodeops.allocate(exp, ["lent-0"])
    with pytest.raises(NotFoundError, match=r"--like 'nodex'"):
        nodeops.allocate(exp, ["lent-0"], like="nodex")
    with pytest.raises(InputError, match=r"node name 'Bad_Name' is invalid"):
        nodeops.allocate(exp, ["Bad_Name"], like="node-0")
    assert moving.allocated == []
    assert experiments.load("alx").clones == {}


def test_allocate_like_copies_the_node_onto_its_lans_at_a_free_address(moving: Moving) -> None:
    exp, request = made("like", SLURM_PROFILE, {"computeNodeCount": "2"})
    nodeops.release(exp, ["node-1"])  # its address stays reserved for its return
    nodeops.allocate(experiments.load("like"), ["lent-0"], like="node-0")
    asked, nodes = moving.allocated[0]
    assert nodes == ["lent-0"]
    copy, original = asked.node("lent-0"), request.node("node-0")
    assert (copy.disk_image, copy.hardware_type, copy.execute) == (
        original.disk_image,
        original.hardware_type,
        original.execute,
    )
    used = {i.ip for n in request.nodes for i in n.interfaces}
    [iface] = copy.interfaces
    assert iface.ip not in used and iface.netmask == original.interfaces[0].netmask
    lan = next(lk for lk in asked.links if original.interfaces[0].client_id in lk.interface_refs)
    assert iface.client_id in lan.interface_refs
    after = experiments.load("like")
    assert after.clones == {"lent-0": "node-0"}
    assert "lent-0" in (exp.inventory_dir / "hosts.yml").read_text()


def test_a_copy_survives_a_later_modify_and_a_released_node_stays_out(moving: Moving) -> None:
    """`ptc modify` re-renders the profile: the copy stays, the released node is not re-added."""
    exp, _ = made("keep", SLURM_PROFILE, {"computeNodeCount": "2"})
    nodeops.release(exp, ["node-1"])
    nodeops.allocate(experiments.load("keep"), ["lent-0"], like="node-0")
    modified: list[Any] = []

    def modify(exp: Experiment, request: Topology, change: Any) -> bytes:
        modified.append(change)
        return exp.manifest()

    moving.modify = modify  # type: ignore[attr-defined]
    _, change = lifecycle.modify("keep", {})
    assert change.empty, change.describe()
    replaced: list[Topology] = []

    def replace_nodes(exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        replaced.append(request)
        return exp.manifest()

    moving.replace_nodes = replace_nodes  # type: ignore[attr-defined]
    nodeops.reload(experiments.load("keep"), ["lent-0"])
    assert [n.client_id for n in replaced[0].nodes] == ["head", "node-0", "lent-0"]


def test_allocate_on_a_full_testbed_is_refused_naming_the_free_count(
    moving: Moving, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp, request = made("full", SLURM_PROFILE, {"computeNodeCount": "1"})
    capacity.set_machines(2)
    held = [capacity.Machine("full", n.client_id, "running") for n in request.nodes]
    monkeypatch.setattr(capacity, "listing", lambda testbed: held)
    before = exp.manifest()
    with pytest.raises(capacity.NoMachines, match=r"has 0 free of 2"):
        nodeops.allocate(exp, ["lent-0"], like="node-0")
    assert moving.allocated == []
    after = experiments.load("full")
    assert after.manifest() == before and after.clones == {} and after.state is State.READY


def test_local_release_removes_the_container_and_tells_the_others(
    fake: tuple[FakePodman, Wiring],
) -> None:
    podman, wiring = fake
    exp, request = made("lrel", SLURM_PROFILE, {"computeNodeCount": "2"})
    boot(podman, exp, request)
    (exp.node_dir("node-1") / "geni").mkdir(parents=True)
    nodeops.release(exp, ["node-1"])
    assert "ptc-lrel-node-1" not in podman.containers
    assert not exp.node_dir("node-1").exists()
    assert {"node-1"} in wiring.released
    for node in ("head", "node-0"):
        hosts = podman.containers[f"ptc-lrel-{node}"].hosts
        assert "node-0" in hosts and "node-1" not in hosts
    assert nodeops.states(experiments.load("lrel")) == {
        "head": "running",
        "node-0": "running",
        "node-1": "missing",
    }


def test_the_cli_releases_and_allocates_with_json(moving: Moving) -> None:
    from elastic.cli import node as node_cli

    made("clim", SLURM_PROFILE, {"computeNodeCount": "2"})
    runner = CliRunner()
    got = runner.invoke(node_cli.app, ["release", "clim", "node-1", "--json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["nodes"]["node-1"] == "missing"
    got = runner.invoke(node_cli.app, ["allocate", "clim", "lent-0", "--like", "node-0", "--json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["nodes"]["lent-0"] == "running"


def test_a_hold_refuses_power_off_naming_the_holder_and_ends_with_it(
    fake: tuple[FakePodman, Wiring],
) -> None:
    podman, _ = fake
    exp, request = made("held", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request)
    with power_hold.hold(exp, "deploy"):
        with pytest.raises(power_hold.PowerHeld, match=r"held up by deploy \(pid \d+\)"):
            nodeops.power_off(exp, ["node-0"])
        assert podman.verbs() == [], "nothing was stopped under the hold"
        nodeops.power_on(exp, ["node-0"])  # powering on is never held back
    nodeops.power_off(exp, ["node-0"])
    assert podman.verbs() == [("stop", "ptc-held-node-0")]
    assert not list(exp.power_holds_dir.glob("*.json"))


def test_nested_holds_of_one_process_each_hold_until_their_own_end(
    fake: tuple[FakePodman, Wiring],
) -> None:
    podman, _ = fake
    exp, request = made("nested", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request)
    with power_hold.hold(exp, "fake EC2 instance"):
        with power_hold.hold(exp, "verify"):
            assert len(power_hold.holders(exp)) == 2
        # the inner hold's end leaves the outer one's file alone
        assert power_hold.holders(exp) == [f"fake EC2 instance (pid {os.getpid()})"]
        with pytest.raises(power_hold.PowerHeld):
            nodeops.power_off(exp, ["node-0"])
    assert power_hold.holders(exp) == []


def test_a_dead_holder_holds_nothing(fake: tuple[FakePodman, Wiring]) -> None:
    podman, _ = fake
    exp, request = made("dead", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request)
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    atomic.write_json(
        exp.power_holds_dir / "gone.json", {"pid": int(gone.stdout), "started": 1, "what": "deploy"}
    )
    (exp.power_holds_dir / "torn.json").write_text("{")
    assert power_hold.holders(exp) == []
    nodeops.power_off(exp, ["node-0"])
    assert podman.verbs() == [("stop", "ptc-dead-node-0")]
    assert not list(exp.power_holds_dir.iterdir()), "dead and torn holds are cleared"


def test_awake_powers_on_the_stopped_nodes_and_holds_them_up_for_the_block(
    fake: tuple[FakePodman, Wiring],
) -> None:
    podman, _ = fake
    exp, request = made("awake", SLURM_PROFILE, {"computeNodeCount": "2"})
    boot(podman, exp, request, node_1=False)
    with nodeops.awake(exp, "deploy") as woken:
        assert woken == ["node-1"]
        assert nodeops.states(exp)["node-1"] == "running"
        with pytest.raises(power_hold.PowerHeld):
            nodeops.power_off(exp, ["node-1"])
    assert nodeops.states(exp)["node-1"] == "running", "left on: the partition settles it"
    nodeops.power_off(exp, ["node-1"])
    assert nodeops.states(exp)["node-1"] == "stopped"


def test_awake_waits_for_a_power_off_in_flight_and_powers_that_node_back_on(
    fake: tuple[FakePodman, Wiring],
) -> None:
    """A suspend that checked for holds just before a deploy's hold was written is still
    stopping its node: awake must not read that node as running and leave it to stop."""
    podman, _ = fake
    exp, request = made("flight", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request)
    podman.hold, podman.held_verb = threading.Event(), "stop"
    off = threading.Thread(target=nodeops.power_off, args=(exp, ["node-0"]))
    off.start()
    assert podman.holding.wait(30), "the power off never reached podman stop"
    woken: list[list[str]] = []

    def deploy() -> None:
        with nodeops.awake(exp, "deploy") as brought:
            woken.append(brought)
            woken.append([n for n, s in nodeops.states(exp).items() if s != "running"])

    during = threading.Thread(target=deploy)
    during.start()
    during.join(1.0)  # time for awake to read the states, were nothing stopping it
    assert not woken, "awake read the states while a power off was half-way"
    podman.hold.set()
    off.join(30)
    during.join(30)
    assert woken == [["node-0"], []], woken
    assert podman.verbs() == [("stop", "ptc-flight-node-0"), ("start", "ptc-flight-node-0")]


def test_a_verify_s_hold_waits_for_a_power_off_in_flight_and_sees_the_node_stopped(
    fake: tuple[FakePodman, Wiring],
) -> None:
    """A suspend that checked for holds just before a verify's hold was written is still
    stopping its node: the verify must read that node as stopped (and skip its checks), not
    as running and then find it gone."""
    podman, _ = fake
    exp, request = made("vflight", SLURM_PROFILE, {"computeNodeCount": "1"})
    boot(podman, exp, request)
    podman.hold, podman.held_verb = threading.Event(), "stop"
    off = threading.Thread(target=nodeops.power_off, args=(exp, ["node-0"]))
    off.start()
    assert podman.holding.wait(30), "the power off never reached podman stop"
    seen: list[dict[str, str]] = []

    def verify() -> None:
        with nodeops.held(exp, "verify") as found:
            seen.append(found)
            with pytest.raises(power_hold.PowerHeld):
                nodeops.power_off(exp, ["node-0"])

    during = threading.Thread(target=verify)
    during.start()
    during.join(1.0)  # time for the hold to read the states, were nothing stopping it
    assert not seen, "the hold read the states while a power off was half-way"
    podman.hold.set()
    off.join(30)
    during.join(30)
    assert [found["node-0"] for found in seen] == ["stopped"], seen
    assert power_hold.holders(exp) == []


def test_under_a_provisioning_limit_nodes_power_on_in_parts_and_each_part_is_logged(
    fake: tuple[FakePodman, Wiring],
) -> None:
    podman, _ = fake
    exp, request = made("limited", SLURM_PROFILE, {"computeNodeCount": "3"})
    boot(podman, exp, request, node_0=False, node_1=False, node_2=False)
    capacity.set_machines(8)
    capacity.set_limits(2, None)
    nodeops.power_on(exp, ["node-0", "node-1", "node-2"])
    starts = [name for verb, name in podman.verbs() if verb == "start"]
    assert starts == ["ptc-limited-node-0", "ptc-limited-node-1", "ptc-limited-node-2"]
    log = provisioning.history()
    assert [r["nodes"] for r in log] == [["node-0", "node-1"], ["node-2"]]
    assert all(r["experiment"] == "limited" and r["action"] == "power on" for r in log)
    assert nodeops.states(exp) == dict.fromkeys(["head", "node-0", "node-1", "node-2"], "running")


def test_release_is_refused_while_a_deploy_holds_the_nodes(moving: Moving) -> None:
    exp, _ = made("relhold", SLURM_PROFILE, {"computeNodeCount": "1"})
    with power_hold.hold(exp, "deploy"), pytest.raises(power_hold.PowerHeld, match=r"release"):
        nodeops.release(exp, ["node-0"])
    assert moving.released == []
    nodeops.release(exp, ["node-0"])
    assert moving.released == [["node-0"]]


def test_a_parked_node_is_the_experiment_s_to_take_back_and_a_deploy_brings_it_back(
    moving: Moving,
) -> None:
    """An elastic partition parks its idle nodes (release with park): their machines are free,
    the experiment keeps the right to them, and `awake` (a deploy) allocates them again. A
    parked node lent away (unparked) is plainly released and stays out."""
    exp, _ = made("park", SLURM_PROFILE, {"computeNodeCount": "3"})
    nodeops.release(exp, ["node-1", "node-2"], park=True)
    after = experiments.load("park")
    assert after.parked == ["node-1", "node-2"] and after.released == ["node-1", "node-2"]
    assert nodeops.states(after)["node-1"] == "parked"
    nodeops.unpark(after, ["node-2"])
    after = experiments.load("park")
    assert after.parked == ["node-1"] and nodeops.states(after)["node-2"] == "missing"
    with pytest.raises(InputError, match="has not parked node-2"):
        nodeops.unpark(after, ["node-2"])
    after.facts_dir.mkdir(parents=True, exist_ok=True)
    for node in ("node-0", "node-1"):  # the fact cache of the last deploy
        (after.facts_dir / node).write_text("{}")
    with nodeops.awake(after, "test") as brought:
        assert brought == ["node-1"]
    # the fresh disk's facts are not the old disk's: the cache of node-1 is gone, node-0's kept
    assert sorted(p.name for p in after.facts_dir.iterdir()) == ["node-0"]
    assert [nodes for _, nodes in moving.allocated] == [["node-1"]]
    back = experiments.load("park")
    assert back.parked == [] and back.released == ["node-2"]
    names = [n.client_id for n in rspec.parse_manifest(back.manifest()).nodes]
    assert sorted(names) == ["head", "node-0", "node-1"]


def test_a_copy_cannot_be_parked(moving: Moving) -> None:
    exp, _ = made("parkc", SLURM_PROFILE, {"computeNodeCount": "1"})
    nodeops.allocate(exp, ["extra"], like="node-0")
    with pytest.raises(InputError, match="'extra' of 'parkc' is a copy"):
        nodeops.release(experiments.load("parkc"), ["extra"], park=True)
    assert moving.released == []
