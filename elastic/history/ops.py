"""A history: operations with their invocation and completion times, paired from events.

Events are Jepsen's: ``{"process": P, "type": "invoke" | "ok" | "fail" | "info", "f": F,
"value": V, "time": T}``. A process has at most one operation outstanding; the completion that
follows its invocation closes it. ``ok``: the operation took effect, and its ``value`` is the
result (what a read saw, whether a compare-and-swap succeeded). ``fail``: it certainly did not
take effect. ``info``, or no completion at all: it may have taken effect at any time after its
invocation, or never (a timeout, a connection lost mid-call).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from elastic.errors import InputError


class Outcome(Enum):
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


@dataclass(frozen=True)
class Op:
    """One operation. ``value`` is its argument (None for a read); ``result`` what it returned
    (None unless OK); ``returned`` is infinite for an indeterminate one."""

    index: int
    process: str
    f: str
    value: Any
    outcome: Outcome
    result: Any
    invoked: float
    returned: float

    @property
    def determinate(self) -> bool:
        return self.outcome is Outcome.OK


def _freeze(value: Any) -> Any:
    """JSON lists as tuples, so values hash and compare as states do."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def from_events(events: Iterable[Mapping[str, Any]], where: str = "history") -> list[Op]:
    """Pair each process's invocation with its completion. Failed operations are kept (their
    outcome says they did not happen); a process's invocation left open is indeterminate."""
    open_: dict[str, tuple[int, Mapping[str, Any], float]] = {}
    ops: list[Op] = []
    for n, event in enumerate(events, 1):
        place = f"{where}: event {n}"
        try:
            process, kind, f, time = (
                str(event["process"]),
                str(event["type"]),
                str(event["f"]),
                float(event["time"]),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(
                f"{place}: needs process, type, f and a numeric time ({err})"
            ) from None
        if kind == "invoke":
            if process in open_:
                raise InputError(f"{place}: process {process} invokes while an operation is open")
            open_[process] = (n, event, time)
            continue
        if kind not in {o.value for o in Outcome}:
            raise InputError(f"{place}: type {kind!r} is not invoke, ok, fail or info")
        if process not in open_:
            raise InputError(f"{place}: process {process} completes nothing it invoked")
        _, invocation, invoked = open_.pop(process)
        if str(invocation["f"]) != f:
            raise InputError(
                f"{place}: completes {f!r} but process {process} invoked {invocation['f']!r}"
            )
        if time < invoked:
            raise InputError(f"{place}: completes before its invocation")
        outcome = Outcome(kind)
        ops.append(
            Op(
                index=len(ops),
                process=process,
                f=f,
                value=_freeze(invocation.get("value")),
                outcome=outcome,
                result=_freeze(event.get("value")) if outcome is Outcome.OK else None,
                invoked=invoked,
                returned=time if outcome is not Outcome.INFO else math.inf,
            )
        )
    for process, (_, invocation, invoked) in open_.items():
        ops.append(
            Op(
                index=len(ops),
                process=process,
                f=str(invocation["f"]),
                value=_freeze(invocation.get("value")),
                outcome=Outcome.INFO,
                result=None,
                invoked=invoked,
                returned=math.inf,
            )
        )
    return ops


def load(path: Path) -> list[Op]:
    """A history stored as JSON lines, one event per line."""
    events = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise InputError(f"{path}: line {n}: not JSON ({err.msg})") from None
    return from_events(events, str(path))
