"""A FAKE EC2 region as a background service of its experiment: started detached (its own
session, a pid file, a log) by ``ptc fake-ec2 start``, stopped by ``ptc fake-ec2 stop`` and
by ``ptc down``, as the testbed's control service is.

Its state lives in the experiment's ``fake_ec2_dir`` (root only, no node mounts it): the
settings it was started with, its credentials, the faults, its status (rewritten every tick)
and its log. The region itself (moto's) lives in the process's memory: a region started again
is a new, empty one, and the machines of the old one are removed as it starts.
"""

from __future__ import annotations

import configparser
import contextlib
import io
import json
import logging
import os
import secrets
import signal
import string
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from elastic import atomic
from elastic.errors import InputError, PtcError
from elastic.profile import rspec
from elastic.testbed import backends
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local import fileserver, network, podman
from elastic.testbed.backends.local.daemon import Daemon
from elastic.testbed.backends.local.fake_ec2 import (
    API_HOST,
    API_PORT,
    CREDENTIALS_NAME,
    DEFAULT_REGION,
    plan,
)
from elastic.testbed.backends.local.fake_ec2.faults import Faults
from elastic.testbed.experiment import Experiment, State

MODULE = "elastic.testbed.backends.local.fake_ec2"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0  # the machines go first, a second or two each
TICK_S = 1.0
REGION_NAME = r"^[a-z]{2}(-[a-z]+)+-\d$"

log = logging.getLogger("ptc.fake-ec2")


@dataclass(frozen=True)
class Settings:
    """What ``start`` was asked for."""

    region: str = DEFAULT_REGION
    boot_delay: float = 0.0
    api_node: str = "head"
    lan: str | None = None

    def check(self) -> Settings:
        import re

        if not re.match(REGION_NAME, self.region):
            raise InputError(f"--region {self.region!r} is no region name (like us-east-1)")
        if self.boot_delay < 0:
            raise InputError(f"--boot-delay must be 0 seconds or more, not {self.boot_delay:g}")
        return self


@dataclass(frozen=True)
class Places:
    root: Path
    head_credentials: Path  # what the API node sees, in the control service's directory

    @classmethod
    def of(cls, exp: Experiment) -> Places:
        return cls(exp.fake_ec2_dir, exp.control_dir / CREDENTIALS_NAME)

    @property
    def settings(self) -> Path:
        return self.root / "settings.json"

    @property
    def credentials(self) -> Path:
        return self.root / "credentials"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def pid_file(self) -> Path:
        return self.root / "service.pid"

    @property
    def log(self) -> Path:
        return self.root / "service.log"


def faults(exp: Experiment) -> Faults:
    return Faults(exp.fake_ec2_dir)


def endpoint_url() -> str:
    return f"http://{API_HOST}:{API_PORT}"


def _usable(exp: Experiment) -> None:
    if not backends.capabilities(exp.testbed).host_machines or exp.adopted:
        raise InputError(
            f"experiment {exp.name!r} is on the {exp.testbed} testbed: a FAKE EC2 region "
            "realises instances as machines of the local testbed only"
        )
    exp.require_ready("fake-ec2: ")


# -- credentials: a key pair of the region's own ---------------------------------------------


def ensure_credentials(places: Places) -> tuple[str, str]:
    """The region's key pair (id, secret), made at the first start; written root-only, in the
    shared credentials file's format, on the host and where the API node reads it."""
    if not places.credentials.is_file():
        alphabet = string.ascii_uppercase + string.digits
        key_id = "AKIA" + "".join(secrets.choice(alphabet) for _ in range(16))
        parser = configparser.ConfigParser()
        parser["default"] = {
            "aws_access_key_id": key_id,
            "aws_secret_access_key": secrets.token_urlsafe(30),
        }
        out = io.StringIO()
        parser.write(out)
        atomic.write_text(places.credentials, out.getvalue(), mode=0o600)
    text = places.credentials.read_text()
    if not places.head_credentials.is_file() or places.head_credentials.read_text() != text:
        atomic.write_text(places.head_credentials, text, mode=0o600)
    parser = configparser.ConfigParser()
    parser.read_string(text)
    return parser["default"]["aws_access_key_id"], parser["default"]["aws_secret_access_key"]


