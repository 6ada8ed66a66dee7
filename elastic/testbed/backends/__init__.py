"""Testbed backends by name: ``local`` (containers on this machine) and ``cloudlab``.

Each backend is a class with the ``Backend`` protocol (``base.py``) and a constructor
``(site, on_event=None)``. The map holds import paths, as testinfra's backends do, so a
backend's dependencies (geni-lib's aggregate code, podman) load only when it is used.
"""

from __future__ import annotations

import importlib

from elastic.errors import InputError
from elastic.events import OnEvent
from elastic.testbed.backends.base import Backend

BACKENDS: dict[str, str] = {
    "local": "elastic.testbed.backends.local.backend:LocalBackend",
    "cloudlab": "elastic.testbed.backends.cloudlab.backend:CloudLabBackend",
}

# Backends that make the nodes themselves and pin each node's host keys in the experiment's
# known_hosts before the first SSH connection (elastic.testbed.known_hosts); with the others a
# key is recorded at first contact.
PINS_HOST_KEYS = frozenset({"local"})


def names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def get(testbed: str, site: str | None = None, on_event: OnEvent | None = None) -> Backend:
    """The backend called ``testbed``; InputError naming the known ones otherwise."""
    try:
        module_name, class_name = BACKENDS[testbed].split(":")
    except KeyError:
        raise InputError(f"unknown testbed {testbed!r} (known: {', '.join(BACKENDS)})") from None
    cls = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = cls(site, on_event=on_event)
    return backend
