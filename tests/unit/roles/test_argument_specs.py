"""Each role's defaults (defaults/main.yml) and argument specs (meta/argument_specs.yml) agree.

A default is written twice, once where Ansible takes it from and once where users and
ansible-doc read it; these tests keep the two the same:

- every variable of defaults/main.yml is an option of an entry point (``main``, or the entry
  point it belongs to), and every entry point that has it as an option gives it the same
  ``default`` (parsed YAML values; a templated default compares as its text);
- every option with a ``default`` is in defaults/main.yml;
- an option's ``type`` (and a list's ``elements``) fits its default's value;
- a README names no variable that does not exist: a name in backquotes that starts with a
  role's prefix (``slurm_``, ``__slurm_``) is that role's default, option, vars entry, or a fact
  or result its tasks set (unless it is a role's name or a default's value, such as the group
  slurm_dbd).

Planted disagreements in a role made for the test show each check fails.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic.paths import REPO_ROOT

ROLES = REPO_ROOT / "roles"
ROLE_NAMES = sorted(p.parent.parent.name for p in ROLES.glob("*/meta/argument_specs.yml"))

# The Python types a default of each argument-spec type may have.
TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "path": (str,),
    "int": (int,),
    "float": (float, int),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
    "raw": (object,),
}
_IDENTIFIER = re.compile(r"`(_{0,2}[a-z][a-z0-9_]*)`")


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


def entry_points(role: Path) -> dict[str, dict[str, Any]]:
    """Each entry point's options."""
    specs = (_load(role / "meta" / "argument_specs.yml") or {}).get("argument_specs") or {}
    return {name: spec.get("options") or {} for name, spec in specs.items()}


def _fits(value: Any, spec_type: str) -> bool:
    if isinstance(value, str) and "{{" in value:
        return True  # a template: its type is known once Ansible renders it
    if spec_type in ("int", "float") and isinstance(value, bool):
        return False
    return isinstance(value, TYPES.get(spec_type, (object,)))


def disagreements(role: Path) -> list[str]:
    """What defaults/main.yml and meta/argument_specs.yml of ``role`` disagree on."""
    defaults = _load(role / "defaults" / "main.yml") or {}
    points = entry_points(role)
    found = []
    for name, value in defaults.items():
        where = [point for point, options in points.items() if name in options]
        if not where:
            found.append(f"{name}: in defaults/main.yml, an option of no entry point")
        for point in where:
            option = points[point][name]
            if "default" not in option:
                found.append(f"{point}.{name}: no default, defaults/main.yml has {value!r}")
            elif option["default"] != value:
                found.append(
                    f"{point}.{name}: default {option['default']!r}, "
                    f"defaults/main.yml has {value!r}"
                )
    for point, options in points.items():
        for name, option in options.items():
            if "default" in option and name not in defaults:
                found.append(f"{point}.{name}: default {option['default']!r}, not in defaults")
            if "default" not in option:
                continue
            value, spec_type = option["default"], option.get("type", "str")
            if not _fits(value, spec_type):
                found.append(f"{point}.{name}: type {spec_type}, default {value!r}")
            elements = option.get("elements")
            if spec_type == "list" and elements and isinstance(value, list):
                wrong = [item for item in value if not _fits(item, elements)]
                if wrong:
                    found.append(f"{point}.{name}: elements {elements}, default has {wrong!r}")
    return found


def _set_by_tasks(role: Path) -> set[str]:
    """The facts (set_fact) and results (register) the role's tasks and handlers set."""
    names: set[str] = set()

    def walk(items: Any) -> Iterator[dict[str, Any]]:
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                yield item
                for key in ("block", "rescue", "always"):
                    yield from walk(item.get(key))

    for path in [*role.glob("tasks/*.yml"), *role.glob("handlers/*.yml")]:
        for task in walk(_load(path)):
            if isinstance(task.get("register"), str):
                names.add(task["register"])
            facts = task.get("ansible.builtin.set_fact") or task.get("set_fact")
            if isinstance(facts, dict):
                names |= {k for k in facts if k != "cacheable"}
    return names


@functools.cache
def known_variables(role: Path) -> frozenset[str]:
    """Every variable the role has: defaults, options, vars files, and what its tasks set."""
    names = set(_load(role / "defaults" / "main.yml") or {})
    for options in entry_points(role).values():
        names |= set(options)
    for path in role.glob("vars/*.yml"):
        names |= set(_load(path) or {})
    return frozenset(names | _set_by_tasks(role))


def _default_values(roles: Path) -> set[str]:
    """Every text a default holds (group names such as slurm_dbd are values, not variables)."""
    values: set[str] = set()
    for path in roles.glob("*/defaults/main.yml"):
        values |= {v for v in (_load(path) or {}).values() if isinstance(v, str)}
    return values


def unknown_in_readme(roles: Path, role: Path) -> list[str]:
    """Variables the role's README names in backquotes that no role has."""
    readme = role / "README.md"
    if not readme.exists():
        return []
    prefixes = sorted((p.name for p in roles.iterdir() if (p / "meta").is_dir()), key=len)
    values = _default_values(roles)
    found = []
    for name in sorted(set(_IDENTIFIER.findall(readme.read_text()))):
        owners = [p for p in prefixes if name.lstrip("_").startswith(f"{p}_")]
        if not owners or name in values or name in prefixes:
            continue
        owner = owners[-1]  # the longest prefix: slurm_accounting_x is slurm_accounting's
        if name not in known_variables(roles / owner):
            found.append(f"README.md names {name}, which the {owner} role does not have")
    return found


