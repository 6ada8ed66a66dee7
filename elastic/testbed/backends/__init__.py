"""Testbed backends by name: ``local`` (containers on this machine) and ``cloudlab``.

Each backend is a class with the ``Backend`` protocol (``base.py``) and a constructor
``(site, on_event=None)``. The map holds import paths, as testinfra's backends do, so a
backend's dependencies (geni-lib's aggregate code, podman) load only when it is used.
"""

from __future__ import annotations

import importlib

from elastic.errors import InputError
from elastic.events import OnEvent
from elastic.testbed.backends.base import Backend, Capabilities

BACKENDS: dict[str, str] = {
    "local": "elastic.testbed.backends.local.backend:LocalBackend",
    "cloudlab": "elastic.testbed.backends.cloudlab.backend:CloudLabBackend",
}


def names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def backend_class(testbed: str) -> type[Backend]:
    """The class of the backend called ``testbed``; InputError naming the known ones otherwise."""
    try:
        module_name, class_name = BACKENDS[testbed].split(":")
    except KeyError:
        raise InputError(f"unknown testbed {testbed!r} (known: {', '.join(BACKENDS)})") from None
    cls: type[Backend] = getattr(importlib.import_module(module_name), class_name)
    return cls


def capabilities(testbed: str) -> Capabilities:
    """What the testbed called ``testbed`` can do, as its backend declares it."""
    return backend_class(testbed).capabilities


def get(testbed: str, site: str | None = None, on_event: OnEvent | None = None) -> Backend:
    """The backend called ``testbed``; InputError naming the known ones otherwise."""
    cls: type = backend_class(testbed)
    backend: Backend = cls(site, on_event=on_event)
    return backend
