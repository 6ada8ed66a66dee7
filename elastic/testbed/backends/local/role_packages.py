"""The Debian packages the roles install, read from the roles themselves.

The node image caches these (downloaded, not installed) so a deploy installs for real without
the network. Reading them from the roles' apt tasks keeps the cache from drifting: a package a
role starts to install is cached with the next image, and one no role installs any more drops
out. A task's ``name`` may be a literal, a list, or a template over role defaults and vars
(``{{ hpcc_packages }}``, or a variable of the task itself: ``vars: {__munge_packages: [...]}``);
templates are rendered against every role's defaults and vars and the task's own vars (and its
blocks'), with the platform taken as Debian (the local testbed's nodes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from jinja2 import StrictUndefined, TemplateError
from jinja2.nativetypes import NativeEnvironment

from elastic.errors import PtcError

_APT_MODULES = {"ansible.builtin.apt", "apt", "ansible.builtin.package", "package"}
_NESTED = ("block", "rescue", "always")
# What a block passes down to its tasks besides its variables.
_BLOCK_KEYWORDS = ("no_log", "delegate_to")
PLATFORM_FACTS = {
    "distribution": "Debian",
    "distribution_major_version": "12",
    "architecture": "x86_64",
}


def role_packages(roles_dir: Path) -> tuple[str, ...]:
    """Every package some role's apt task installs, sorted and without duplicates."""
    with_recommends, without = role_package_sets(roles_dir)
    return tuple(sorted({*with_recommends, *without}))


def role_package_sets(roles_dir: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The roles' packages as two sorted sets: those installed with their Recommends (apt's
    default) and those a task installs with ``install_recommends: false``.

    A package some task installs with Recommends is in the first set only."""
    context = _variables(roles_dir)
    found: set[str] = set()
    plain: set[str] = set()
    for task_file in sorted(roles_dir.glob("*/tasks/*.yml")):
        for task in _tasks(yaml.safe_load(task_file.read_text()) or []):
            module = next((m for m in _APT_MODULES if m in task), None)
            if module is None:
                continue
            args = task[module] if isinstance(task[module], Mapping) else {}
            if args.get("state", "present") == "absent":
                continue
            where = f"{task_file.relative_to(roles_dir.parent)}: task {task.get('name', '?')!r}"
            names = _names(args.get("name", args.get("pkg")), task_context(task, context), where)
            if args.get("install_recommends", True) in (False, "false", "no"):
                plain.update(names)
            else:
                found.update(names)
    return tuple(sorted(found)), tuple(sorted(plain - found))


def _tasks(
    items: list[Any], inherited: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Every task and block, nested ones too; a task in a block has the block's ``vars`` under
    its own, and the block's ``no_log`` and ``delegate_to`` unless it sets them (as Ansible gives
    them to it)."""
    for item in items:
        if not isinstance(item, dict):
            continue
        if inherited:
            outer_vars = inherited.get("vars") or {}
            item = {
                **{k: v for k, v in inherited.items() if k != "vars"},
                **item,
                "vars": {**outer_vars, **(item.get("vars") or {})},
            }
        yield item
        for key in _NESTED:
            passed = {k: item[k] for k in ("vars", *_BLOCK_KEYWORDS) if k in item}
            yield from _tasks(item.get(key) or [], passed)


def task_context(task: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """The roles' variables with the task's own ``vars`` over them."""
    return {**context, **(task.get("vars") or {})}


def _variables(roles_dir: Path) -> dict[str, Any]:
    """Every role's defaults and vars (names are role-prefixed, so they do not clash)."""
    context: dict[str, Any] = {"ansible_facts": PLATFORM_FACTS}
    for pattern in ("*/defaults/main.yml", "*/vars/main.yml", "*/vars/Debian.yml"):
        for path in sorted(roles_dir.glob(pattern)):
            context.update(yaml.safe_load(path.read_text()) or {})
    return context


def _names(value: Any, context: dict[str, Any], where: str) -> list[str]:
    env = NativeEnvironment(undefined=StrictUndefined)
    for _ in range(5):  # a default may name another variable; follow a few levels
        if not (isinstance(value, str) and "{{" in value):
            break
        try:
            value = env.from_string(value).render(context)
        except TemplateError as err:
            raise PtcError(f"{where}: cannot read its package names ({err})") from err
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, str) and "{{" in item:
            out += _names(item, context, where)
        elif isinstance(item, str) and item:
            out.append(item)
        else:
            raise PtcError(f"{where}: package name {item!r} is not a string")
    return out
