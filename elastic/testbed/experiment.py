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
                      mounts it at /run/ptc-testbed
    control-service/  (local testbed) the control service's journal, pid file and log: no node
                      mounts it
    power-holds/      a file per process that needs the nodes up: powering off waits for none
    loans.json        which of its machines are lent to which experiment, as which node

Every path below ``dir`` is a property here; nothing else joins paths onto ``dir``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from elastic import atomic, paths
from elastic.errors import InputError, NotFoundError, PtcError

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


@dataclass
class Experiment:
    name: str
    testbed: str  # "local" or "cloudlab"
    profile: str
    params: dict[str, str] = field(default_factory=dict)
    site: str | None = None
    created: float = field(default_factory=time.time)
    state: str = "creating"  # creating -> ready | failed; deleting
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
    def loans_path(self) -> Path:
        return self.dir / "loans.json"

    def node_dir(self, node: str) -> Path:
        return self.dir / "nodes" / node

    def save(self) -> None:
        atomic.write_json(self.dir / "experiment.json", asdict(self))

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
    return sorted(p.name for p in root.iterdir() if (p / "experiment.json").is_file())


def load(name: str) -> Experiment:
    path = paths.experiments_dir() / name / "experiment.json"
    if not path.is_file():
        names = ", ".join(known()) or "none"
        raise NotFoundError(f"unknown experiment {name!r} (experiments: {names})")
    data = json.loads(path.read_text())
    return Experiment(**data)


def exists(name: str) -> bool:
    return (paths.experiments_dir() / name / "experiment.json").is_file()
