"""The roles' own variables as Ansible would render them, for tests that hold the code to the
paths and names the roles decide (no inventory: anything needing one stays as written)."""

from __future__ import annotations

import contextlib
import shlex
from typing import Any

import jinja2
import yaml

from elastic.paths import REPO_ROOT

ROLES = REPO_ROOT / "roles"


def render(text: str, context: dict[str, Any]) -> str:
    """``text`` as Ansible renders it, for the plain variables and filters the roles use to
    build paths; anything else (lookups, groups, host facts) is undefined and raises."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["quote"] = shlex.quote
    return env.from_string(text).render(context)


def role_context(role: str) -> dict[str, Any]:
    """A role's defaults and vars, each rendered as far as this can (paths built from other
    variables are; those needing an inventory or a lookup stay as written)."""
    context: dict[str, Any] = {"ansible_managed": ""}
    for part in ("defaults", "vars"):
        path = ROLES / role / part / "main.yml"
        if path.is_file():
            context.update(yaml.safe_load(path.read_text()) or {})
    for _ in range(3):  # variables built from variables built from variables
        for key, value in context.items():
            if isinstance(value, str) and "{{" in value:
                with contextlib.suppress(jinja2.TemplateError, TypeError):
                    context[key] = render(value, context)
    return context
