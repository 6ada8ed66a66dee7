"""The local testbed's machines: how many there are, who holds them, who may take more.

The local testbed is one host's hardware shared by every experiment on it, from every PTC_HOME,
the way a CloudLab cluster is shared by its users. Its directory (``$PTC_TESTBED_DIR``, default
``/var/lib/ptc/testbed``) is machine-wide and holds::

    settings.json      {"machines": N}: the testbed's size (absent: sized to this host), and
                       its provisioning limits ("provision_concurrency", "provisions_per_minute",
                       "full_provisions_per_minute")
    id                 the testbed's id, made once; every node container carries it as a label
    reservations.json  machines promised to creations in flight (experiment, count, pid)
    lock               flock'd while usage is counted and a reservation is recorded

Podman is the truth for what is in use: a container labelled ``io.ptc.testbed=<id>`` holds a
machine whether it runs or is stopped (a powered-off node stays in its experiment); a removed
one frees it. A creation records its reservation under the lock before the first container is
made and drops it afterwards, so two `ptc up` at once cannot both take the last machines; a
reservation whose process is gone is dropped. CloudLab's capacity is CloudLab's: only the local
testbed is counted here.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from elastic import atomic, processes
from elastic.errors import InputError, PtcError, TestbedError
from elastic.testbed.backends.local import podman

ENV = "PTC_TESTBED_DIR"
DEFAULT_DIR = Path("/var/lib/ptc/testbed")
TESTBED = "local"  # the one testbed whose machines are counted here

# The default size: one machine per 1.5 GiB of the host's memory (rounded), at most 8 per CPU,
# at least 2. An idle node is light (systemd, sshd, munge, slurmd), but a deployed one running
# MPI jobs is not, and all of them share the host's CPUs: 24 GiB and 2 CPUs give 16.
GIB_PER_MACHINE = 1.5
MACHINES_PER_CPU = 8
MIN_MACHINES = 2

SETTINGS_FIELDS = (
    "machines",
    "provision_concurrency",
    "provisions_per_minute",
    "full_provisions_per_minute",
)
LIMIT_FIELDS = SETTINGS_FIELDS[1:]
_ID = re.compile(r"^[0-9a-f]{8,32}$")


def directory() -> Path:
    explicit = os.environ.get(ENV)
    return Path(explicit) if explicit else DEFAULT_DIR


def _settings_path() -> Path:
    return directory() / "settings.json"


def _id_path() -> Path:
    return directory() / "id"


def _reservations_path() -> Path:
    return directory() / "reservations.json"


# -- settings ---------------------------------------------------------------------------------


def default_machines(meminfo: str | None = None, cpus: int | None = None) -> int:
    """The size of a testbed with no settings: from MemTotal and the CPU count (above)."""
    if meminfo is None:
        meminfo = Path("/proc/meminfo").read_text()
    match = re.search(r"^MemTotal:\s+(\d+)\s*kB", meminfo, re.MULTILINE)
    if match is None:
        raise PtcError("cannot size the local testbed: /proc/meminfo has no MemTotal")
    gib = int(match.group(1)) / (1024 * 1024)
    by_memory = round(gib / GIB_PER_MACHINE)
    by_cpu = MACHINES_PER_CPU * (cpus if cpus is not None else (os.cpu_count() or 1))
    return max(MIN_MACHINES, min(by_memory, by_cpu))


@dataclass(frozen=True)
class Settings:
    machines: int
    from_file: bool  # False: the default, sized to this host
    # Nodes the testbed provisions (powers on, reloads, allocates) at once, and starting in any
    # minute; None: no limit. Requests beyond them wait their turn (elastic.testbed.backends.local.provisioning).
    provision_concurrency: int | None = None
    provisions_per_minute: int | None = None
    # Of those, full provisionings (a fresh disk: reload, allocate) starting in any minute, as
    # Multiverse's vCenter limited full clones (provisioning.MULTIVERSE_FULL_PER_MINUTE) but not
    # instant ones.
    full_provisions_per_minute: int | None = None

    def as_file(self) -> dict[str, int]:
        out = {"machines": self.machines}
        for key in LIMIT_FIELDS:
            if (value := getattr(self, key)) is not None:
                out[key] = value
        return out


def settings() -> Settings:
    """The testbed's size and limits: its settings file, else the default; bad files name the
    field."""
    path = _settings_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Settings(default_machines(), from_file=False)
    parsed = parse_settings(text, path)
    return Settings(
        parsed["machines"],
        from_file=True,
        provision_concurrency=parsed.get("provision_concurrency"),
        provisions_per_minute=parsed.get("provisions_per_minute"),
        full_provisions_per_minute=parsed.get("full_provisions_per_minute"),
    )


def parse_settings(text: str, path: Path) -> dict[str, int]:
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise InputError(f"testbed settings {path}: not JSON ({err})") from err
    if not isinstance(raw, dict):
        raise InputError(f'testbed settings {path}: expected an object like {{"machines": 16}}')
    if unknown := sorted(set(raw) - set(SETTINGS_FIELDS)):
        raise InputError(
            f"testbed settings {path}: unknown field {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(SETTINGS_FIELDS)})"
        )
    if raw.get("machines") is None:
        raise InputError(f"testbed settings {path}: field 'machines' is missing")
    out: dict[str, int] = {}
    for key in SETTINGS_FIELDS:
        value = raw.get(key)
        if value is None and key != "machines":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(
                f"testbed settings {path}: field {key!r} must be a whole number of at least 1, "
                f"not {value!r}"
            )
        out[key] = value
    return out


def set_machines(machines: int) -> Usage:
    """Resize the testbed; refused below the machines in use. Returns the usage after."""
    if machines < 1:
        raise InputError(f"--machines must be at least 1, not {machines}")
    with _locked():
        now = _usage_locked()
        if machines < now.in_use:
            raise InputError(
                f"--machines {machines} is below the {now.in_use} machines in use "
                f"({now.describe_holders()}); take experiments down first"
            )
        resized = replace(settings(), machines=machines, from_file=True)  # limits kept
        atomic.write_json(_settings_path(), resized.as_file())
        return _usage_locked()


def set_limits(
    concurrency: int | None, per_minute: int | None, full_per_minute: int | None = None
) -> Settings:
    """Set the testbed's provisioning limits (0: no limit; None: leave as it is). A testbed
    with no settings file gets one with its default size."""
    given = {  # setting -> (option, value)
        "provision_concurrency": ("--provision-concurrency", concurrency),
        "provisions_per_minute": ("--provisions-per-minute", per_minute),
        "full_provisions_per_minute": ("--full-provisions-per-minute", full_per_minute),
    }
    for option, value in given.values():
        if value is not None and value < 0:
            raise InputError(f"{option} must be 0 (no limit) or more, not {value}")
    with _locked():
        limits: dict[str, Any] = {k: v or None for k, (_, v) in given.items() if v is not None}
        changed = replace(settings(), from_file=True, **limits)
        atomic.write_json(_settings_path(), changed.as_file())
        return changed


# -- the testbed id ---------------------------------------------------------------------------


def testbed_id(create: bool = True) -> str | None:
    """The id every node container of this testbed is labelled with; made once, on first use."""
    try:
        return _read_id(_id_path())
    except FileNotFoundError:
        if not create:
            return None
    with _locked():  # two first users must not make two ids
        return _ensure_id_locked()


def _ensure_id_locked() -> str:
    path = _id_path()
    try:
        return _read_id(path)
    except FileNotFoundError:
        made = secrets.token_hex(8)
        atomic.write_text(path, made + "\n")
        return made


def _read_id(path: Path) -> str:
    text = path.read_text().strip()
    if not _ID.match(text):
        raise InputError(f"testbed id {path}: {text!r} is not a testbed id (8-32 hex digits)")
    return text


def label_args() -> list[str]:
    """The podman arguments that put a node container on this testbed's books."""
    return ["--label", f"{podman.TESTBED_LABEL}={testbed_id()}"]


