"""mitogen's linear strategy, without mitogen's CPU pinning on machines of fewer than four CPUs.

mitogen pins its connection multiplexer to CPU 0 and, where there are fewer than four CPUs,
ansible-playbook's main process, every worker it forks (one per task and host) and their SSH
children all to CPU 1 (``ansible_mitogen.affinity.FixedPolicy``). On such a machine the whole
controller then shares one CPU while the other serves the multiplexer and little else; on the
local testbed the nodes share the same CPUs too. There this strategy leaves placement to the
kernel; with four CPUs or more, mitogen's policy stays.

mitogen lists every installed collection (reading each one's metadata) in a worker the first
time that worker runs a module from a collection, and a worker runs one task: so every task of
a collection's module paid that listing again. Here it is listed once, by the main process
before the workers fork, and each worker inherits the list.

Everything else is ``mitogen_linear``: the order of plays and tasks and the handler semantics
are Ansible's linear strategy's.
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path
from typing import Any

from ansible import constants

try:
    import ansible_mitogen
except ImportError:
    # mitogen unpacked beside Ansible rather than installed (the head's copy): found where its
    # own strategy plugins are configured, as its strategy files find it themselves.
    for entry in constants.config.get_config_value("DEFAULT_STRATEGY_PLUGIN_PATH") or ():
        if (Path(entry) / "mitogen_linear.py").is_file():
            sys.path.insert(0, str(Path(entry).resolve().parents[2]))
            break

import ansible.collections.list
import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.planner
import ansible_mitogen.strategy

DOCUMENTATION = """
    name: ptc_mitogen_linear
    short_description: mitogen's linear strategy, without its CPU pinning on small machines
    description:
      - mitogen_linear, except that on a controller of fewer than four CPUs ansible-playbook's
        processes are not pinned to one CPU, and that the installed collections are listed once
        rather than by every worker that runs a collection's module.
"""

# mitogen's own threshold: below it, its policy puts the controller and every worker on CPU 1.
PINNING_MIN_CPUS = 4


def unpin(cpus: int) -> bool:
    """Whether mitogen's CPU placement is left out on a machine of ``cpus`` CPUs."""
    return cpus < PINNING_MIN_CPUS


if unpin(multiprocessing.cpu_count()):
    ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()  # places nothing


class _Collections:
    """The installed collections' directories, listed once in the process that forks the workers."""

    dirs: tuple[str, ...] | None = None

    @classmethod
    def list(cls) -> tuple[str, ...]:
        if cls.dirs is None:
            cls.dirs = tuple(
                p.decode("utf-8") for p in ansible.collections.list.list_collection_dirs()
            )
        return cls.dirs


def _load_collections(invocation: Any) -> None:
    """mitogen's ``planner._load_collections``, from the list made before the fork."""
    invocation._extra_sys_paths.update(_Collections.list())


ansible_mitogen.planner._load_collections = _load_collections

Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):  # type: ignore[misc,valid-type]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _Collections.list()  # in the main process, before this play forks a worker