@pytest.mark.parametrize("name", ROLE_NAMES)
def test_defaults_and_argument_specs_agree(name: str) -> None:
    assert disagreements(ROLES / name) == []


@pytest.mark.parametrize("name", ROLE_NAMES)
def test_readme_names_only_variables_that_exist(name: str) -> None:
    assert unknown_in_readme(ROLES, ROLES / name) == []


def test_every_role_has_defaults_and_argument_specs() -> None:
    roles = sorted(p.name for p in ROLES.iterdir() if (p / "tasks").is_dir())
    assert roles == ROLE_NAMES
    assert all((ROLES / name / "defaults" / "main.yml").exists() for name in roles)


# A role made for the tests, in agreement, then with one disagreement planted at a time.
DEFAULTS: dict[str, Any] = {
    "demo_name": "ptc",
    "demo_port": 6817,
    "demo_enabled": True,
    "demo_items": ["a", "b"],
    "demo_prefix": "/opt/{{ demo_name }}",
}
SPECS: dict[str, Any] = {
    "argument_specs": {
        "main": {
            "short_description": "A role for the tests.",
            "options": {
                "demo_name": {"type": "str", "default": "ptc", "description": "x"},
                "demo_port": {"type": "int", "default": 6817, "description": "x"},
                "demo_enabled": {"type": "bool", "default": True, "description": "x"},
                "demo_items": {
                    "type": "list",
                    "elements": "str",
                    "default": ["a", "b"],
                    "description": "x",
                },
                "demo_prefix": {"type": "path", "default": "/opt/{{ demo_name }}"},
                "demo_required": {"type": "str", "required": True, "description": "x"},
            },
        },
        "other": {
            "short_description": "Another entry point.",
            "options": {"demo_port": {"type": "int", "default": 6817, "description": "x"}},
        },
    }
}


def make_role(
    root: Path, defaults: dict[str, Any], specs: dict[str, Any], readme: str = ""
) -> Path:
    role = root / "demo"
    for directory in ("defaults", "meta", "tasks"):
        (role / directory).mkdir(parents=True, exist_ok=True)
    (role / "defaults" / "main.yml").write_text(yaml.safe_dump(defaults))
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(specs))
    (role / "tasks" / "main.yml").write_text(
        yaml.safe_dump([{"ansible.builtin.set_fact": {"demo_fact": 1}}])
    )
    if readme:
        (role / "README.md").write_text(readme)
    return role


def planted(**options: dict[str, Any]) -> dict[str, Any]:
    """SPECS with these options of the main entry point instead."""
    points = SPECS["argument_specs"]
    main = {**points["main"]["options"], **options}
    return {"argument_specs": {**points, "main": {**points["main"], "options": main}}}


def test_the_role_made_for_the_tests_agrees(tmp_path: Path) -> None:
    role = make_role(tmp_path, DEFAULTS, SPECS, "`demo_name` and `demo_fact`, `demo-role`.\n")
    assert disagreements(role) == []
    assert unknown_in_readme(tmp_path, role) == []


@pytest.mark.parametrize(
    ("defaults", "specs", "message"),
    [
        (
            DEFAULTS,
            planted(demo_port={"type": "int", "default": 6818}),
            "main.demo_port: default 6818, defaults/main.yml has 6817",
        ),
        (
            {**DEFAULTS, "demo_port": 6818},
            SPECS,
            "other.demo_port: default 6817, defaults/main.yml has 6818",
        ),
        (
            DEFAULTS,
            planted(demo_prefix={"type": "path", "default": "/opt/<name>"}),
            "main.demo_prefix: default '/opt/<name>', defaults/main.yml has '/opt/{{ demo_name }}'",
        ),
        (
            {**DEFAULTS, "demo_new": 1},
            SPECS,
            "demo_new: in defaults/main.yml, an option of no entry point",
        ),
        (
            DEFAULTS,
            planted(demo_name={"type": "str"}),
            "main.demo_name: no default, defaults/main.yml has 'ptc'",
        ),
        (
            DEFAULTS,
            planted(demo_gone={"type": "str", "default": "x"}),
            "main.demo_gone: default 'x', not in defaults",
        ),
        (
            {**DEFAULTS, "demo_port": "6817"},
            planted(demo_port={"type": "int", "default": "6817"}),
            "main.demo_port: type int, default '6817'",
        ),
        (
            {**DEFAULTS, "demo_enabled": "yes"},
            planted(demo_enabled={"type": "bool", "default": "yes"}),
            "main.demo_enabled: type bool, default 'yes'",
        ),
        (
            DEFAULTS,
            planted(demo_items={"type": "list", "elements": "int", "default": ["a", "b"]}),
            "main.demo_items: elements int, default has ['a', 'b']",
        ),
    ],
)
def test_a_planted_disagreement_is_found(
    tmp_path: Path, defaults: dict[str, Any], specs: dict[str, Any], message: str
) -> None:
    assert message in disagreements(make_role(tmp_path, defaults, specs))


def test_a_readme_naming_a_variable_that_does_not_exist_is_found(tmp_path: Path) -> None:
    role = make_role(tmp_path, DEFAULTS, SPECS, "Set `demo_nmae` (and `demo_name`).\n")
    assert unknown_in_readme(tmp_path, role) == [
        "README.md names demo_nmae, which the demo role does not have"
    ]
