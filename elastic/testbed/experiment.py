"""A named experiment and the directory that holds everything about it.

Layout of ``$PTC_HOME/experiments/NAME/``::

    experiment.json   what was asked for (profile, parameters, testbed, site)
    request.xml       the request RSpec rendered from the profile
    manifest.xml      the manifest RSpec the testbed returned: the only input downstream
    ssh/              the per-experiment key pair
    inventory/        hosts.yml, group_vars/, ssh_config (from the manifest)
    facts/            Ansible's fact cache (runs limited to a few hosts need every node's)
    runs/             artifacts of every deploy and verify
    datasets/         benchmark datasets
    shared/           (local testbed) the directory every node shares as /home and /opt/ptc
    nodes/NODE/       (local testbed) what the host keeps per node: geni-get data, blockstores
    control/          (local testbed) the control service's socket and credential: every node
                      mounts it (at the control package's MOUNT)
    control-service/  (local testbed) the control service's journal, pid file and log: no node
                      mounts it
    fake-ec2/         (local testbed) a FAKE EC2 region's settings, credentials, faults, pid
                      file, status and log (``ptc fake-ec2``): no node mounts it
    power-holds/      a file per process that needs the nodes up: powering off waits for none
    loans.json        which of its machines are lent to which experiment, as which node

Every path below ``dir`` is a property here; nothing else joins paths onto ``dir``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from elastic import atomic, paths
from elastic.errors import InputError, NotFoundError, PtcError

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
RECORD = "experiment.json"


class State(StrEnum):
    """Where an experiment is in its life; its record on disk holds the value.

    ``creating`` (`ptc up`) -> ``ready``, or ``failed`` when an `up` could not clean up after
    itself. A ready experiment is ``modifying`` while its nodes change (`ptc modify`, a
    replace, a release or an allocation) and ``ready`` again after, whether the change worked
    or not. ``deleting``: `ptc down` has begun. Only a ready experiment is changed or deployed;
    `ptc down` takes any.
    """

    CREATING = "creating"
    READY = "ready"
    MODIFYING = "modifying"
    DELETING = "deleting"
    FAILED = "failed"


@dataclass
class Experiment:
    name: str
    testbed: str  # "local" or "cloudlab"
    profile: str
    params: dict[str, str] = field(default_factory=dict)
    site: str | None = None
    created: float = field(default_factory=time.time)
    state: State = State.CREATING
    # Adopted: the nodes were made elsewhere (the portal) and ptc only reads their manifest, so
    # `ptc down` forgets the experiment and never deletes a sliver it did not create.
    adopted: bool = False
    # Nodes moved by `ptc node release` and `allocate`, which a later re-render of the profile
    # must keep as they are: profile nodes released from the experiment, and nodes allocated
    # as copies of another (name -> the node copied; their spec is the one in the manifest).
    released: list[str] = field(default_factory=list)
    clones: dict[str, str] = field(default_factory=dict)
    # Released nodes an elastic partition parked (its suspend gave their machines back): still
    # the experiment's nodes, brought back by a resume or by anything that needs every node.
    parked: list[str] = field(default_factory=list)
    # The disk image its nodes boot from, on a testbed that offers a choice (the local one:
    # "prepared" or "bare"); None elsewhere, and in records made before there was a choice.
    image: str | None = None

    @property
    def dir(self) -> Path:
        return paths.experiments_dir() / self.name

    @property
    def request_path(self) -> Path:
        return self.dir / "request.xml"

    @property
    def manifest_path(self) -> Path:
        return self.dir / "manifest.xml"

    @property
    def power_holds_dir(self) -> Path:
        """One file per live process that needs the nodes up (a deploy, a verify)."""
        return self.dir / "power-holds"

    @property
    def key_path(self) -> Path:
        return self.dir / "ssh" / "id_ed25519"

    @property
    def inventory_dir(self) -> Path:
        return self.dir / "inventory"

    @property
    def inventory_path(self) -> Path:
        return self.inventory_dir / "hosts.yml"

    @property
    def ssh_config_path(self) -> Path:
        return self.inventory_dir / "ssh_config"

    @property
    def facts_dir(self) -> Path:
        return self.dir / "facts"

    @property
    def runs_dir(self) -> Path:
        return self.dir / "runs"

    @property
    def datasets_dir(self) -> Path:
        return self.dir / "datasets"

    @property
    def shared_dir(self) -> Path:
        return self.dir / "shared"

    @property
    def control_dir(self) -> Path:
        return self.dir / "control"

    @property
    def control_state_dir(self) -> Path:
        return self.dir / "control-service"

    @property
    def fake_ec2_dir(self) -> Path:
        return self.dir / "fake-ec2"

    @property
    def loans_path(self) -> Path:
        return self.dir / "loans.json"

    def __post_init__(self) -> None:
        self.state = State(self.state)  # a record's string, or a caller's, is a State

    @property
    def record_path(self) -> Path:
        return self.dir / RECORD

    def node_dir(self, node: str) -> Path:
        return self.dir / "nodes" / node

    def save(self) -> None:
        # A StrEnum is written as its string: records stay readable by older versions.
        atomic.write_json(self.record_path, asdict(self))

    def require_ready(self, prefix: str = "") -> None:
        """Refuse to act on an experiment that is not ``ready`` (``prefix``: what was asked,
        in front of the message)."""
        if self.state != State.READY:
            raise InputError(
                f"{prefix}experiment {self.name!r} is {self.state}, not ready: "
                f"`ptc status {self.name}`"
            )

    def require_inventory(self) -> Path:
        """The inventory's hosts.yml; an error saying how to make it when there is none."""
        if not self.inventory_path.is_file():
            raise NotFoundError(
                f"experiment {self.name!r} has no inventory yet: run `ptc inventory {self.name}`"
            )
        return self.inventory_path

    def manifest(self) -> bytes:
        if not self.manifest_path.exists():
            raise PtcError(f"experiment {self.name!r} has no manifest yet (state: {self.state})")
        return self.manifest_path.read_bytes()


def validate_name(name: str) -> str:
    if not _NAME.match(name):
        raise InputError(
            f"experiment name {name!r} is invalid: use 1-31 lowercase letters, digits and "
            "dashes, starting with a letter"
        )
    return name


def known() -> list[str]:
    root = paths.experiments_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / RECORD).is_file())


def load(name: str) -> Experiment:
    path = paths.experiments_dir() / name / RECORD
    if not path.is_file():
        names = ", ".join(known()) or "none"
        raise NotFoundError(f"unknown experiment {name!r} (experiments: {names})")
    data: dict[str, Any] = json.loads(path.read_text())
    try:
        State(data.get("state", State.CREATING))
    except ValueError:
        raise PtcError(
            f"{path}: field 'state': {data['state']!r} is not an experiment state "
            f"(one of {', '.join(State)})"
        ) from None
    return Experiment(**data)


def exists(name: str) -> bool:
    return (paths.experiments_dir() / name / RECORD).is_file()