# -- the plan from the experiment's manifest ------------------------------------------------


def lans(exp: Experiment) -> tuple[list[plan.Lan], dict[str, list[int]]]:
    """The experiment's addressed LANs (with every address in use on each) and the LANs each
    node is on."""
    import ipaddress

    manifest = rspec.parse_manifest(exp.manifest())
    wires = network.plan(manifest)
    server = fileserver.address(manifest, wires)
    found: list[plan.Lan] = []
    for index, link in enumerate(manifest.links):
        mine = [w for w in wires if w.lan_index == index and w.address and w.prefixlen]
        if not mine:
            continue
        net = ipaddress.IPv4Interface(f"{mine[0].address}/{mine[0].prefixlen}").network
        used = {ipaddress.IPv4Address(w.address) for w in mine if w.address}
        if server is not None and server.lan_index == index:
            used.add(ipaddress.IPv4Address(server.address))
        found.append(plan.Lan(index, link.client_id, net, frozenset(used)))
    on: dict[str, list[int]] = {}
    for w in wires:
        if w.address:
            on.setdefault(w.node, []).append(w.lan_index)
    return found, on


def plan_of(exp: Experiment, settings: Settings) -> plan.Plan:
    manifest_nodes = {n.client_id for n in rspec.parse_manifest(exp.manifest()).nodes}
    if settings.api_node not in manifest_nodes:
        raise InputError(
            f"--node: experiment {exp.name!r} has no node {settings.api_node!r} "
            f"(its nodes: {', '.join(sorted(manifest_nodes))})"
        )
    found, on = lans(exp)
    lan = plan.choose_lan(found, settings.api_node, settings.lan, on.get(settings.api_node, []))
    return plan.plan(lan)


# -- the service in the foreground ------------------------------------------------------------


def serve(name: str) -> None:
    """Run the region of experiment ``name`` until SIGTERM or SIGINT; its machines go with it."""
    from elastic.testbed.backends.local import image
    from elastic.testbed.backends.local.fake_ec2 import machines
    from elastic.testbed.backends.local.fake_ec2.realiser import Realiser
    from elastic.testbed.backends.local.fake_ec2.region import Listener, Region, listen_in

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    exp = experiments.load(name)
    places = Places.of(exp)
    settings = Settings(**json.loads(places.settings.read_text()))
    the_plan = plan_of(exp, settings)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    atomic.write_text(places.pid_file, f"{os.getpid()}\n")

    key_id, secret = ensure_credentials(places)
    ref = image.ensure(kind=image.PREPARED)
    region = Region(settings.region)
    ids = region.set_up(the_plan)
    app = region.wsgi(ids, faults(exp), {key_id: secret})
    reserved = [n.client_id for n in rspec.parse_manifest(exp.manifest()).nodes]
    realiser = Realiser(exp, region, the_plan, ids.subnet_id, ref, faults(exp),
                        settings.boot_delay, reserved)  # fmt: skip
    for node in machines.held(exp):  # a previous region's: its instances are gone with it
        log.info("removing %s, a machine of a previous region", node)
        machines.remove(exp, node)
    log.info("region %s of %s: VPC %s, subnet %s (%s), image %s, access key %s", settings.region,
             exp.name, ids.vpc_id, ids.subnet_id, the_plan.subnet, ids.image_id, key_id)  # fmt: skip

    listener: Listener | None = None
    head_pid: int | None = None
    started = time.time()
    try:
        while not stopping.is_set():
            pid = _running_pid(podman.container_name(exp.name, settings.api_node))
            if pid != head_pid:
                # The API node started, stopped or came back in a new network namespace.
                if listener is not None:
                    listener.close()
                    listener = None
                head_pid = None
                if pid is not None:
                    try:
                        listener = Listener(listen_in(pid, API_HOST, API_PORT), app)
                        head_pid = pid
                        log.info("API on %s inside %s (pid %d)", endpoint_url(),
                                 settings.api_node, pid)  # fmt: skip
                    except (OSError, PtcError) as err:  # tried again next tick
                        log.error("API on %s: %s", settings.api_node, err)
            try:
                realiser.tick()
            except PtcError as err:
                log.error("realiser: %s", err)
            atomic.write_json(places.status, {
                "pid": os.getpid(), "started": started, "updated": time.time(),
                "settings": asdict(settings), "plan": the_plan.as_json(), "ids": asdict(ids),
                "endpoint_url": endpoint_url(), "api_node_pid": head_pid,
                "access_key_id": key_id, "machines": realiser.describe(),
            }, mode=0o600)  # fmt: skip
            stopping.wait(TICK_S)
    finally:
        if listener is not None:
            listener.close()
        realiser.remove_all()
        places.status.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if _daemon(exp).recorded() == os.getpid():
                places.pid_file.unlink()
        log.info("stopped")


