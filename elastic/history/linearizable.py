"""Whether a history is linearizable: Wing and Gong's search, with Lowe's memoisation.

The history becomes a list of call and return entries in time order (an indeterminate
operation's return at infinity; failed operations left out, as they took no effect). Walking
the list, a call whose operation the model can apply now is linearized: both its entries leave
the list and the search goes on from the start. Reaching a return means its operation was not
linearized in time, so the last choice is undone and the next call tried instead. The history is
linearizable once every determinate operation is linearized; an indeterminate one may be
linearized anywhere after its call, or never. A (linearized set, state) pair already explored is
not explored again, which keeps the search polynomial on most real histories; ``max_steps``
bounds it on the rest, and the answer is then "unknown".

Calls sort before returns at the same instant: operations that touch in time count as
concurrent, the reading that reports fewer anomalies.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from elastic.errors import InputError
from elastic.history.models import IMPOSSIBLE, Model, check_functions
from elastic.history.ops import Op, Outcome


@dataclass
class _Entry:
    op: Op
    is_call: bool
    match: _Entry | None = None  # a call's return entry
    prev: _Entry | None = None
    next: _Entry | None = None


@dataclass(frozen=True)
class Result:
    """``valid``: True, False, or None when ``max_steps`` ran out first. When False, ``stuck``
    is an operation that could not be linearized after the longest prefix found (``prefix``,
    in the order found)."""

    valid: bool | None
    ops: int
    steps: int
    stuck: Op | None = None
    prefix: tuple[Op, ...] = field(default=())


def _entries(ops: Sequence[Op]) -> _Entry:
    """The head (a sentinel) of the doubly linked list of call and return entries."""
    events: list[tuple[float, int, int, _Entry]] = []
    for op in ops:
        call, ret = _Entry(op, True), _Entry(op, False)
        call.match = ret
        events.append((op.invoked, 0, op.index, call))
        events.append((op.returned, 1, op.index, ret))
    events.sort(key=lambda e: e[:3])
    head = _Entry(Op(-1, "", "", None, Outcome.OK, None, 0.0, 0.0), True)
    last = head
    for *_, entry in events:
        last.next, entry.prev = entry, last
        last = entry
    return head


def _lift(call: _Entry) -> None:
    for entry in (call, call.match):
        assert entry is not None and entry.prev is not None
        entry.prev.next = entry.next
        if entry.next is not None:
            entry.next.prev = entry.prev


def _unlift(call: _Entry) -> None:
    for entry in (call.match, call):
        assert entry is not None and entry.prev is not None
        entry.prev.next = entry
        if entry.next is not None:
            entry.next.prev = entry


def check(model: Model, ops: Sequence[Op], max_steps: int = 1_000_000) -> Result:
    """Whether ``ops`` (from :func:`elastic.history.ops.from_events`) is linearizable with
    respect to ``model``. Raises InputError for an operation the model does not know."""
    check_functions(model, list(ops))
    if len({op.index for op in ops}) != len(ops):
        # the search keeps one bit per operation, by its index
        raise InputError("operations: each needs an index of its own")
    live = [op for op in ops if op.outcome is not Outcome.FAIL]
    determinate = sum(1 for op in live if op.determinate)
    head = _entries(live)
    state: Hashable = model.initial()
    linearized = 0  # a bit per operation index
    done = 0  # determinate operations linearized
    stack: list[tuple[_Entry, Hashable]] = []
    seen: set[tuple[int, Hashable]] = set()
    best: tuple[int, Op | None, tuple[Op, ...]] = (-1, None, ())
    steps = 0
    entry = head.next
    while done < determinate:
        steps += 1
        if steps > max_steps:
            return Result(None, len(ops), steps)
        assert entry is not None  # a determinate return is always left ahead
        if entry.is_call:
            after = model.step(state, entry.op)
            bit = 1 << entry.op.index
            if after is not IMPOSSIBLE and (linearized | bit, after) not in seen:
                seen.add((linearized | bit, after))
                stack.append((entry, state))
                state, linearized = after, linearized | bit
                done += entry.op.determinate
                _lift(entry)
                entry = head.next
            else:
                entry = entry.next
            continue
        # a return reached: its operation was not linearized before it returned
        if len(stack) > best[0]:
            best = (len(stack), entry.op, tuple(e.op for e, _ in stack))
        if not stack:
            return Result(False, len(ops), steps, best[1], best[2])
        call, state = stack.pop()
        linearized &= ~(1 << call.op.index)
        done -= call.op.determinate
        _unlift(call)
        entry = call.next
    return Result(True, len(ops), steps)
