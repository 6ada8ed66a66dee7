"""Growth policies on hand-made sites: MyCluster's C, L, tau and T by hand, and where nodes go."""

from __future__ import annotations

import re

import numpy as np
import pytest

from elastic.errors import InputError
from elastic.policies import (
    DEFAULT_WINDOW,
    SiteState,
    all_running_first,
    cheapest_first,
    liability_adjusted,
    liability_adjusted_throughput,
    throughput_scores,
)

H8 = sum(1 / n for n in range(1, 9))  # 1 + 1/2 + ... + 1/8


def site(name: str, **kw: object) -> SiteState:
    fields: dict[str, object] = {"price": 1.0, "free": 10} | kw
    return SiteState(name, **fields)  # type: ignore[arg-type]


def test_capability_liability_and_tau_by_hand() -> None:
    s = site("a", running=3, pending=1, size=32, flops=1.5)
    assert s.capability == 3 * 32 * 1.5 == 144.0
    assert s.liability == 1 * 32 * 1.5 == 48.0
    assert s.adjusted == 96.0


def test_throughput_is_the_harmonic_sum_of_past_taus() -> None:
    # tau(t) = 3-1 = 2, tau(t-1) = 2-2 = 0, tau(t-2) = 4-0 = 4, tau(t-3) = 1-3 = -2
    s = site("a", running=3, pending=1, history=((2, 2), (4, 0), (1, 3)))
    assert s.throughput(1) == 2.0
    assert s.throughput(2) == 2.0 + 0 / 2
    assert s.throughput(3) == pytest.approx(2.0 + 0 / 2 + 4 / 3)
    # A window longer than the history sums what there is.
    assert s.throughput(8) == pytest.approx(2.0 + 0 / 2 + 4 / 3 - 2 / 4)
    assert liability_adjusted_throughput([2.0, 0.0, 4.0, -2.0], 4) == pytest.approx(2 + 4 / 3 - 0.5)


def test_size_and_flops_scale_every_term() -> None:
    s = site("a", running=2, pending=0, size=32, flops=2.0, history=((0, 1),))
    assert s.throughput(2) == pytest.approx(2 * 64 + (-1 * 64) / 2)


def test_array_scores_match_the_site_path() -> None:
    sites = [
        site("a", running=3, pending=1, size=32, flops=1.5, history=((2, 2), (4, 0))),
        site("b", running=0, pending=4, size=32, flops=2.5, history=((1, 3), (0, 4))),
    ]
    running = np.array([[4, 2, 3], [0, 1, 0]])  # oldest column first, now last
    pending = np.array([[0, 2, 1], [4, 3, 4]])
    for window in (1, 2, 3, 8):
        got = throughput_scores(running, pending, 32, [1.5, 2.5], window)
        assert got == pytest.approx([s.throughput(window) for s in sites])


def test_the_highest_t_wins() -> None:
    sites = [
        site("slow", running=4, pending=0, flops=1.0),
        site("fast", running=4, pending=0, flops=3.0),
        site("idle", running=0, pending=0, flops=3.0),
    ]
    assert liability_adjusted(sites, 1).order == ("fast",)


def test_a_site_with_many_pending_is_avoided() -> None:
    sites = [
        site("queued", running=5, pending=6, size=32, history=((5, 6),) * 7),
        site("flowing", running=2, pending=0, size=32, history=((2, 0),) * 7),
    ]
    assert sites[0].throughput() < 0 < sites[1].throughput()
    assert liability_adjusted(sites, 1).order == ("flowing",)


