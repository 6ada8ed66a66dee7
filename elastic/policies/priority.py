"""Priority classes for PAP+: ``field=pattern:priority`` rules, first match wins, else the default.

Example: ``queue=bigmem:10`` gives jobs of queue ``bigmem`` priority 10.0 and every other job 1.0.
Patterns are shell globs (``queue=big*:10``). Any number of rules, so any number of classes.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from elastic.errors import InputError

DEFAULT_PRIORITY = 1.0
RULE_FIELDS = ("queue", "application", "user", "job_id")


@dataclass(frozen=True)
class PriorityClause:
    field: str
    pattern: str
    priority: float

    def matches(self, value: str) -> bool:
        return fnmatch.fnmatchcase(value, self.pattern)


@dataclass(frozen=True)
class PriorityRule:
    clauses: tuple[PriorityClause, ...] = ()
    default: float = DEFAULT_PRIORITY

    @classmethod
    def parse(cls, specs: Iterable[str], default: float = DEFAULT_PRIORITY) -> PriorityRule:
        clauses: list[PriorityClause] = []
        for raw in specs:
            for spec in (part.strip() for part in raw.split(",")):
                if spec:
                    clauses.append(_parse_clause(spec))
        return cls(tuple(clauses), default)

    def priority(self, attributes: dict[str, str]) -> float:
        for clause in self.clauses:
            if clause.matches(attributes.get(clause.field, "")):
                return clause.priority
        return self.default

    def apply(self, columns: Mapping[str, Sequence[str]], count: int) -> list[float]:
        """Priorities for ``count`` jobs whose attributes are given column-wise."""
        out = [self.default] * count
        for clause in reversed(self.clauses):  # reversed: earlier clauses overwrite later ones
            values = columns.get(clause.field)
            if values is None:
                raise InputError(f"priority rule field {clause.field!r}: no such trace column")
            for i, value in enumerate(values):
                if clause.matches(value):
                    out[i] = clause.priority
        return out


def _parse_clause(spec: str) -> PriorityClause:
    where = f"priority rule {spec!r}"
    left, sep, number = spec.rpartition(":")
    if not sep:
        raise InputError(f"{where}: expected field=pattern:priority, e.g. queue=bigmem:10")
    name, eq, pattern = left.partition("=")
    name = name.strip()
    if not eq or not pattern:
        raise InputError(f"{where}: expected field=pattern:priority, e.g. queue=bigmem:10")
    if name not in RULE_FIELDS:
        raise InputError(f"{where}: unknown field {name!r}; use one of {', '.join(RULE_FIELDS)}")
    try:
        value = float(number)
    except ValueError:
        raise InputError(f"{where}: priority {number!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{where}: priority must be a finite number > 0")
    return PriorityClause(name, pattern.strip(), value)
