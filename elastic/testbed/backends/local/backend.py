"""The local testbed backend: one systemd-booted container per RSpec node, wired like CloudLab.

What a node gets, mirroring a CloudLab node:
- hostname = client_id, eth0 on podman's control network, SSH published on 127.0.0.1;
- ethN per RSpec interface, on the experiment's own LAN bridges (``network``);
- /etc/hosts naming every node by its LAN address;
- ``geni-get`` answering key / manifest / client_id / param from /var/lib/ptc-geni;
- the profile repository at ``node_paths.REPOSITORY``, blockstores as directories at their mount points;
- the profile's Execute services, run by systemd once the node is wired.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from elastic import atomic, cluster_groups, paths
from elastic.errors import InputError, PtcError, TestbedError
from elastic.events import OnEvent, Reporter, Steps
from elastic.profile import rspec
from elastic.profile.topology import Login, Node, Topology
from elastic.testbed import groups, known_hosts, membership
from elastic.testbed.backends.base import Backend, Capabilities
from elastic.testbed.backends.local import (
    DOMAIN,
    capacity,
    control,
    etc_hosts,
    features,
    fileserver,
    host_limits,
    image,
    links,
    network,
    podman,
    privileges,
    provisioning,
    ssh_ports,
)
from elastic.testbed.backends.local.control import service as control_service
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment

GENI_DIR = "/var/lib/ptc-geni"
CONTROL_MOUNT = str(control.MOUNT)  # where the controller sees the control service
BOOT_TIMEOUT = 120.0
EXECUTE_TIMEOUT = 300.0
STOP_GRACE = 10  # seconds systemd has to shut a node down before podman kills it


class Started(NamedTuple):
    pid: int  # the container's init, for entering its network namespace
    port: int  # the SSH port published on 127.0.0.1


class LocalBackend(Backend):
    name = "local"
    capabilities: ClassVar[Capabilities] = Capabilities(
        host_machines=True,
        control_service=True,  # nodes mount the host's control service (``control``)
        pins_host_keys=True,
        disk_images=image.KINDS,  # the first is the default
        moves_nodes=True,
        sleeping_nodes=True,
    )

    # -- the testbed's own machinery (class-level hooks of the Backend protocol) ------------

    @staticmethod
    def reserved(experiment: str, nodes: Sequence[str]) -> AbstractContextManager[None]:
        return capacity.reserved(experiment, nodes)

    @staticmethod
    def provisioned(
        experiment: str,
        action: str,
        nodes: list[str],
        on_event: OnEvent | None,
        run: Callable[[list[str]], None],
    ) -> None:
        bounds = provisioning.limits()
        for part in provisioning.parts(nodes, bounds, action):
            with provisioning.slot(experiment, action, part, on_event, bounds=bounds):
                run(part)

    @staticmethod
    def prepare_services(exp: Experiment) -> None:
        # What nodes mount exists before any node does: the credential, the share filesystem.
        control_service.prepare(exp)
        fileserver.prepare(exp)

    @staticmethod
    def start_services(exp: Experiment) -> None:
        control_service.start(exp)
        fileserver.start(exp)

    @staticmethod
    def stop_services(exp: Experiment) -> None:
        # A FAKE EC2 region first: its realiser would otherwise make machines meanwhile.
        from elastic.testbed.backends.local.fake_ec2 import service as fake_ec2

        fake_ec2.stop(exp)
        control_service.stop(exp)
        fileserver.stop(exp)

    def __init__(self, site: str | None = None, on_event: OnEvent | None = None) -> None:
        if site:
            raise InputError(f"the local testbed has no sites (got --site {site!r})")
        self.on_event = on_event
        self.report = Reporter("testbed", on_event)

    # -- Backend protocol -------------------------------------------------------------------

    def preflight(self) -> None:
        tools = (
            "podman",
            "runc",
            "debootstrap",
            "ip",
            "nsenter",
            "ssh-keygen",
            "mkfs.ext4",
            "mount",
        )
        missing = [t for t in tools if shutil.which(t) is None]
        if missing:
            raise TestbedError(f"the local testbed needs {', '.join(missing)}: run `make setup`")
        if os.geteuid() != 0:
            raise TestbedError("the local testbed needs root (network namespaces, node cgroups)")
        host_limits.ensure_inotify_instances(self.report)

    def create(self, exp: Experiment, request: Topology) -> bytes:
        features.check(request, self.report)  # refuse what cannot be built, before building
        ref = self._image(exp)
        wires = network.plan(request)
        links.plan(request, wires)  # a shaping the testbed cannot do fails before anything exists
        try:
            return self._create(exp, request, ref, wires)
        except BaseException:
            self.delete(exp)
            raise

    def _image(self, exp: Experiment) -> str:
        """The experiment's disk image, built if missing; records older than the choice: bare."""
        return image.ensure(on_event=self.on_event, kind=exp.image or image.BARE)

    def claim_name(self, name: str) -> None:
        # Namespaces and container names are machine-wide while experiments live under one
        # PTC_HOME: a same-named experiment of another home must be refused, never cleaned up.
        taken = podman.containers_of(name)
        if network.namespace_exists(name):
            taken.insert(0, f"network namespace {network.namespace(name)}")
        if taken:
            raise InputError(
                f"experiment name {name!r} is in use on this machine outside this PTC_HOME "
                f"({', '.join(taken)}); choose another --name, or take it down from its own home"
            )

    def delete(self, exp: Experiment) -> None:
        names = podman.containers_of(exp.name)
        if names:
            podman.run("rm", "--force", "--time", "0", *names, check=False)
        left = podman.containers_of(exp.name)
        for name in set(names) - set(left):
            privileges.release_cgroup(name)
        if left:
            raise TestbedError(f"could not remove containers of {exp.name!r}: {', '.join(left)}")
        fileserver.release(exp)  # nothing holds the share filesystem any more
        links.stop(exp.dir)
        links.stop_strays(exp.name)
        network.delete_namespace(exp.name)

    def status(self, exp: Experiment) -> dict[str, str]:
        states: dict[str, str] = {}
        manifest = rspec.parse_manifest(exp.manifest()) if exp.manifest_path.exists() else None
        nodes = [n.client_id for n in manifest.nodes] if manifest else []
        found = podman.states_of(exp.name) if nodes else {}
        for node in nodes:
            states[node] = _power_word(found.get(podman.container_name(exp.name, node)))
        for emulator in links.check(exp.dir):
            if not emulator.running and emulator.node in states:
                states[emulator.node] += (
                    f", link emulator of {emulator.device} not running (pid {emulator.pid})"
                )
        return states

    # -- node power: a powered-off node is a stopped container ----------------------------

    def power_states(self, exp: Experiment) -> dict[str, str]:
        manifest = rspec.parse_manifest(exp.manifest())
        found = podman.states_of(exp.name)
        return {
            n.client_id: _power_word(found.get(podman.container_name(exp.name, n.client_id)))
            for n in manifest.nodes
        }

    def power_off(self, exp: Experiment, nodes: list[str]) -> None:
        """``podman stop`` each running node: systemd shuts down within ``STOP_GRACE``, the
        container's disk stays, its memory and CPU go back to the host."""
        steps = Steps(self.report, f"powering off {', '.join(nodes)}", len(nodes))
        for node in nodes:
            name, state = _container(exp, node, "power off")
            if state == "running":
                steps.status(f"stopping {node}")
                started = time.monotonic()
                with _step("power off", node, "podman stop"):
                    podman.run("stop", "--time", str(STOP_GRACE), name)
                self._timed(node, "stop", started)
                self._unwire(exp, node)
            steps.advance(f"{node} {'off' if state == 'running' else 'was already ' + state}")
        steps.finish(f"{len(nodes)} off")

    def power_on(self, exp: Experiment, nodes: list[str]) -> None:
        """``podman start`` each stopped node, then wire it as at creation.

        The container comes back in a new network namespace, so its LAN interfaces and any
        link shaping are attached again; its disk (host keys, /etc/hosts, the profile's
        Execute status) is the one it had. A node that fails a step is stopped again, so a
        retry starts from a clean stop."""
        manifest = rspec.parse_manifest(exp.manifest())
        xml = exp.manifest()
        by_id = {n.client_id: n for n in manifest.nodes}
        wires = network.plan(manifest)
        fileserver.prepare(exp)  # what the nodes bind-mount, mounted again after a host restart
        steps = Steps(self.report, f"powering on {', '.join(nodes)}", len(nodes))
        for node in nodes:
            _, state = _container(exp, node, "power on")
            if state == "running":
                steps.advance(f"{node} was already running")
                continue
            try:
                self._power_on(exp, by_id[node], manifest, wires, xml, steps)
            except BaseException:
                self._stop_quietly(exp, node)
                raise
            steps.advance(f"{node} on")
        steps.finish(f"{len(nodes)} on")

    def _power_on(
        self,
        exp: Experiment,
        node: Node,
        manifest: Topology,
        wires: list[network.Wire],
        xml: bytes,
        steps: Steps,
    ) -> None:
        name = podman.container_name(exp.name, node.client_id)
        login = node.login
        assert login is not None  # the local testbed's manifest gives every node one
        steps.status(f"starting {node.client_id}")
        started = time.monotonic()
        with _step("power on", node.client_id, "podman start"):
            created = podman.inspect(name)
            for target in privileges.mask_targets(created or {}):
                target.mkdir(parents=True, exist_ok=True)
            try:
                podman.run("start", name)
            except TestbedError as err:
                if "address already in use" not in str(err):
                    raise
                raise TestbedError(
                    f"its SSH port {login.hostname}:{login.port} is held by another process "
                    f"of this host (`ss -ltnp 'sport = :{login.port}'` names it); stop that "
                    f"process, or `ptc node reload` gives the node a new disk and port"
                ) from err
            info = podman.inspect(name)
            if info is None or not info["State"]["Running"]:
                raise TestbedError(f"container {name} did not start")
            pid = int(info["State"]["Pid"])
            port = int(info["NetworkSettings"]["Ports"]["22/tcp"][0]["HostPort"])
        if port != login.port:
            raise TestbedError(
                f"node {node.client_id}: power on: its SSH port moved from {login.port} to "
                f"{port}, which the manifest and inventory do not say"
            )
        self._timed(node.client_id, "start", started)

        started = time.monotonic()
        mine = [w for w in wires if w.node == node.client_id]
        with _step("power on", node.client_id, "wiring"):
            self._unwire(exp, node.client_id)  # whatever an unclean stop left in the namespace
            self._wire(exp, manifest, mine, {node.client_id: Started(pid, port)})
        self._timed(node.client_id, "wire", started)

        steps.status(f"waiting for sshd on {node.client_id}")
        started = time.monotonic()
        with _step("power on", node.client_id, "sshd"):
            _wait_for_ssh(login.hostname, login.port, node.client_id)
        with _step("power on", node.client_id, "host keys"):
            found = known_hosts.public_keys(
                podman.run("exec", name, "sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub").stdout,
                node.client_id,
            )
        pinned = known_hosts.pinned(exp.inventory_dir / "known_hosts", login.hostname, login.port)
        if sorted(found) != sorted(pinned):
            raise TestbedError(
                f"node {node.client_id}: power on: its host keys are not the ones pinned when "
                f"it was made, so it is refused and stopped again "
                f"(`ptc node reload {exp.name} {node.client_id}` gives it a fresh disk)"
            )
        self._timed(node.client_id, "sshd", started)

        started = time.monotonic()
        with _step("power on", node.client_id, "ready"):
            # The manifest may have changed while the node was off (``ptc modify``).
            current = podman.exec_(name, "cat", "/etc/hosts").stdout
            hosts = etc_hosts.replace_block(current, etc_hosts.block(manifest, wires))
            if hosts != current:
                _write_in(name, "/etc/hosts", hosts, mode="644")
            geni = self._geni_dir(exp, node.client_id)
            atomic.write_bytes(geni / "manifest.xml", xml)
            atomic.write_text(geni / "ready", f"{time.time()}\n")
            # The Execute services ran once on this disk; the node's own unit skips them now.
            self._wait_for_execute(exp, [node])
        self._timed(node.client_id, "ready", started)

    def _unwire(self, exp: Experiment, node: str) -> None:
        """Take out what a stopped node leaves in the experiment's namespace: its shaping
        detours and emulators, any veth end its namespace did not take along; unmark ready."""
        links.release(exp.dir, exp.name, {node})
        manifest = rspec.parse_manifest(exp.manifest())
        ns = network.namespace(exp.name)
        for wire in network.plan(manifest):
            if wire.node == node:
                device = links.devices(exp.name, wire)["node"]
                subprocess.run(["ip", "-n", ns, "link", "delete", device],
                               capture_output=True, check=False)  # fmt: skip
        (self._geni_dir(exp, node) / "ready").unlink(missing_ok=True)

    def _stop_quietly(self, exp: Experiment, node: str) -> None:
        podman.run(
            "stop", "--time", str(STOP_GRACE), podman.container_name(exp.name, node), check=False
        )
        self._unwire(exp, node)

    def _timed(self, node: str, step: str, started: float) -> None:
        seconds = time.monotonic() - started
        self.report.status(f"{node}: {step} {seconds:.2f}s", node=node, step=step, seconds=seconds)

    def modify(self, exp: Experiment, request: Topology, change: Change) -> bytes:
        """Start the added nodes and wire them in, then release the removed ones.

        The added nodes must come up completely (SSH, Execute services) before anything on the
        running nodes is touched; if they do not, they are removed again and the experiment is
        as it was."""
        features.check(request, self.report, {n.client_id for n in change.added}, links=False)
        current = rspec.parse_manifest(exp.manifest())
        # Bridges are named by the manifest's link order; keep it.
        by_id = {lk.client_id: lk for lk in request.links}
        request = replace(request, links=[by_id[lk.client_id] for lk in current.links])
        wires = network.plan(request)
        links.plan(request, wires)
        started = self._add_nodes(exp, request, change.added, wires) if change.added else {}
        try:
            running = {n.client_id: n for n in current.nodes}
            manifest = replace(request, nodes=[
                running[n.client_id] if n.client_id in running
                else self._manifest_node(exp, n, started[n.client_id].port)
                for n in request.nodes
            ])  # fmt: skip
            xml = rspec.write_manifest(manifest)
            added = [n for n in manifest.nodes if n.client_id in started]
            if added:
                self._ready_added(exp, manifest, added, wires, xml)
        except BaseException:
            self._remove_nodes(exp, set(started))
            raise

        # The new nodes are good: now tell the running ones, and release the removed ones.
        self._remove_nodes(exp, {n.client_id for n in change.removed})
        hosts = etc_hosts.block(manifest, wires)
        for node in manifest.nodes:
            if node.client_id in started:
                continue
            name = podman.container_name(exp.name, node.client_id)
            # A powered-off node gets the new block when it is powered on.
            if _power_state(podman.inspect(name)) == "running":
                current_hosts = podman.exec_(name, "cat", "/etc/hosts").stdout
                _write_in(
                    name, "/etc/hosts", etc_hosts.replace_block(current_hosts, hosts), mode="644"
                )
            geni = self._geni_dir(exp, node.client_id)
            atomic.write_json(geni / "params.json", _geni_params(exp, request))
            atomic.write_bytes(geni / "manifest.xml", xml)
        return xml

    def release(self, exp: Experiment, nodes: list[str]) -> bytes:
        """Remove the nodes' containers and host-side state (their machines are free again),
        then tell the remaining nodes, as `ptc modify` does when it removes nodes."""
        current = rspec.parse_manifest(exp.manifest())
        gone = [current.node(n) for n in nodes]
        return self.modify(exp, membership.without(current, nodes), Change(added=[], removed=gone))

    def allocate(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        """Start the nodes from the image and wire them in, as `ptc modify` adds nodes: they
        come up completely before the running nodes learn of them, or are removed again."""
        current = {n.client_id for n in rspec.parse_manifest(exp.manifest()).nodes}
        others = [n.client_id for n in request.nodes if n.client_id not in current | set(nodes)]
        request = membership.without(request, others)
        added = [request.node(n) for n in nodes]
        return self.modify(exp, request, Change(added=added, removed=[]))

    def replace_nodes(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        """Remove the nodes' containers and disks, then start fresh ones in their place.

        A testbed's reload gives a node a new disk under the same name and addresses; so do
        these: the experiment's shared directory (the /home share) is all that survives."""
        current = rspec.parse_manifest(exp.manifest())
        by_id = {lk.client_id: lk for lk in request.links}
        request = replace(request, links=[by_id[lk.client_id] for lk in current.links])
        wires = network.plan(request)
        links.plan(request, wires)
        fresh = [n for n in request.nodes if n.client_id in nodes]
        self.report.status(f"removing {', '.join(nodes)}")
        self._remove_nodes(exp, set(nodes))
        started = self._add_nodes(exp, request, fresh, wires)
        fresh_by_id = {n.client_id: n for n in fresh}
        manifest = replace(current, nodes=[
            self._manifest_node(exp, fresh_by_id[c.client_id], started[c.client_id].port)
            if c.client_id in started else c
            for c in current.nodes
        ])  # fmt: skip
        xml = rspec.write_manifest(manifest)
        added = [n for n in manifest.nodes if n.client_id in started]
        self._ready_added(exp, manifest, added, wires, xml)
        for node in manifest.nodes:  # the others' copy of the manifest has the new SSH ports
            atomic.write_bytes(self._geni_dir(exp, node.client_id) / "manifest.xml", xml)
        return xml

    def _add_nodes(
        self, exp: Experiment, request: Topology, nodes: list[Node], wires: list[network.Wire]
    ) -> dict[str, Started]:
        """Start and wire the added nodes; on failure, remove whatever of them started."""
        ref = self._image(exp)
        names = {n.client_id for n in nodes}
        try:
            steps = Steps(self.report, "adding nodes", len(nodes))
            started = self._start_nodes(exp, nodes, ref, request, steps)
            steps.finish()
            self._wire(exp, request, [w for w in wires if w.node in names], started)
        except BaseException:
            self._remove_nodes(exp, names)
            raise
        return started

    def _ready_added(
        self,
        exp: Experiment,
        manifest: Topology,
        added: list[Node],
        wires: list[network.Wire],
        xml: bytes,
    ) -> None:
        steps = Steps(self.report, "preparing", len(added) * 2 + 1)
        self._prepare_nodes(exp, added, manifest, wires, xml, steps)
        steps.status("running the new nodes' Execute services")
        self._wait_for_execute(exp, added)
        steps.advance()
        steps.finish()

    # -- creation ---------------------------------------------------------------------------

    def _create(
        self, exp: Experiment, request: Topology, ref: str, wires: list[network.Wire]
    ) -> bytes:
        network.create_namespace(exp.name, len(request.links))
        manifest = Topology(nodes=[], links=request.links, parameters=request.parameters)

        steps = Steps(self.report, "starting nodes", len(request.nodes) * 3 + 1)
        started = self._start_nodes(exp, request.nodes, ref, request, steps)
        for node in request.nodes:
            manifest.nodes.append(self._manifest_node(exp, node, started[node.client_id].port))
        self._wire(exp, request, wires, started)
        xml = rspec.write_manifest(manifest)
        atomic.write_bytes(exp.manifest_path, xml)
        self._prepare_nodes(exp, manifest.nodes, manifest, wires, xml, steps)
        steps.status("running the profile's Execute services")
        self._wait_for_execute(exp, manifest.nodes)
        steps.advance()
        steps.finish(f"{len(request.nodes)} nodes ready")
        return xml

    def _start_nodes(
        self,
        exp: Experiment,
        nodes: list[Node],
        ref: str,
        request: Topology,
        steps: Steps,
    ) -> dict[str, Started]:
        """Start a container per node."""
        fileserver.prepare(exp)  # mounted again if the host restarted since
        shared = exp.shared_dir
        started: dict[str, Started] = {}
        for node in nodes:
            steps.status(f"starting {node.client_id}")
            started[node.client_id] = self._start(
                exp, node, ref, shared, _geni_params(exp, request)
            )
            steps.advance()
        return started

    def _wire(
        self,
        exp: Experiment,
        request: Topology,
        wires: list[network.Wire],
        started: dict[str, Started],
    ) -> None:
        shaped = links.plan(request, wires)
        detoured = {s.wire.interface for s in shaped}
        for wire in wires:
            network.attach(
                exp.name, wire, started[wire.node].pid, bridge=wire.interface not in detoured
            )
        links.apply(exp.dir, exp.name, shaped, {n: s.pid for n, s in started.items()})

    def _prepare_nodes(
        self,
        exp: Experiment,
        nodes: list[Node],
        manifest: Topology,
        wires: list[network.Wire],
        xml: bytes,
        steps: Steps,
    ) -> None:
        """Name every node in /etc/hosts, let the experiment key in, wait for sshd, mark ready."""
        hosts = etc_hosts.block(manifest, wires)
        public_key = exp.key_path.with_suffix(".pub").read_text()
        for node in nodes:
            name = podman.container_name(exp.name, node.client_id)
            _write_in(name, "/etc/hosts", etc_hosts.BASE + hosts, mode="644")
            _write_in(name, "/root/.ssh/authorized_keys", public_key, mode="600")
            steps.advance()
        for node in nodes:
            steps.status(f"waiting for sshd on {node.client_id}")
            assert node.login is not None
            _wait_for_ssh(node.login.hostname, node.login.port, node.client_id)
            # sshd answers once its host keys exist: read them from the container (not over
            # the network) and pin them before anyone connects.
            keys = podman.run(
                "exec", podman.container_name(exp.name, node.client_id),
                "sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub",
            ).stdout  # fmt: skip
            known_hosts.pin(
                exp.inventory_dir / "known_hosts",
                node.login.hostname,
                node.login.port,
                known_hosts.public_keys(keys, node.client_id),
            )
            geni = self._geni_dir(exp, node.client_id)
            atomic.write_bytes(geni / "manifest.xml", xml)
            atomic.write_text(geni / "ready", f"{time.time()}\n")
            steps.advance()

    def _remove_nodes(self, exp: Experiment, nodes: set[str]) -> None:
        """Remove nodes' containers (their LAN veths go with them) and their host state."""
        names = [podman.container_name(exp.name, n) for n in sorted(nodes)]
        names = [n for n in names if podman.inspect(n) is not None]
        if names:
            podman.run("rm", "--force", "--time", "0", *names)
        for name in names:
            privileges.release_cgroup(name)
        links.release(exp.dir, exp.name, nodes)
        for node in nodes:
            shutil.rmtree(exp.node_dir(node), ignore_errors=True)

    def _start(
        self, exp: Experiment, node: Node, ref: str, shared: Path, params: dict[str, str]
    ) -> Started:
        name = podman.container_name(exp.name, node.client_id)
        geni = self._geni_dir(exp, node.client_id)
        atomic.write_text(geni / "client_id", node.client_id + "\n")
        atomic.write_text(geni / "slice_urn", f"urn:publicid:IDN+{DOMAIN}+slice+{exp.name}\n")
        atomic.write_json(geni / "params.json", params)
        atomic.write_text(geni / "key", exp.key_path.read_text(), mode=0o600)
        atomic.write_bytes(
            geni / "execute.list", b"".join(s.command.encode() + b"\0" for s in node.execute)
        )
        (geni / "ready").unlink(missing_ok=True)
        exp.control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        node_groups = groups.node_groups(node)
        args = [
            "run",
            "--detach",
            "--name",
            name,
            "--hostname",
            node.client_id,
            "--label",
            f"{podman.EXPERIMENT_LABEL}={exp.name}",
            "--label",
            f"{podman.NODE_LABEL}={node.client_id}",
            *capacity.label_args(),  # the machine it takes from the testbed's count
            *privileges.container_args(),
            *privileges.cgroup_args(name),
            *privileges.repository_args(
                paths.REPO_ROOT,
                [paths.REPO_ROOT / "state", paths.home(), paths.image_cache_dir()],
            ),
            "--no-hosts",
            "--network",
            "podman",
            "--volume",
            f"{geni}:{GENI_DIR}:ro",
            "--volume",
            f"{shared}:{fileserver.SHARED_MOUNT}",
        ]
        if cluster_groups.SLURM_CONTROLLER in node_groups:
            # The control service's socket and credential, for the Slurm client's provisioner
            # (the elastic role runs it on the controller): a node that never asks the testbed
            # for power holds no credential that could.
            args += ["--volume", f"{exp.control_dir}:{CONTROL_MOUNT}:ro"]
        # the shares the experiment's file server exports, where the roles expect them
        args += fileserver.client_mounts(exp)
        for store in node.blockstores:
            if store.mount:
                host_dir = exp.node_dir(node.client_id) / "blockstores" / store.name
                host_dir.mkdir(parents=True, exist_ok=True)
                args += ["--volume", f"{host_dir}:{store.mount}"]
        with ssh_ports.allocated() as port:
            publish = ["--publish", f"{ssh_ports.HOST}:{port}:22"]
            try:
                podman.run(*args, *publish, ref, "/sbin/init")
            except TestbedError:
                # A directory a mask covers was removed between the check above and runc's
                # mount (someone's `rm -rf state` meanwhile): the container exists, created but
                # not started. Make the mount point again and start it, as a power on does.
                created = podman.inspect(name)
                missing = [t for t in privileges.mask_targets(created or {}) if not t.is_dir()]
                if created is None or not missing:
                    raise
                for target in missing:
                    target.mkdir(parents=True, exist_ok=True)
                podman.run("start", name)
        info = podman.inspect(name)
        if info is None or not info["State"]["Running"]:
            raise TestbedError(f"node {node.client_id}: container {name} did not start")
        return Started(
            pid=int(info["State"]["Pid"]),
            port=int(info["NetworkSettings"]["Ports"]["22/tcp"][0]["HostPort"]),
        )

    def _manifest_node(self, exp: Experiment, node: Node, port: int) -> Node:
        return replace(
            node,
            component_manager_id=f"urn:publicid:IDN+{DOMAIN}+authority+cm",
            component_id=f"urn:publicid:IDN+{DOMAIN}+node+{exp.name}-{node.client_id}",
            sliver_id=f"urn:publicid:IDN+{DOMAIN}+sliver+{exp.name}-{node.client_id}",
            login=Login(hostname="127.0.0.1", port=port, username="root"),
        )

    def _wait_for_execute(self, exp: Experiment, nodes: list[Node]) -> None:
        deadline = time.monotonic() + EXECUTE_TIMEOUT
        pending = [n.client_id for n in nodes if n.execute]
        while pending and time.monotonic() < deadline:
            for node in list(pending):
                proc = podman.exec_(
                    podman.container_name(exp.name, node),
                    "cat",
                    "/var/lib/ptc/execute.status",
                    check=False,
                )
                if proc.returncode == 0 and proc.stdout.strip():
                    pending.remove(node)
                    if proc.stdout.strip() != "0":
                        log = podman.exec_(
                            podman.container_name(exp.name, node),
                            "tail",
                            "-n",
                            "15",
                            "/var/log/ptc-execute.log",
                            check=False,
                        ).stdout
                        raise TestbedError(
                            f"node {node}: the profile's Execute service failed "
                            f"(status {proc.stdout.strip()}):\n{log}"
                        )
            if pending:
                time.sleep(0.5)
        if pending:
            raise TestbedError(
                f"Execute services still running after {EXECUTE_TIMEOUT:.0f}s on: {', '.join(pending)}"
            )

    @staticmethod
    def _geni_dir(exp: Experiment, node: str) -> Path:
        path = exp.node_dir(node) / "geni"
        path.mkdir(parents=True, exist_ok=True)
        return path


def _power_state(info: dict[str, Any] | None) -> str:
    """The power state of a container from ``podman inspect``'s answer (None: no container)."""
    return _power_word(None if info is None else str(info["State"]["Status"]))


def _power_word(status: str | None) -> str:
    """ "running", "stopped" (podman's exited or stopped), "missing" (no container), or
    podman's own word (created, paused, ...)."""
    if status is None:
        return "missing"
    if status == "running":
        return "running"
    return "stopped" if status in ("exited", "stopped") else status


def _container(exp: Experiment, node: str, operation: str) -> tuple[str, str]:
    """The node's container and its power state; ``operation`` fails on a node without one."""
    name = podman.container_name(exp.name, node)
    state = _power_state(podman.inspect(name))
    if state == "missing":
        raise TestbedError(f"node {node}: {operation}: its container {name} does not exist")
    return name, state


@contextlib.contextmanager
def _step(operation: str, node: str, step: str) -> Iterator[None]:
    """Name the node, the operation and the step in whatever fails inside."""
    try:
        yield
    except PtcError as err:
        raise TestbedError(f"node {node}: {operation}: {step} failed: {err}") from err


def _geni_params(exp: Experiment, request: Topology) -> dict[str, str]:
    """What `geni-get param` answers: the profile's values, with the user's as given."""
    return request.parameters | exp.params


def _write_in(container: str, path: str, content: str, mode: str) -> None:
    directory = shlex.quote(str(Path(path).parent))
    target = shlex.quote(path)
    script = f"mkdir -p {directory} && cat > {target}.ptc-tmp && chmod {mode} {target}.ptc-tmp && mv {target}.ptc-tmp {target}"
    podman.run("exec", "-i", container, "sh", "-c", script, input=content.encode())


def _wait_for_ssh(host: str, port: int, node: str) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT
    last = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2) as sock:
                sock.settimeout(2)
                if sock.recv(64).startswith(b"SSH-"):
                    return
        except OSError as err:
            last = str(err)
        time.sleep(0.5)
    raise TestbedError(
        f"node {node}: sshd on {host}:{port} did not answer within {BOOT_TIMEOUT:.0f}s ({last})"
    )