def test_k_nodes_spread_as_each_placed_node_adds_liability() -> None:
    # T: a = 100, b = 90; each node placed adds S*F = 32 of liability where it lands.
    a = site("a", running=100, size=1)
    b = site("b", running=90, size=1)
    assert liability_adjusted([a, b], 1, window=1).order == ("a",)
    a32, b32 = site("a", running=100 // 32, size=32), site("b", running=2, size=32, flops=1.4)
    # a: T = 3*32 = 96, b: T = 2*32*1.4 = 89.6; after one node a is at 64, so b is next.
    placed = liability_adjusted([a32, b32], 3, window=1)
    assert placed.order == ("a", "b", "a")
    assert dict(placed.counts) == {"a": 2, "b": 1}


def test_liability_adjusted_respects_free_capacity() -> None:
    sites = [site("best", running=9, free=1), site("next", running=1, free=1)]
    placed = liability_adjusted(sites, 3)
    assert placed.order == ("best", "next")
    assert placed.unplaced == 1


def test_cheapest_first_falls_through_when_a_site_is_full() -> None:
    sites = [
        site("mid", price=2.0, free=5),
        site("cheap", price=1.0, free=0),
        site("dear", price=3.0, free=5),
    ]
    assert cheapest_first(sites, 2).order == ("mid", "mid")
    sites[1] = site("cheap", price=1.0, free=2)
    placed = cheapest_first(sites, 9)
    assert dict(placed.counts) == {"cheap": 2, "mid": 5, "dear": 2}
    assert placed.unplaced == 0
    assert cheapest_first(sites, 13).unplaced == 1


def test_slides_counter_example_old_rule_picks_the_poor_site() -> None:
    """The slides: A runs 1 proxy, none pending (the others left for its poor record); B runs
    10 with 2 pending. The older rule sends B's pending proxy to A; the liability-adjusted
    rule keeps work at B."""
    poor_past = ((1, 5),) * 7  # A: mostly pending before its proxies were migrated away
    good_past = ((10, 2),) * 7
    a = site("A", running=1, pending=0, size=32, history=poor_past)
    b = site("B", running=10, pending=2, size=32, history=good_past)
    assert a.throughput() == pytest.approx(32 - 128 * (H8 - 1))
    assert b.throughput() == pytest.approx(256 * H8)
    assert all_running_first([a, b], 1).order == ("A",)
    assert liability_adjusted([a, b], 1).order == ("B",)


def test_history_outweighs_one_noisy_tick() -> None:
    # Now A looks better (tau 64 vs 32), but B ran well for the seven ticks before.
    a = site("A", running=2, pending=0, size=32, history=((0, 2),) * 7)
    b = site("B", running=5, pending=4, size=32, history=((5, 0),) * 7)
    assert liability_adjusted([a, b], 1, window=1).order == ("A",)
    assert liability_adjusted([a, b], 1, window=DEFAULT_WINDOW).order == ("B",)


def test_a_poor_record_older_than_the_window_is_forgotten() -> None:
    """T remembers ``window`` ticks only: a site emptied for its poor record looks neutral
    (T = 0) once that record is older than the window, and wins over a site that is net
    pending now."""
    emptied = site("A", size=32, history=((0, 0),) * 7 + ((0, 12),) * 5)
    queued = site("B", running=3, pending=4, size=32, history=((3, 4),) * 12)
    assert emptied.throughput(8) == 0.0
    assert emptied.throughput(13) == pytest.approx(-12 * 32 * sum(1 / n for n in range(9, 14)))
    assert liability_adjusted([emptied, queued], 1, window=8).order == ("A",)
    assert liability_adjusted([emptied, queued], 1, window=13).order == ("B",)


def test_ties_go_to_the_cheaper_then_the_first_listed_site() -> None:
    sites = [site("x", price=2.0), site("y", price=1.0), site("z", price=1.0)]
    assert liability_adjusted(sites, 1).order == ("y",)
    assert cheapest_first(sites, 1).order == ("y",)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"price": -1.0}, "price"),
        ({"price": float("nan")}, "price"),
        ({"free": -1}, "free"),
        ({"free": 1.5}, "free"),
        ({"running": True}, "running"),
        ({"pending": -2}, "pending"),
        ({"size": 0}, "size"),
        ({"flops": 0.0}, "flops"),
        ({"history": ((1, 2), (3,))}, "history[1]"),
        ({"history": ((1, -2),)}, "history[0]"),
        ({"history": [(1, 2)]}, "history"),
    ],
)
def test_bad_site_fields_are_refused_by_name(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=re.escape(f"site 'a': field '{field}")):
        site("a", **kwargs)


def test_bad_requests_are_refused_by_name() -> None:
    good = [site("a"), site("b")]
    with pytest.raises(InputError, match="field 'name'"):
        site("")
    with pytest.raises(InputError, match="field 'k'"):
        cheapest_first(good, -1)
    with pytest.raises(InputError, match="field 'window'"):
        liability_adjusted(good, 1, window=0)
    with pytest.raises(InputError, match="field 'sites' is empty"):
        liability_adjusted([], 1)
    with pytest.raises(InputError, match="field 'sites' names site 'a' twice"):
        all_running_first([site("a"), site("a")], 1)