# -- what is in use ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    """A node container holding one of the testbed's machines."""

    experiment: str
    node: str
    state: str  # podman's: running, exited, created, paused, ...

    @property
    def power(self) -> str:
        """``running`` or ``stopped`` (a stopped node keeps its machine), else podman's state."""
        if self.state == "running":
            return "running"
        if self.state in ("exited", "stopped", "created", "configured"):
            return "stopped"
        return self.state


def parse_listing(text: str) -> list[Machine]:
    """The machines in ``podman ps -a --format json`` output (already filtered by testbed)."""

    machines: list[Machine] = []
    for entry in json.loads(text or "[]") or []:
        labels = entry.get("Labels") or {}
        names = entry.get("Names") or ["?"]
        machines.append(
            Machine(
                experiment=str(labels.get(podman.EXPERIMENT_LABEL, "?")),
                node=str(labels.get(podman.NODE_LABEL, names[0])),
                state=str(entry.get("State", "unknown")),
            )
        )
    return machines


def listing(testbed: str) -> list[Machine]:
    """Every container of testbed ``testbed`` on this host, running or not."""
    proc = podman.run(
        "ps", "-a", "--filter", f"label={podman.TESTBED_LABEL}={testbed}", "--format", "json"
    )
    return parse_listing(proc.stdout)


@dataclass(frozen=True)
class Reservation:
    """Machines promised to an operation in flight: the experiment's total while it runs."""

    experiment: str
    machines: int
    pid: int
    started: int | None  # the process's start time (clock ticks), against a reused pid
    token: str = field(default_factory=lambda: secrets.token_hex(8))


@dataclass(frozen=True)
class Holding:
    """What one experiment holds: its node containers and any reservation in flight."""

    experiment: str
    nodes: dict[str, str]  # node -> "running" | "stopped" | podman's state
    reserved: int = 0

    @property
    def machines(self) -> int:
        return max(len(self.nodes), self.reserved)

    def describe(self) -> str:
        powers = list(self.nodes.values())
        parts = [f"{powers.count(p)} {p}" for p in dict.fromkeys(powers)]
        if self.reserved > len(self.nodes):
            parts.append(f"{self.reserved - len(self.nodes)} being created")
        return f"{self.experiment!r} holds {self.machines} ({', '.join(parts)})"