def _running_pid(container: str) -> int | None:
    info = podman.inspect(container)
    if info is None or not info["State"]["Running"]:
        return None
    return int(info["State"]["Pid"])


# -- the daemon ---------------------------------------------------------------------------------


def _daemon(exp: Experiment) -> Daemon:
    places = Places.of(exp)
    return Daemon(MODULE, exp.name, places.pid_file, places.log, "the FAKE EC2 region")


@dataclass(frozen=True)
class Status:
    experiment: str
    pid: int | None
    report: dict[str, Any] | None  # the service's last status, when it runs
    log: Path
    credentials: Path
    head_credentials: Path

    @property
    def running(self) -> bool:
        return self.pid is not None and self.report is not None


def status(exp: Experiment) -> Status:
    places = Places.of(exp)
    pid = _daemon(exp).alive()
    report: dict[str, Any] | None = None
    if pid is not None:
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(places.status.read_text())
            if data.get("pid") == pid:
                report = data
    return Status(exp.name, pid, report, places.log, places.credentials, places.head_credentials)


def start(exp: Experiment, settings: Settings) -> Status:
    """Start the region unless it runs (then it is refused: a region keeps its settings until
    stopped); wait until it serves."""
    _usable(exp)
    settings.check()
    current = status(exp)
    if current.pid is not None:
        raise InputError(
            f"experiment {exp.name!r} has a FAKE EC2 region running (pid {current.pid}): "
            f"`ptc fake-ec2 stop {exp.name}` first"
        )
    plan_of(exp, settings)  # refused here, naming what is wrong, rather than in the log
    places = Places.of(exp)
    places.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(places.root, 0o700)
    exp.control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic.write_json(places.settings, asdict(settings), mode=0o600)
    places.status.unlink(missing_ok=True)

    def serving() -> Status | None:
        current = status(exp)
        report = current.report or {}
        return current if current.running and report.get("api_node_pid") else None

    return _daemon(exp).start(
        serving,
        START_TIMEOUT,
        0.3,
        f"did not serve within {START_TIMEOUT:.0f} s (is node {settings.api_node} running?)",
    )


def stop(exp: Experiment) -> bool:
    """Stop the region (SIGTERM: it removes its machines; then SIGKILL); False if none ran.
    Machines a killed region left are removed here."""
    from elastic.testbed.backends.local.fake_ec2 import machines

    stopped = _daemon(exp).stop(STOP_TIMEOUT, 0.2)
    Places.of(exp).status.unlink(missing_ok=True)
    if exp.dir.is_dir() and exp.state != State.CREATING:
        for node in machines.held(exp):
            machines.remove(exp, node)
    return stopped
