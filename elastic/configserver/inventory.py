"""The cluster's inventory, published in the configuration server for every node and admin.

``publish`` writes the experiment's inventory (hosts, groups, host variables) as one JSON
document under ``/ptc/inventory/inventory.json``, in the form nodes use: every host reached by
its LAN address as root, as ``ptc-playbook`` on the head does. The Ansible inventory plugin
``plugins/inventory/ptc_etcd.py`` reads it back, so ``ansible-inventory -i ptc_etcd.yml --list``
on any node with an admin certificate lists the same hosts and groups as ``ptc inventory``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from elastic.configserver.client import EtcdClient
from elastic.errors import InputError

KEY = "/ptc/inventory/inventory.json"
# Host variables that only make sense from the workstation; nodes reach each other on the LAN.
_WORKSTATION_ONLY = ("ansible_host", "ansible_port", "ansible_user", "ansible_ssh_private_key_file")


def lan_inventory(hosts_yml: Path) -> dict[str, Any]:
    """hosts.yml (as `ptc inventory` writes it) seen from inside the experiment."""
    import yaml

    try:
        data = yaml.safe_load(hosts_yml.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise InputError(f"{hosts_yml}: cannot read the inventory ({err})") from err
    root = data.get("all", {})
    hosts: dict[str, dict[str, Any]] = {}
    for name, hv in (root.get("hosts") or {}).items():
        hv = dict(hv or {})
        lan = hv.get("ptc_lan_address")
        clean = {k: v for k, v in hv.items() if k not in _WORKSTATION_ONLY}
        if lan:
            clean.update(ansible_host=lan, ansible_user="root")
        hosts[name] = clean
    variables = {
        k: v for k, v in (root.get("vars") or {}).items() if k != "ansible_ssh_common_args"
    }
    groups = {
        g: sorted((spec or {}).get("hosts", {}) or {}, key=list(hosts).index)
        for g, spec in (root.get("children") or {}).items()
    }
    return {"vars": variables, "hosts": hosts, "groups": groups}


def publish(client: EtcdClient, hosts_yml: Path) -> int:
    """Store the inventory; the store's revision after the write."""
    document = lan_inventory(hosts_yml)
    return client.put(KEY, json.dumps(document, sort_keys=True))


def read(client: EtcdClient) -> dict[str, Any]:
    kv = client.get(KEY)
    if kv is None:
        raise InputError(f"{KEY}: no inventory published yet (`ptc config publish NAME`)")
    document: dict[str, Any] = json.loads(kv.value)
    return document
