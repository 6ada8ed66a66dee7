"""The linearizability check: known anomalies rejected, known-good histories accepted, and
agreement with an exhaustive search on small random histories."""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.errors import InputError
from elastic.history.linearizable import check
from elastic.history.models import IMPOSSIBLE, CasRegister, Counter, Model, Register
from elastic.history.ops import Op, Outcome, from_events

INF = math.inf


def op(
    index: int, f: str, value: Any, result: Any, t: tuple[float, float], outcome: str = "ok"
) -> Op:
    kind = Outcome(outcome)
    return Op(
        index,
        f"p{index}",
        f,
        value,
        kind,
        result if kind is Outcome.OK else None,
        t[0],
        t[1] if kind is not Outcome.INFO else INF,
    )


def test_a_read_of_the_old_value_after_a_write_returned_is_rejected() -> None:
    ops = [op(0, "write", 1, None, (0, 1)), op(1, "read", None, None, (2, 3))]
    result = check(Register(), ops)
    assert result.valid is False
    assert result.stuck == ops[1] and result.prefix == (ops[0],)


def test_a_read_concurrent_with_a_write_may_see_either_value() -> None:
    ops = [
        op(0, "write", 1, None, (0, 5)),
        op(1, "read", None, None, (1, 2)),
        op(2, "read", None, 1, (3, 4)),
    ]
    assert check(Register(), ops).valid is True


def test_a_value_read_cannot_come_back_after_a_newer_one_was_read() -> None:
    ops = [
        op(0, "write", 1, None, (0, 1)),
        op(1, "write", 2, None, (2, 10)),
        op(2, "read", None, 2, (3, 4)),
        op(3, "read", None, 1, (5, 6)),
    ]
    assert check(Register(), ops).valid is False


def test_an_increment_recorded_failed_must_not_be_seen() -> None:
    """The anomaly a fault test once saw: an add its client recorded as a certain failure."""
    failed = [op(0, "add", 1, None, (0, 1), "fail"), op(1, "read", None, 1, (2, 3))]
    assert check(Counter(), failed).valid is False
    unknown = [op(0, "add", 1, None, (0, 1), "info"), op(1, "read", None, 1, (2, 3))]
    assert check(Counter(), unknown).valid is True


def test_an_indeterminate_write_takes_effect_once_or_never() -> None:
    ops = [
        op(0, "write", 1, None, (0, 1), "info"),
        op(1, "read", None, None, (5, 6)),
        op(2, "read", None, 1, (7, 8)),
    ]
    assert check(Register(), ops).valid is True
    back = [*ops, op(3, "read", None, None, (9, 10))]
    assert check(Register(), back).valid is False


def test_two_concurrent_swaps_from_the_same_value_cannot_both_succeed() -> None:
    both = [op(0, "cas", (None, 1), True, (0, 5)), op(1, "cas", (None, 2), True, (1, 6))]
    assert check(CasRegister(), both).valid is False
    one = [op(0, "cas", (None, 1), True, (0, 5)), op(1, "cas", (None, 2), False, (1, 6))]
    assert check(CasRegister(), one).valid is True


def test_the_search_gives_up_as_unknown_at_its_bound() -> None:
    ops = [op(i, "write", i, None, (0, 100)) for i in range(8)]
    ops.append(op(8, "read", None, 99, (101, 102)))
    assert check(Register(), ops, max_steps=50).valid is None
    assert check(Register(), ops).valid is False


def test_an_operation_the_model_lacks_is_refused_naming_it() -> None:
    with pytest.raises(
        InputError, match=r"operation 0 \(p0\): 'cas' is not an operation of a counter"
    ):
        check(Counter(), [op(0, "cas", (0, 1), True, (0, 1))])


def test_operations_sharing_an_index_are_refused() -> None:
    ops = [op(0, "write", 1, None, (0, 1)), op(0, "read", None, 1, (2, 3))]
    with pytest.raises(InputError, match="an index of its own"):
        check(Register(), ops)


def test_events_pair_per_process_and_an_open_call_is_indeterminate() -> None:
    ops = from_events(
        [
            {"process": 0, "type": "invoke", "f": "write", "value": 3, "time": 0},
            {"process": 1, "type": "invoke", "f": "cas", "value": [3, 4], "time": 1},
            {"process": 0, "type": "ok", "f": "write", "value": 3, "time": 2},
            {"process": 1, "type": "ok", "f": "cas", "value": True, "time": 3},
            {"process": 2, "type": "invoke", "f": "read", "time": 4},
        ]
    )
    assert [(o.f, o.value, o.result, o.outcome) for o in ops] == [
        ("write", 3, 3, Outcome.OK),
        ("cas", (3, 4), True, Outcome.OK),
        ("read", None, None, Outcome.INFO),
    ]
    assert ops[2].returned == INF and check(CasRegister(), ops).valid is True


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([{"process": 0, "type": "ok", "f": "read", "time": 0}], "event 1: process 0 completes"),
        (
            [
                {"process": 0, "type": "invoke", "f": "read", "time": 0},
                {"process": 0, "type": "invoke", "f": "read", "time": 1},
            ],
            "event 2: process 0 invokes while an operation is open",
        ),
        ([{"process": 0, "type": "done", "f": "read", "time": 0}], "event 1: type 'done'"),
        ([{"process": 0, "type": "invoke", "f": "read"}], "event 1: needs process"),
    ],
)
def test_bad_events_are_refused_naming_the_event(
    events: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        from_events(events)


# -- agreement with an exhaustive search -------------------------------------------------------
def exhaustive(model: Model, ops: Sequence[Op]) -> bool:
    """Every order of every choice of indeterminate operations that respects real time."""
    live = [o for o in ops if o.outcome is not Outcome.FAIL]
    sure = [o for o in live if o.determinate]
    maybe = [o for o in live if not o.determinate]
    for k in range(len(maybe) + 1):
        for chosen in itertools.combinations(maybe, k):
            for order in itertools.permutations([*sure, *chosen]):
                if any(b.returned < a.invoked for i, a in enumerate(order) for b in order[i + 1 :]):
                    continue
                state: Hashable = model.initial()
                for o in order:
                    state = model.step(state, o)
                    if state is IMPOSSIBLE:
                        break
                else:
                    return True
    return False


@st.composite
def histories(draw: st.DrawFn) -> list[Op]:
    n = draw(st.integers(1, 5))
    ops = []
    for i in range(n):
        start = draw(st.integers(0, 8))
        length = draw(st.integers(0, 4))
        outcome = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail"]))
        if draw(st.booleans()):
            ops.append(
                op(i, "write", draw(st.integers(1, 2)), None, (start, start + length), outcome)
            )
        else:
            seen = draw(st.sampled_from([None, 1, 2]))
            ops.append(op(i, "read", None, seen, (start, start + length), outcome))
    return ops


@settings(max_examples=300, deadline=None)
@given(histories())
def test_the_search_agrees_with_an_exhaustive_one(ops: list[Op]) -> None:
    assert check(Register(), ops).valid is exhaustive(Register(), ops)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=12))
def test_a_real_atomic_counter_s_history_is_accepted(steps: list[tuple[int, int]]) -> None:
    """Processes take turns on a real counter; each operation is applied at one instant inside
    its interval, so the history is linearizable by construction."""
    total, ops, clock = 0, [], 0.0
    for i, (process, amount) in enumerate(steps):
        clock += 1
        if process == 0:
            ops.append(op(i, "read", None, total, (clock - 0.5, clock + 3)))
        else:
            total += amount
            ops.append(op(i, "add", amount, None, (clock - 2, clock + 0.5)))
    assert check(Counter(), ops).valid is True
