"""Experiment names for one test session.

Namespaces and containers are machine-wide while PTC_HOME is per session, so two sessions on one
machine (CI beside a developer's run) must never pick the same experiment name. Every name the
integration tests create carries this session's tag.
"""

from __future__ import annotations

import os
import secrets

RUN_TAG = os.environ.get("PTC_TEST_RUN_TAG") or secrets.token_hex(2)


def experiment_name(base: str, override_env: str | None = None) -> str:
    """`base-TAG`, or the value of `override_env` when a developer pins the name to reuse it."""
    if override_env and os.environ.get(override_env):
        return os.environ[override_env]
    return f"{base}-{RUN_TAG}"
