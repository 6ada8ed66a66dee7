"""The slurm role's templates, rendered by Ansible on this machine from a three-node inventory.

Checks what the role promises: NodeName lines from facts, repeated keys from lists, null
removes a key, and which changes land in the restart digests (node list: slurmctld only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "slurm"
TEMPLATES = ("slurm.conf", "slurmctld-restart.keys", "slurmd-restart.keys", "slurmd.default")

INVENTORY = """
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: {python}
  children:
    slurm_controller: {{hosts: {{head: {{ptc_lan_address: 10.10.1.1}}}}}}
    slurm_dbd: {{hosts: {{head: {{}}}}}}
    slurm_compute:
      hosts:
        node-0: {{ptc_lan_address: 10.10.1.2}}
        node-1: {{ptc_lan_address: 10.10.1.3}}
"""

PLAYBOOK = """
- hosts: all
  gather_facts: true
  gather_subset: ["!all", "!min", hardware]
  vars_files:
    - {role}/defaults/main.yml
    - {role}/vars/main.yml
  tasks:
    - ansible.builtin.template:
        src: "{role}/templates/{{{{ item }}}}.j2"
        dest: "{out}/{{{{ inventory_hostname }}}}-{{{{ item }}}}"
        mode: "0644"
      loop: {templates}
"""


def render(tmp_path: Path, extravars: dict[str, Any]) -> dict[str, str]:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "hosts.yml").write_text(INVENTORY.format(python=sys.executable))
    (tmp_path / "play.yml").write_text(
        PLAYBOOK.format(role=ROLE, out=out, templates=json.dumps(list(TEMPLATES)))
    )
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "hosts.yml", "play.yml",
         "-e", json.dumps(extravars)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env=os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return {p.name: p.read_text() for p in out.iterdir()}


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render(tmp_path_factory.mktemp("default"), {})


def lines(text: str, key: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{key}=")]


def test_nodes_from_inventory_and_facts(default: dict[str, str]) -> None:
    conf = default["head-slurm.conf"]
    nodes = lines(conf, "NodeName")
    assert [n.split()[0] for n in nodes] == ["NodeName=node-0", "NodeName=node-1"]
    cpus = os.cpu_count()
    for node, address in zip(nodes, ("10.10.1.2", "10.10.1.3"), strict=True):
        assert f"NodeAddr={address}" in node
        assert f"CPUs={cpus}" in node and "RealMemory=" in node and "State=UNKNOWN" in node
    assert lines(conf, "SlurmctldHost") == ["SlurmctldHost=head(10.10.1.1)"]
    assert lines(conf, "PartitionName") == [
        "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    ]
    assert "SlurmctldParameters=enable_configless" in conf
    assert "AccountingStorageHost=head" in conf
    assert default["node-0-slurmd.default"].strip().endswith('"--conf-server head:6817"')


def test_config_dict_merges_lists_repeat_and_null_removes(tmp_path: Path) -> None:
    out = render(
        tmp_path,
        {
            "slurm_config": {
                "SlurmctldHost": ["head(10.10.1.1)", "backup(10.10.1.9)"],
                "Waittime": None,
                "DebugFlags": "Gang",
                "PartitionName": ["debug Nodes=node-0", {"PartitionName": "all", "Nodes": "ALL"}],
            },
            "slurm_node_options": {"Feature": "avx2"},
        },
    )
    conf = out["head-slurm.conf"]
    assert lines(conf, "SlurmctldHost") == [
        "SlurmctldHost=head(10.10.1.1)",
        "SlurmctldHost=backup(10.10.1.9)",
    ]
    assert lines(conf, "Waittime") == []
    assert "DebugFlags=Gang" in conf
    assert lines(conf, "PartitionName") == [
        "PartitionName=debug Nodes=node-0",
        "PartitionName=all Nodes=ALL",
    ]
    assert all("Feature=avx2" in n for n in lines(conf, "NodeName"))


def test_restart_digests(default: dict[str, str], tmp_path: Path) -> None:
    ctld = default["head-slurmctld-restart.keys"]
    slurmd = default["node-0-slurmd-restart.keys"]
    # Adding or removing a node restarts slurmctld but must leave slurmd alone.
    assert len(lines(ctld, "NodeName")) == 2 and lines(slurmd, "NodeName") == []
    assert "ProctrackType=proctrack/cgroup" in slurmd
    # A partition change is a reconfigure: neither digest moves.
    changed = render(tmp_path, {"slurm_partitions": [{"PartitionName": "p2", "Nodes": "ALL"}]})
    assert changed["head-slurmctld-restart.keys"] == ctld
    assert changed["node-0-slurmd-restart.keys"] == slurmd
    assert changed["head-slurm.conf"] != default["head-slurm.conf"]
