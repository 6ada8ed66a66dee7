"""Ansible inventory plugin: the cluster's inventory as ptc published it in the configuration
server (etcd). Example ``ptc_etcd.yml``::

    plugin: ptc_etcd
    credentials: /etc/ptc/etcd   # ca.crt, endpoints, USER.crt, USER.key, USER.password
    user: root

Uses ptc's own client (this file lives in ptc's repository, which it puts on sys.path).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin

DOCUMENTATION = r"""
name: ptc_etcd
short_description: ptc's cluster inventory from the configuration server (etcd)
description:
  - Reads the inventory C(ptc config publish) stored in etcd, over TLS with a client certificate.
options:
  plugin:
    description: The name of this plugin.
    required: true
    choices: [ptc_etcd]
  credentials:
    description: Directory holding ca.crt, endpoints and the user's certificate, key and password.
    type: path
    default: /etc/ptc/etcd
  user:
    description: The etcd user to read as.
    type: str
    default: root
"""

REPO = Path(__file__).resolve().parents[2]


class InventoryModule(BaseInventoryPlugin):
    NAME = "ptc_etcd"

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith(("ptc_etcd.yml", "ptc_etcd.yaml"))

    def parse(self, inventory, loader, path, cache=True):  # type: ignore[no-untyped-def]
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        if str(REPO) not in sys.path:
            sys.path.insert(0, str(REPO))
        from elastic.configserver import inventory as published
        from elastic.configserver.node import open_node
        from elastic.errors import PtcError

        try:
            with open_node(self.get_option("user"), Path(self.get_option("credentials"))) as c:
                document = published.read(c)
        except PtcError as err:
            raise AnsibleParserError(f"ptc_etcd: {err}") from err
        for name, hostvars in document["hosts"].items():
            self.inventory.add_host(name)
            for key, value in hostvars.items():
                self.inventory.set_variable(name, key, value)
        for key, value in document["vars"].items():
            self.inventory.set_variable("all", key, value)
        for group, members in document["groups"].items():
            self.inventory.add_group(group)
            for host in members:
                self.inventory.add_child(group, host)
