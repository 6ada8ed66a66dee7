"""Loads Jinja's filters and tests, and the action plugins, once in ansible-playbook's main
process, before it forks a worker for each task and host.

A worker loads every filter and test file on its first template with a filter or a test, and
the action plugin of its task, and ansible-playbook's main process never does either: so every
worker of a run loaded them again. Loaded here, every worker inherits them from the fork.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, filter_loader, test_loader

DOCUMENTATION = """
    name: ptc_warm
    type: aggregate
    short_description: load filters, tests and action plugins before the workers fork
    description:
      - Loads every filter, test and action plugin ansible-playbook finds outside collections
        once, at the playbook's start, so that the worker forked for each task and host
        inherits them instead of loading them again.
    requirements:
      - enabled in callbacks_enabled (ptc deploy enables it)
"""


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ptc_warm"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook: Any) -> None:
        for loader in (filter_loader, test_loader):
            for _ in loader.all():
                pass
        for _ in action_loader.all(class_only=True):
            pass
