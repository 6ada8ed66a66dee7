"""mitogen's linear strategy, without mitogen's CPU pinning on machines of fewer than four CPUs.

mitogen pins its connection multiplexer to CPU 0 and, where there are fewer than four CPUs,
ansible-playbook's main process, every worker it forks (one per task and host) and their SSH
children all to CPU 1 (``ansible_mitogen.affinity.FixedPolicy``). On such a machine the whole
controller then shares one CPU while the other serves the multiplexer and little else; on the
local testbed the nodes share the same CPUs too. There this strategy leaves placement to the
kernel; with four CPUs or more, mitogen's policy stays. Everything else is ``mitogen_linear``:
the order of plays and tasks and the handler semantics are Ansible's linear strategy's.
"""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

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

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy

DOCUMENTATION = """
    name: ptc_mitogen_linear
    short_description: mitogen's linear strategy, without its CPU pinning on small machines
    description:
      - mitogen_linear, except that on a controller of fewer than four CPUs ansible-playbook's
        processes are not pinned to one CPU.
"""

# mitogen's own threshold: below it, its policy puts the controller and every worker on CPU 1.
PINNING_MIN_CPUS = 4


def unpin(cpus: int) -> bool:
    """Whether mitogen's CPU placement is left out on a machine of ``cpus`` CPUs."""
    return cpus < PINNING_MIN_CPUS


if unpin(multiprocessing.cpu_count()):
    ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()  # places nothing

Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):  # type: ignore[misc,valid-type]
    pass
