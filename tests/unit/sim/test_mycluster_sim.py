"""The MyCluster simulation on small constructed cases: dispatch, migration, growth, seeds."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from elastic.errors import InputError
from elastic.sim.mycluster import (
    Clusters,
    MyClusterConfig,
    dispatch_probability,
    simulate,
)
from elastic.sim.mycluster_runs import describe_gain, paired_gain, run_seeds

SMALL = MyClusterConfig(sites=4, ticks=60, proxies_per_site=3)


def clusters(flops: list[float], wait: list[float], price: list[float] | None = None) -> Clusters:
    return Clusters(
        flops=np.array(flops, dtype=np.float64),
        wait=np.array(wait, dtype=np.float64),
        price=np.array(price if price is not None else [1.0] * len(flops), dtype=np.float64),
    )


def test_dispatch_probability_is_the_slides_formula() -> None:
    assert dispatch_probability(0, 2.0, 0)[()] == pytest.approx(math.exp(-2))
    assert dispatch_probability(1, 2.5, 9)[()] == pytest.approx(math.exp(-1.5))
    assert dispatch_probability(2, 2.0, 0)[()] == pytest.approx(1 / math.e + 1 / 2)
    assert dispatch_probability(7, 2.0, 6)[()] == pytest.approx(1 / math.e + 1 / 8)


def test_a_seed_reproduces_its_run_and_another_seed_differs() -> None:
    cfg = replace(SMALL, migration="liability")
    a, b, c = simulate(cfg, 7), simulate(cfg, 7), simulate(cfg, 8)
    assert a.completed == b.completed
    assert np.array_equal(a.running, b.running) and np.array_equal(a.pending, b.pending)
    assert a.moves == b.moves
    assert (a.completed, a.moves) != (c.completed, c.moves)


def test_with_and_without_migration_a_seed_sees_the_same_clusters() -> None:
    off, on = simulate(SMALL, 3), simulate(replace(SMALL, migration="liability"), 3)
    assert np.array_equal(off.clusters.flops, on.clusters.flops)
    assert np.array_equal(off.clusters.wait, on.clusters.wait)


def test_the_pool_keeps_its_size_and_proxies_run_four_ticks_at_a_time() -> None:
    run = simulate(
        MyClusterConfig(sites=1, ticks=80), 1, clusters=clusters([1.0], [0.0]), initial=[1]
    )
    assert np.all(run.running + run.pending == 1)
    streaks, length = [], 0
    for r in run.running[0]:
        if r:
            length += 1
        elif length:
            streaks.append(length)
            length = 0
    assert streaks and all(s % 4 == 0 for s in streaks)  # resubmitted, maybe restarted at once


def test_migration_rescues_proxies_stuck_at_a_hopeless_site() -> None:
    # Site 0 never dispatches within the run (T_W = 10^4 ticks); site 1 is fast and idle.
    cl = clusters([1.0, 3.0], [1e4, 1.0])
    cfg = MyClusterConfig(sites=2, ticks=40)
    for seed in range(5):
        off = simulate(cfg, seed, clusters=cl, initial=[6, 0])
        on = simulate(replace(cfg, migration="liability"), seed, clusters=cl, initial=[6, 0])
        assert off.completed == 0 and off.migrations == 0
        assert on.completed > 0
        # One move a tick takes all six off the hopeless site first.
        assert on.moves[:6] == [(t, 0, 1) for t, _, _ in on.moves[:6]]
        assert on.moves[5][0] <= 8


def test_migration_stops_once_a_move_would_not_leave_the_target_ahead() -> None:
    # Two identical sites that never dispatch: a move would only swap their order.
    cl = clusters([1.0, 1.0], [1e4, 1e4])
    cfg = MyClusterConfig(sites=2, ticks=30, migration="liability")
    assert simulate(cfg, 0, clusters=cl, initial=[3, 3]).migrations == 0
    # Uneven: proxies move until the pending counts are within one move of each other.
    run = simulate(cfg, 0, clusters=cl, initial=[6, 0])
    assert run.migrations > 0
    assert abs(int(run.pending[0, -1]) - int(run.pending[1, -1])) <= 2


def test_old_rule_moves_pending_proxies_to_a_site_with_all_running() -> None:
    cl = clusters([1.0, 1.0], [1e4, 0.0])
    cfg = MyClusterConfig(sites=2, ticks=20, migration="all-running")
    run = simulate(cfg, 0, clusters=cl, initial=[4, 1])
    assert run.moves and all(src == 0 and dst == 1 for _, src, dst in run.moves)


def test_growth_places_new_proxies_cheapest_first_within_capacity() -> None:
    cl = clusters([1.0, 1.0, 1.0], [1e4, 1e4, 1e4], price=[3.0, 1.0, 2.0])
    cfg = MyClusterConfig(sites=3, ticks=2, growth_every=1, growth_k=3, capacity=2)
    run = simulate(cfg, 0, clusters=cl, initial=[0, 0, 0])
    # After tick 0 three proxies arrive: two fill the cheapest site, one goes to the next.
    assert list(run.running[:, 1] + run.pending[:, 1]) == [0, 2, 1]
    assert run.proxies == 6  # tick 1's growth fills site 2, then site 0


def test_liability_adjusted_growth_prefers_the_site_that_dispatches() -> None:
    cl = clusters([1.0, 1.0], [1e4, 0.0], price=[1.0, 5.0])
    base = MyClusterConfig(sites=2, ticks=21, growth_every=10, growth_k=1)
    cheap = simulate(base, 0, clusters=cl, initial=[1, 1])
    lad = simulate(
        replace(base, growth_policy="liability_adjusted"), 0, clusters=cl, initial=[1, 1]
    )
    held_cheap = cheap.running[:, -1] + cheap.pending[:, -1]
    held_lad = lad.running[:, -1] + lad.pending[:, -1]
    assert list(held_cheap) == [3, 1]
    assert list(held_lad) == [1, 3]


def test_many_seeds_give_paired_gains() -> None:
    frame = run_seeds({"none": SMALL, "liability": replace(SMALL, migration="liability")}, [1, 2])
    assert len(frame) == 4
    gain = paired_gain(frame, "liability", "none")
    by = frame.set_index(["variant", "seed"]).completed
    assert gain[2] == pytest.approx(by["liability", 2] / by["none", 2] - 1)
    stats = describe_gain(gain)
    assert stats["n"] == 2 and stats["min"] <= stats["mean"] <= stats["max"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"migration": "sometimes"}, "migration"),
        ({"window": 0}, "window"),
        ({"sites": 0}, "sites"),
        ({"job_size": 5}, "job_size"),
        ({"wait_range": (3.0, 2.0)}, "wait_range"),
        ({"growth_policy": "nearest"}, "growth_policy"),
    ],
)
def test_bad_config_is_refused_by_name(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=field):
        MyClusterConfig(**kwargs)  # type: ignore[arg-type]


def test_bad_initial_is_refused() -> None:
    with pytest.raises(InputError, match="initial"):
        simulate(SMALL, 0, initial=[1, 2])
