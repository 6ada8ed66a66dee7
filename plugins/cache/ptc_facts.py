"""Ansible cache plugin: each host's facts in a JSON file of a directory, read once per run.

ansible-core wraps every persistent cache plugin (jsonfile among them) so that each read decodes
the host's facts from JSON again, and each write encodes them. The controller reads a host's facts
for every task it runs on that host and for every template that looks at another host's facts,
so on a cluster of tens of nodes those decodes are a good part of the controller's time. This
plugin keeps the facts it read or was given in memory, decoded, as the memory plugin does, and
writes each host's facts through to its file (atomically), so that a later run limited to a few
hosts still finds every node's facts. Files the jsonfile plugin wrote there (``s<N>_HOST``, the
facts JSON-encoded in a ``__payload__`` field) are read when a host has no file of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible.module_utils.common.json import AnsibleJSONEncoder
from ansible.plugins.cache import BaseFileCacheModule

DOCUMENTATION = r"""
name: ptc_facts
short_description: JSON files, one per host, read once per run
description:
  - Like the jsonfile cache plugin (one JSON file per host, written atomically), but what it read
    or was given stays decoded in memory for the rest of the run.
options:
  _uri:
    required: true
    description: The directory of the files; created when missing.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_CONNECTION
    ini:
      - key: fact_caching_connection
        section: defaults
    type: path
  _prefix:
    description: A prefix for the files' names.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_PREFIX
    ini:
      - key: fact_caching_prefix
        section: defaults
  _timeout:
    default: 0
    description:
      - Seconds after its file was written that a host's facts count as gone (0, the default, never).
      - A node's facts describe its hardware and its disk, and ptc forgets them when a node gets a fresh
        disk. Expired facts would leave an elastic pool node that has been powered down for longer out
        of slurm.conf in a run limited to other nodes.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_TIMEOUT
    ini:
      - key: fact_caching_timeout
        section: defaults
    type: integer
"""

_PAYLOAD = "__payload__"


class CacheModule(BaseFileCacheModule):  # type: ignore[misc]
    # Not "persistent" to ansible-core, so that it does not wrap the plugin in a JSON round trip
    # per read: the files are this plugin's own business.
    _persistent = False

    def _load(self, filepath: str) -> Any:
        return json.loads(Path(filepath).read_text())

    def _dump(self, value: Any, filepath: str) -> None:
        Path(filepath).write_text(json.dumps(value, cls=AnsibleJSONEncoder))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Listed once: a host without facts is asked for on every task until it has some.
        self._legacy_files = {
            name.partition("_")[2]: path
            for path in Path(self._cache_dir).glob("s*_*")
            if (name := path.name).partition("_")[0][1:].isdigit()
        }

    def get(self, key: str) -> Any:
        try:
            return super().get(key)
        except KeyError:
            legacy = self._legacy(key)
            if legacy is None:
                raise
            self._cache[key] = legacy
            return legacy

    def _legacy(self, key: str) -> Any:
        """The host's facts as the jsonfile plugin wrote them, or None."""
        path = self._legacy_files.get(key)
        if path is None:
            return None
        try:
            return json.loads(json.loads(path.read_text())[_PAYLOAD])
        except (OSError, ValueError, KeyError, TypeError):
            return None
