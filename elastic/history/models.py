"""The sequential objects a history is checked against.

A model's ``step`` gives the state after an operation that took effect in ``state``, or
:data:`IMPOSSIBLE` when the operation could not have returned what it did from there (None is a
state: a register never written). An indeterminate operation
(no result) is applied for its effect alone. States must hash: the search remembers them.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from elastic.errors import InputError
from elastic.history.ops import Op


class _Impossible:
    def __repr__(self) -> str:
        return "IMPOSSIBLE"


IMPOSSIBLE: Final = _Impossible()


class Model(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def functions(self) -> frozenset[str]: ...

    def initial(self) -> Hashable: ...

    def step(self, state: Any, op: Op) -> Hashable: ...


def _read(state: Any, op: Op) -> Hashable:
    """A read: its answer, if it has one, must be the state; it changes nothing."""
    if op.determinate and op.result != state:
        return IMPOSSIBLE
    return state  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Register:
    """A register: ``write`` v, ``read`` -> v."""

    start: Hashable = None
    name: str = "register"
    functions: frozenset[str] = frozenset({"read", "write"})

    def initial(self) -> Hashable:
        return self.start

    def step(self, state: Any, op: Op) -> Hashable:
        if op.f == "write":
            return op.value  # type: ignore[no-any-return]
        return _read(state, op)


@dataclass(frozen=True)
class Counter:
    """A counter: ``add`` n (its result, if any, is ignored), ``read`` -> the sum."""

    start: int = 0
    name: str = "counter"
    functions: frozenset[str] = frozenset({"read", "add"})

    def initial(self) -> Hashable:
        return self.start

    def step(self, state: Any, op: Op) -> Hashable:
        if op.f == "add":
            return int(state) + int(op.value)
        return _read(state, op)


@dataclass(frozen=True)
class CasRegister:
    """A register with compare-and-swap: ``cas`` (old, new) -> whether it swapped; ``write``
    and ``read`` as :class:`Register`. An indeterminate cas swaps if it can."""

    start: Hashable = None
    name: str = "cas-register"
    functions: frozenset[str] = frozenset({"read", "write", "cas"})

    def initial(self) -> Hashable:
        return self.start

    def step(self, state: Any, op: Op) -> Hashable:
        if op.f != "cas":
            return Register().step(state, op)
        old, new = op.value
        swaps = state == old
        if op.determinate and bool(op.result) != swaps:
            return IMPOSSIBLE
        return new if swaps else state  # type: ignore[no-any-return]


def check_functions(model: Model, ops: list[Op]) -> None:
    """Refuse, naming it, an operation the model does not know, or a cas without (old, new)."""
    for op in ops:
        if op.f not in model.functions:
            raise InputError(
                f"operation {op.index} ({op.process}): {op.f!r} is not an operation of a "
                f"{model.name} ({', '.join(sorted(model.functions))})"
            )
        if op.f == "cas" and not (isinstance(op.value, tuple) and len(op.value) == 2):
            raise InputError(f"operation {op.index} ({op.process}): cas needs [old, new]")
        if op.f == "add" and not isinstance(op.value, int):
            raise InputError(f"operation {op.index} ({op.process}): add needs an integer")
