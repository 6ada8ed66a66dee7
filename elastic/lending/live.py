"""The live :class:`~elastic.lending.ports.Pool` (the experiment's manager, over SSH) and
:class:`~elastic.lending.ports.Testbed` (node operations and deploys on the testbed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from elastic import cluster_groups
from elastic.deploy import runner, secrets
from elastic.deploy.target import Target
from elastic.errors import InputError, PtcError
from elastic.events import OnEvent, Reporter
from elastic.lending.ports import REFERENCE
from elastic.manager.client import ReferenceClient
from elastic.manager.workstation import open_manager
from elastic.profile import rspec
from elastic.remote import ssh
from elastic.testbed import backends, groups, nodeops, power_hold
from elastic.testbed import experiment as experiments
from elastic.testbed.experiment import Experiment

PLAYBOOK = "site.yml"


class ManagerPool:
    """The pool of ``exp``'s manager; each call opens its own forward."""

    def __init__(self, exp: Experiment) -> None:
        self.exp = exp

    def _open(self, partition: str | None = None) -> Any:
        return open_manager(self.exp.inventory_path, self.exp.ssh_config_path, partition)

    def owners(self) -> dict[str, str | None]:
        with self._open() as manager:
            return {n["name"]: n["owner"] for n in manager.discover()}

    def acquire(self, count: int, grace: float | None, wait: float) -> list[str]:
        with self._open(REFERENCE) as manager:
            ref = ReferenceClient(manager, REFERENCE)
            before = set(ref.held())
            got = ref.acquire(count, grace=grace, wait=wait)
        return sorted(set(got.nodes) - before)

    def take(self, node: str) -> None:
        holder = self.owners().get(node)
        if holder not in (None, REFERENCE):
            with self._open(holder) as manager:
                manager.delete_nodes(holder, [node])
        if holder != REFERENCE:
            with self._open(REFERENCE) as manager:
                manager.add_nodes(REFERENCE, nodes=[node])

    def give_back(self, node: str) -> None:
        with self._open(REFERENCE) as manager:
            ReferenceClient(manager, REFERENCE).release([node])


class LiveTestbed:
    """Experiments of this PTC_HOME, by name."""

    def __init__(self, on_event: OnEvent | None = None) -> None:
        self.on_event = on_event

    def exists(self, exp: str) -> bool:
        return experiments.exists(exp)

    def nodes(self, exp: str) -> list[str]:
        return [n.client_id for n in rspec.parse_manifest(experiments.load(exp).manifest()).nodes]

    def parked(self, exp: str) -> list[str]:
        return list(experiments.load(exp).parked)

    def head(self, exp: str) -> str:
        nodes = rspec.parse_manifest(experiments.load(exp).manifest()).nodes
        for node in nodes:
            if cluster_groups.SLURM_CONTROLLER in groups.node_groups(node):
                return node.client_id
        if not nodes:
            raise PtcError(f"experiment {exp!r} has no node")
        return nodes[0].client_id

    def moves_nodes(self, exp: str, other: str) -> str | None:
        lender, borrower = experiments.load(exp), experiments.load(other)
        if lender.testbed != borrower.testbed:
            return (
                f"{exp} is on the {lender.testbed} testbed and {other} on the "
                f"{borrower.testbed} testbed: a machine moves only within one testbed"
            )
        if not backends.capabilities(lender.testbed).moves_nodes:
            return (
                f"the {lender.testbed} testbed cannot move a machine from one experiment to "
                "another (it cannot release and allocate single nodes)"
            )
        return None

    def release(self, exp: str, node: str) -> None:
        loaded = experiments.load(exp)
        if node in loaded.parked:
            # its partition parked it: the machine is in the free pool already, and now the
            # other experiment's to take, not the partition's to take back
            nodeops.unpark(loaded, [node], self.on_event)
            return
        nodeops.release(loaded, [node], self.on_event)

    def allocate(self, exp: str, node: str, like: str | None) -> None:
        nodeops.allocate(experiments.load(exp), [node], like=like, on_event=self.on_event)

    def configure(self, exp: str, node: str) -> None:
        loaded = experiments.load(exp)
        # (the allocation that gave the node its fresh disk dropped its cached facts)
        head = self.head(exp)
        # The node may be free in the manager and powered down in Slurm while it is deployed
        # (a repair): the partition's loop would power it off under the playbook.
        with power_hold.hold(loaded, "give-back deploy"):
            runner.deploy(
                Target.of_experiment(loaded),
                PLAYBOOK,
                f"{head},{node}",
                recorded_extravars(loaded),
                self.on_event,
            )
        # Slurm still has the node as it was when it was lent (powered down, and not
        # responding since its machine left): reset its view, as for a node that was powered
        # down by force, so the partition can grow into the new machine.
        done = ssh.execute(
            loaded.ssh_config_path,
            head,
            f"scontrol update nodename={node} state=power_down_force",
            timeout=60,
        )
        if done.returncode != 0:  # the node is deployed and free: Slurm may still use it
            Reporter("lending", self.on_event).warning(
                f"{exp}: resetting Slurm's view of {node} on {head} failed: "
                f"{done.error_text.strip() or done.text.strip()}"
            )


def recorded_extravars(exp: Experiment) -> dict[str, Any]:
    """The extra variables of the experiment's last successful deploy of the playbook (a node
    deployed with other values would differ from the rest); {} when none was given."""
    for run in sorted(exp.runs_dir.glob(f"*-{Path(PLAYBOOK).stem}"), reverse=True):
        summary = run / "summary.json"
        if not summary.is_file() or json.loads(summary.read_text()).get("status") != "successful":
            continue
        path = run / "extravars.json"
        if not path.is_file():
            return {}
        values: dict[str, Any] = json.loads(path.read_text())
        if hidden := [k for k, v in values.items() if v == secrets.REDACTED]:
            raise InputError(
                f"{exp.name}: its last deploy ({run.name}) was given the secret "
                f"{', '.join(hidden)}, which ptc does not keep: deploy the node by hand "
                f"(ptc deploy {exp.name} --limit HEAD,NODE -e ...)"
            )
        return values
    return {}