@dataclass(frozen=True)
class Usage:
    machines: int
    from_file: bool
    holdings: list[Holding]

    @property
    def in_use(self) -> int:
        return sum(h.machines for h in self.holdings)

    @property
    def free(self) -> int:
        return max(0, self.machines - self.in_use)

    def holding(self, experiment: str) -> Holding:
        for held in self.holdings:
            if held.experiment == experiment:
                return held
        return Holding(experiment, {})

    def describe_holders(self) -> str:
        return "; ".join(h.describe() for h in self.holdings) or "no experiment holds any"

    def as_json(self) -> dict[str, Any]:
        return {
            "directory": str(directory()),
            "machines": self.machines,
            "sized": "settings" if self.from_file else "default",
            "in_use": self.in_use,
            "free": self.free,
            "experiments": [
                {
                    "name": h.experiment,
                    "machines": h.machines,
                    "nodes": dict(sorted(h.nodes.items())),
                    "creating": max(0, h.reserved - len(h.nodes)),
                }
                for h in self.holdings
            ],
        }


def tally(size: Settings, machines: Sequence[Machine], reserved: Sequence[Reservation]) -> Usage:
    nodes: dict[str, dict[str, str]] = {}
    for machine in machines:
        nodes.setdefault(machine.experiment, {})[machine.node] = machine.power
    promised: dict[str, int] = {}
    for r in reserved:
        promised[r.experiment] = max(promised.get(r.experiment, 0), r.machines)
    names = sorted(set(nodes) | set(promised))
    holdings = [Holding(n, nodes.get(n, {}), promised.get(n, 0)) for n in names]
    return Usage(size.machines, size.from_file, holdings)


def usage() -> Usage:
    """The testbed's size and who holds what, read without the lock and without creating the
    testbed's directory."""
    ident = testbed_id(create=False)
    machines = listing(ident) if ident else []
    return tally(settings(), machines, [r for r in _read_reservations() if _alive(r)])


class NoMachines(TestbedError):
    """Not enough free machines on the local testbed for what an operation would create."""

    def __init__(self, experiment: str, needed: int, now: Usage) -> None:
        self.experiment = experiment
        self.needed = needed
        self.free = now.free
        self.usage = now
        more = " more" if now.holding(experiment).machines else ""
        total = f" (the testbed has {now.machines} in all)" if needed > now.machines else ""
        super().__init__(
            f"experiment {experiment!r} needs {needed}{more} machine{'s' * (needed != 1)}"
            f"{total}, and the local testbed has {now.free} free of {now.machines}: "
            f"{now.describe_holders()}. Nothing was created. Free machines with `ptc down`, "
            f"see them with `ptc testbed show`, or resize with `ptc testbed set --machines N`"
        )


@contextmanager
def reserved(experiment: str, nodes: Sequence[str]) -> Iterator[None]:
    """Hold the machines that making ``nodes`` of ``experiment`` needs, for the block.

    Nodes the experiment already holds a container for cost nothing more (a replaced node is
    removed and made again in its place). Refused with ``NoMachines`` before the block runs when
    too few are free."""
    mine = Reservation(experiment, 0, os.getpid(), _start_time(os.getpid()))
    with _locked():
        now = _usage_locked()
        held = now.holding(experiment)
        needed = len(set(nodes) - set(held.nodes))
        if needed > now.free:
            raise NoMachines(experiment, needed, now)
        mine = Reservation(experiment, len(held.nodes) + needed, mine.pid, mine.started, mine.token)
        _write_reservations([*_read_reservations(), mine])
    try:
        yield
    finally:
        with _locked():
            _write_reservations([r for r in _read_reservations() if r.token != mine.token])


# -- state on disk ----------------------------------------------------------------------------


@contextmanager
def _locked() -> Iterator[None]:
    path = directory()
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _usage_locked() -> Usage:
    """Usage under the lock: reservations of processes that are gone are dropped for good."""
    ident = _ensure_id_locked()
    recorded = _read_reservations()
    live = [r for r in recorded if _alive(r)]
    if len(live) != len(recorded):
        _write_reservations(live)
    return tally(settings(), listing(ident), live)


def _read_reservations() -> list[Reservation]:
    path = _reservations_path()
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except ValueError as err:
        raise TestbedError(f"testbed reservations {path}: not JSON ({err})") from err
    try:
        return [Reservation(**entry) for entry in raw]
    except TypeError as err:
        raise TestbedError(
            f"testbed reservations {path}: not a list of reservations ({err})"
        ) from err


def _write_reservations(reservations: Sequence[Reservation]) -> None:
    atomic.write_json(_reservations_path(), [asdict(r) for r in reservations])


def _start_time(pid: int) -> int | None:
    return processes.start_time(pid)


def _alive(reservation: Reservation) -> bool:
    return processes.alive(reservation.pid, reservation.started)
