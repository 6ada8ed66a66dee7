"""A play run on this machine by ansible-playbook with the repository's roles, for the unit tests
of roles whose tasks need no node (a local connection; files in the test's directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from elastic.paths import REPO_ROOT


def run(tmp_path: Path, play: dict[str, Any], inventory: dict[str, Any]) -> dict[str, Any]:
    """The JSON callback's output of ``play`` on ``inventory``; fails the test if the run did."""
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play], sort_keys=False))
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(
        os.environ,
        ANSIBLE_ROLES_PATH=str(REPO_ROOT / "roles"),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
    )
    args = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventory.yml"]
    done = subprocess.run(
        [*args, "play.yml"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    output: dict[str, Any] = json.loads(done.stdout)
    return output


def local_host(**host_vars: Any) -> dict[str, Any]:
    """An inventory host reached by a local connection, with ``host_vars``."""
    return {"ansible_connection": "local", **host_vars}


INTERPRETER = {"ansible_python_interpreter": sys.executable}
