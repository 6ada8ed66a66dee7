"""Shared helpers for the testinfra suite, runnable against any ptc inventory:

    pytest tests/infra --hosts=ansible://all --ansible-inventory=EXPDIR/inventory/hosts.yml \
        --ssh-config=EXPDIR/inventory/ssh_config

Every test is parametrised over every host by testinfra and skips hosts outside the inventory
group it is about, so the same suite serves one node or a hundred. Assertion messages start
with the node's name and say what was checked: `ptc verify` reports them as they are.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import testinfra
from testinfra.host import Host


def pytest_configure(config: pytest.Config) -> None:
    # testinfra runs ansible-inventory: find the one installed next to this Python.
    if shutil.which("ansible-inventory") is None:
        os.environ["PATH"] = (
            f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        )
    # testinfra shares Ansible's SSH connections (ansible.cfg control_path) once this exists.
    (Path.home() / ".ansible" / "cp").mkdir(parents=True, exist_ok=True)


# `ptc verify` names the nodes whose machines the testbed has powered off (an elastic pool at
# rest under `elastic_node_operation=power`): nothing can be checked on them without powering
# them on, which would change the cluster being checked.
POWERED_OFF_ENV = "PTC_VERIFY_POWERED_OFF"


def powered_off() -> set[str]:
    """The nodes `ptc verify` says the testbed has powered off."""
    return {n for n in os.environ.get(POWERED_OFF_ENV, "").split(",") if n}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    off = powered_off()
    if not off:
        return
    for item in items:
        host = item.nodeid.rpartition("[ansible://")[2].rstrip("]")
        if host in off:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"{host} is powered down: the testbed has powered its machine off "
                    "(an elastic pool node at rest)"
                )
            )


def variables(host: Host) -> dict[str, Any]:
    result: dict[str, Any] = host.ansible.get_variables()
    return result


def name_of(host: Host) -> str:
    return str(variables(host)["inventory_hostname"])


def group(host: Host, name: str) -> list[str]:
    """Members of an inventory group (empty when the inventory has no such group)."""
    return list(variables(host)["groups"].get(name, []))


def require_group(host: Host, *names: str) -> None:
    """Skip this host unless it belongs to one of the groups."""
    mine = set(variables(host)["group_names"])
    if not mine.intersection(names):
        pytest.skip(f"{name_of(host)} is not in {' or '.join(names)}")


@pytest.fixture
def other(request: pytest.FixtureRequest) -> Any:
    """Open another inventory host by name, with the same inventory and SSH settings."""
    option = request.config.option

    def get(name: str) -> Host:
        return testinfra.get_host(
            f"ansible://{name}",
            ansible_inventory=option.ansible_inventory,
            ssh_config=option.ssh_config,
        )

    return get


# Slurm's power-saving flags (`scontrol show node`): an elastic pool node outside Slurm's
# partition is powered down as Slurm sees it, with slurmd stopped until Slurm resumes it.
POWER_FLAGS = {
    "POWERED_DOWN": "powered down",
    "POWERING_DOWN": "powering down",
    "POWERING_UP": "powering up",
    "POWER_DOWN": "to be powered down",
}


def power_state(host: Host, other: Any) -> str:
    """Why Slurm does not count this compute node as up ("powered down", ...), or "" when it
    does: read from the controller's ``scontrol show node`` (sinfo's ``~``, ``%``, ``#``)."""
    me = name_of(host)
    controllers = group(host, "slurm_controller")
    if not controllers:
        return ""
    out = other(controllers[0]).run(f"scontrol show node --oneliner {me}")
    state = next((w.split("=", 1)[1] for w in out.stdout.split() if w.startswith("State=")), "")
    flags = set(state.split("+"))
    return next((what for flag, what in POWER_FLAGS.items() if flag in flags), "")


def skip_if_powered_down(host: Host, other: Any) -> None:
    """Skip a check that needs slurmd on a node Slurm holds powered down (an elastic pool node
    outside Slurm's partition: `ptc deploy NAME -e ptc_elastic=true`)."""
    why = power_state(host, other)
    if why:
        pytest.skip(
            f"{name_of(host)} is {why} in Slurm (an elastic pool node outside the partition)"
        )


def cluster_var(host: Host, key: str, default: Any) -> Any:
    """A group_vars value, when it is a plain value (templated ones are left to the default)."""
    value = variables(host).get(key, default)
    if isinstance(value, str) and "{{" in value:
        return default
    return value
