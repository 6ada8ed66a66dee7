"""Which inventory hosts a selector means: ``ptc run NAME SELECTOR -- CMD``.

A selector is a comma-separated list of terms; each term is an inventory group (``all`` is
every host), a host name, or a glob over host names (``node-*``, ``node-[0-3]``). The hosts
come out once each, in inventory order. A term that matches nothing is an error naming it and
what exists, not an empty selection.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from elastic.errors import InputError, NotFoundError

GLOB_CHARS = "*?["


@dataclass(frozen=True)
class Hosts:
    """An inventory's hosts, in order, and its groups."""

    hosts: tuple[str, ...]
    groups: Mapping[str, tuple[str, ...]]

    @classmethod
    def from_inventory(cls, doc: Mapping[str, Any]) -> Hosts:
        """From a parsed Ansible YAML inventory (``all: {hosts, children}``, one level of
        children, as ``ptc inventory`` writes it)."""
        top = doc.get("all") or {}
        hosts = list(top.get("hosts") or {})
        groups: dict[str, tuple[str, ...]] = {}
        for name, body in (top.get("children") or {}).items():
            members = tuple((body or {}).get("hosts") or {})
            groups[str(name)] = members
            hosts += [h for h in members if h not in hosts]
        return cls(tuple(hosts), groups)


def select(selector: str, inventory: Hosts) -> list[str]:
    """The hosts ``selector`` names, in inventory order."""
    terms = [t.strip() for t in selector.split(",")]
    if not selector.strip() or not all(terms):
        raise InputError(
            f"selector {selector!r}: empty term (give groups, host names or globs, "
            "separated by commas)"
        )
    chosen: set[str] = set()
    for term in terms:
        matched = _match(term, inventory)
        if not matched:
            raise NotFoundError(
                f"selector term {term!r} matches no host (groups: "
                f"{', '.join(['all', *sorted(inventory.groups)])}; hosts: "
                f"{', '.join(inventory.hosts) or 'none'})"
            )
        chosen.update(matched)
    return [h for h in inventory.hosts if h in chosen]


def _match(term: str, inventory: Hosts) -> Sequence[str]:
    if term == "all":
        return inventory.hosts
    if term in inventory.groups:
        return inventory.groups[term]
    if term in inventory.hosts:
        return [term]
    if any(c in term for c in GLOB_CHARS):
        return [h for h in inventory.hosts if fnmatch.fnmatchcase(h, term)]
    return []
