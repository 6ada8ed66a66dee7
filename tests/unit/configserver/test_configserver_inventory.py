"""The inventory published in etcd, read back by the ptc_etcd Ansible inventory plugin through
ansible-inventory: the same hosts and groups as the inventory ptc wrote."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from etcd_env import EtcdServer

from elastic import paths
from elastic.configserver.inventory import lan_inventory, publish

HOSTS: dict[str, Any] = {
    "all": {
        "vars": {
            "ptc_testbed": "local",
            "ansible_ssh_common_args": "-o X",
            "ptc_lan_subnet": "10.10.1.0/24",
        },
        "hosts": {
            name: {
                "ansible_host": "127.0.0.1",
                "ansible_port": 40000 + i,
                "ansible_user": "root",
                "ansible_ssh_private_key_file": "/x/id",
                "ptc_lan_address": f"10.10.1.{i + 1}",
            }
            for i, name in enumerate(["head", "node-0", "cfg-1"])
        },
        "children": {
            "slurm_controller": {"hosts": {"head": None}},
            "slurm_compute": {"hosts": {"node-0": None}},
            "config_server": {"hosts": {"head": None, "cfg-1": None}},
        },
    }
}


def test_lan_view_reaches_hosts_by_lan_address(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(HOSTS))
    inv = lan_inventory(path)
    assert inv["hosts"]["node-0"]["ansible_host"] == "10.10.1.2"
    assert "ansible_port" not in inv["hosts"]["node-0"]
    assert sorted(inv["groups"]["config_server"]) == ["cfg-1", "head"]
    assert "ansible_ssh_common_args" not in inv["vars"]


def test_plugin_lists_the_published_inventory(etcd: EtcdServer, tmp_path: Path) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(HOSTS))
    with etcd.client() as c:
        publish(c, path)
    creds = tmp_path / "etc-ptc-etcd"
    creds.mkdir()
    shutil.copy(etcd.pki / "ca.crt", creds / "ca.crt")
    for ext, sub in (("crt", "clients"), ("key", "clients"), ("password", "users")):
        shutil.copy(etcd.pki / sub / f"root.{ext}", creds / f"root.{ext}")
    (creds / "endpoints").write_text(etcd.url + "\n")
    config = tmp_path / "ptc_etcd.yml"
    config.write_text(f"plugin: ptc_etcd\ncredentials: {creds}\nuser: root\n")
    env = {
        **os.environ,
        "ANSIBLE_INVENTORY_PLUGINS": str(paths.REPO_ROOT / "plugins" / "inventory"),
        "ANSIBLE_INVENTORY_ENABLED": "ptc_etcd",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    out = subprocess.run(
        ["ansible-inventory", "-i", str(config), "--list"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert sorted(listed["_meta"]["hostvars"]) == sorted(HOSTS["all"]["hosts"])
    for group, spec in HOSTS["all"]["children"].items():
        assert sorted(listed[group]["hosts"]) == sorted(spec["hosts"])
    address = listed["_meta"]["hostvars"]["cfg-1"]["ansible_host"]
    # Values from an inventory plugin are untrusted data: ansible-core 2.19 marks them so.
    assert address in ("10.10.1.3", {"__ansible_unsafe": "10.10.1.3"})
