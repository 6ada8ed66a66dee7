"""What a playbook or test run is pointed at: an inventory, and where the run keeps its records.

A workstation's target is an experiment (``Target.of_experiment``). A node of the experiment can
be a target's home too (the head running the playbooks for the elastic client,
``elastic.deploy.onnode``): then there is no ``$PTC_HOME``, only these paths.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from elastic.errors import PtcError
from elastic.testbed.experiment import Experiment


@dataclass(frozen=True)
class Target:
    name: str  # for messages: the experiment's name, or the node's
    inventory: Path  # hosts.yml
    ssh_config: Path  # Host entries for every inventory host (journals, testinfra)
    runs_dir: Path  # every run gets a fresh directory under here
    fact_cache: Path  # the ptc_facts cache plugin's directory

    @classmethod
    def of_experiment(cls, exp: Experiment) -> Target:
        """The experiment's inventory, once its nodes are up and the inventory is written."""
        exp.require_ready()
        inventory = exp.require_inventory()
        return cls(exp.name, inventory, exp.ssh_config_path, exp.runs_dir, exp.facts_dir)

    def new_run_dir(self, label: str) -> Path:
        """RUNS/<timestamp>-<label>, never one an earlier run already uses."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for attempt in range(1, 1000):
            suffix = "" if attempt == 1 else f".{attempt}"
            path = self.runs_dir / f"{stamp}{suffix}-{label}"
            try:
                path.mkdir(parents=True)
            except FileExistsError:
                continue
            return path
        raise PtcError(f"cannot create a run directory under {self.runs_dir}")
