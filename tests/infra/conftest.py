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


def cluster_var(host: Host, key: str, default: Any) -> Any:
    """A group_vars value, when it is a plain value (templated ones are left to the default)."""
    value = variables(host).get(key, default)
    if isinstance(value, str) and "{{" in value:
        return default
    return value
