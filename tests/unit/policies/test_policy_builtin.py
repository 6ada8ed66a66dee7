"""Policies on hand-checkable snapshots, selection, staleness and the wasted-cycles formula."""

from __future__ import annotations

import numpy as np
import pytest

from elastic.errors import PtcError
from elastic.policies import (
    BUSY_FLOOR,
    JobInfo,
    Policy,
    PreemptionVector,
    PriorityRule,
    Snapshot,
    SnapshotBatch,
    StalePreemptionVectorError,
    make_policy,
    select_nodes,
    wasted_cycles,
)

NODES = ("a", "b", "c", "d", "e")


def snap() -> Snapshot:
    # a: idle; b+c: 2-node job that ran 100 s; d: 1-node job, 300 s; e: 1-node job, 50 s (bigmem)
    return Snapshot(
        time=1000.0,
        nodes=NODES,
        jobs=(
            JobInfo("par", ("b", "c"), elapsed=100.0, remaining=500.0),
            JobInfo("long", ("d",), elapsed=300.0, remaining=10.0),
            JobInfo("big", ("e",), elapsed=50.0, queue="bigmem", priority=10.0, remaining=900.0),
        ),
    )


def values(name: str) -> dict[str, float]:
    return dict(make_policy(name).evaluate(snap()).values)


def test_lifo_keeps_long_running_jobs() -> None:
    v = values("LIFO")
    assert v == {"a": 0.0, "b": 100 / 300, "c": 100 / 300, "d": 1.0, "e": 50 / 300}


def test_fifo_releases_long_running_jobs() -> None:
    v = values("FIFO")
    assert v["a"] == 0.0
    assert v["d"] == BUSY_FLOOR  # the longest job scores lowest among busy nodes
    assert v["e"] == pytest.approx(1 - 50 / 300)
    assert v["e"] > v["b"] > v["d"] > v["a"]


def test_pap_weighs_node_count() -> None:
    v = values("PAP")  # raw: par 200, long 300, big 50
    assert v == {"a": 0.0, "b": 200 / 300, "c": 200 / 300, "d": 1.0, "e": 50 / 300}


def test_pap_plus_weighs_priority() -> None:
    v = values("PAP+")  # raw: par 200, long 300, big 500
    assert v == {"a": 0.0, "b": 200 / 500, "c": 200 / 500, "d": 300 / 500, "e": 1.0}


def test_pap_plus_takes_priority_classes_from_a_rule() -> None:
    # The live client sees queues, not priorities: the rule turns bigmem into 10 and the
    # 2-node job of user "alice" into 3; everything else stays at the default 1.
    plain = Snapshot(
        1000.0,
        NODES,
        tuple(
            JobInfo(j.job_id, j.nodes, j.elapsed, queue=j.queue, user=u, remaining=j.remaining)
            for j, u in zip(snap().jobs, ("alice", "bob", "carol"), strict=True)
        ),
    )
    rule = PriorityRule.parse(["queue=bigmem:10", "user=alice:3"])
    v = dict(make_policy("PAP+", rule=rule).evaluate(plain).values)  # raw 600, 300, 500
    assert v == {"a": 0.0, "b": 1.0, "c": 1.0, "d": 300 / 600, "e": 500 / 600}
    assert dict(make_policy("PAP+").evaluate(plain).values) == values("PAP")  # no rule: all 1
    batch = SnapshotBatch(
        times=np.zeros(1),
        job=np.asarray([[0]]),
        elapsed=np.ones((1, 1)),
        remaining=np.ones((1, 1)),
        node_count=np.ones((1, 1)),
        priority=np.ones((1, 1)),
    )
    with pytest.raises(PtcError, match="apply the rule to the trace"):
        make_policy("PAP+", rule=rule).evaluate_batch(batch)


def test_pap_equals_lifo_on_single_node_jobs() -> None:
    s = Snapshot(5.0, ("x", "y", "z"), (JobInfo("1", ("x",), 7.0), JobInfo("2", ("z",), 3.0)))
    assert make_policy("PAP").evaluate(s).values == make_policy("LIFO").evaluate(s).values


def test_random_is_seeded_in_range_and_idle_is_zero() -> None:
    first = make_policy("RANDOM", seed=7).evaluate(snap()).values
    again = make_policy("RANDOM", seed=7).evaluate(snap()).values
    other = make_policy("RANDOM", seed=8).evaluate(snap()).values
    assert first == again
    assert first != other
    assert first["a"] == 0.0
    assert all(BUSY_FLOOR <= first[n] <= 1.0 for n in "bcde")


@pytest.mark.parametrize("name", ["RANDOM", "FIFO", "LIFO", "PAP", "PAP+"])
def test_every_policy_takes_idle_nodes_first(name: str) -> None:
    policy = make_policy(name)
    assert isinstance(policy, Policy)
    assert select_nodes(policy.evaluate(snap()), 1) == ["a"]


def test_all_zero_elapsed_gives_floor_not_division_by_zero() -> None:
    s = Snapshot(0.0, ("x", "y"), (JobInfo("1", ("x",), 0.0),))
    assert make_policy("PAP").evaluate(s).values == {"x": BUSY_FLOOR, "y": 0.0}
    assert make_policy("FIFO").evaluate(s).values == {"x": 1.0, "y": 0.0}


def test_unknown_policy_is_a_user_error() -> None:
    with pytest.raises(PtcError, match="unknown policy 'SJF'"):
        make_policy("SJF")


def test_select_takes_lowest_and_breaks_ties_by_node_order() -> None:
    pv = PreemptionVector(0.0, {"n3": 0.5, "n1": 0.2, "n2": 0.5, "n0": 0.9})
    assert select_nodes(pv, 1) == ["n1"]
    assert select_nodes(pv, 2) == ["n1", "n3"]  # n3 precedes n2 in the vector
    assert select_nodes(pv, 4) == ["n1", "n3", "n2", "n0"]
    with pytest.raises(PtcError, match="cannot preempt 5 of 4"):
        select_nodes(pv, 5)


def test_stale_vector_is_refused() -> None:
    pv = PreemptionVector(100.0, {"a": 0.0}, "LIFO")
    assert select_nodes(pv, 1, now=200.0, max_age=120.0) == ["a"]
    with pytest.raises(StalePreemptionVectorError, match=r"LIFO.*150.0 s old.*limit is 120.0 s"):
        select_nodes(pv, 1, now=250.0, max_age=120.0)


def test_vector_values_must_be_in_unit_interval() -> None:
    with pytest.raises(PtcError, match=r"node 'a' = 1\.5"):
        PreemptionVector(0.0, {"a": 1.5})


def test_snapshot_rejects_a_node_running_two_jobs() -> None:
    with pytest.raises(PtcError, match="runs two jobs"):
        Snapshot(0.0, ("a",), (JobInfo("1", ("a",), 1.0), JobInfo("2", ("a",), 1.0)))


def test_wasted_cycles_formula() -> None:
    s = snap()
    # "long" has 10 s left: it finishes within any GP > 10 s, so nothing is lost.
    assert wasted_cycles(s, ["d"], 60.0).total == 0.0
    assert wasted_cycles(s, ["d"], 5.0).total == (300.0 + 5.0) * 1
    # preempting one node of the 2-node job loses the whole job, once
    one = wasted_cycles(s, ["b"], 60.0)
    both = wasted_cycles(s, ["b", "c"], 60.0)
    assert one.total == both.total == (100.0 + 60.0) * 2
    assert both.per_job == {"par": 320.0}
    assert wasted_cycles(s, ["a"], 60.0).total == 0.0  # idle node
    assert wasted_cycles(s, ["a", "b", "e"], 60.0).total == 320.0 + 110.0


def test_wasted_cycles_boundary_remaining_equal_to_gp_is_lost() -> None:
    s = Snapshot(0.0, ("a",), (JobInfo("1", ("a",), 10.0, remaining=60.0),))
    assert wasted_cycles(s, ["a"], 60.0).total == 70.0  # WC_j = 0 only if remaining < GP
    assert wasted_cycles(s, ["a"], 60.5).total == 0.0


def test_wasted_cycles_needs_remaining_time() -> None:
    s = Snapshot(0.0, ("a",), (JobInfo("1", ("a",), 10.0),))
    with pytest.raises(PtcError, match="remaining time unknown"):
        wasted_cycles(s, ["a"], 60.0)


def test_priority_rule_classes() -> None:
    rule = PriorityRule.parse(["queue=bigmem:10", "application=gauss*:5,queue=debug:0.5"])
    assert rule.priority({"queue": "bigmem"}) == 10.0
    assert rule.priority({"queue": "batch", "application": "gaussian"}) == 5.0
    assert rule.priority({"queue": "debug"}) == 0.5
    assert rule.priority({"queue": "batch"}) == 1.0
    cols = {"queue": ["bigmem", "debug", "x"], "application": ["gaussian", "", "gaussian"]}
    assert rule.apply(cols, 3) == [10.0, 0.5, 5.0]  # first matching clause wins


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("queue=bigmem", "expected field=pattern:priority"),
        ("colour=red:2", "unknown field 'colour'"),
        ("queue=bigmem:ten", "priority 'ten' is not a number"),
        ("queue=bigmem:0", "must be a finite number > 0"),
    ],
)
def test_priority_rule_errors(spec: str, message: str) -> None:
    with pytest.raises(PtcError, match=message):
        PriorityRule.parse([spec])
