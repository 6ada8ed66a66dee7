"""The thesis's rebalancing policies (OI, FO, AP-X) and n-preserving upscaling on hand-made pools."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from elastic.errors import InputError
from elastic.policies import (
    Aggressive,
    CloudSite,
    ForceOffline,
    OpportunisticIdle,
    Pool,
    PoolWorker,
    RunningJob,
    WorkerState,
    make_downscaling_policy,
    retire_drained,
    upscale,
)

BUSY, IDLE, DRAIN, BOOT = (
    WorkerState.BUSY,
    WorkerState.IDLE,
    WorkerState.DRAINING,
    WorkerState.BOOTING,
)
SITES = (CloudSite("cheap", 1.0, 4), CloudSite("dear", 2.0, 0))


def busy(wid: str, site: str, elapsed: float, requested: float = 100.0) -> PoolWorker:
    return PoolWorker(wid, site, BUSY, RunningJob(f"j-{wid}", elapsed, requested))


def idle(wid: str, site: str, state: WorkerState = IDLE) -> PoolWorker:
    return PoolWorker(wid, site, state)


def pool(*workers: PoolWorker, sites: tuple[CloudSite, ...] = SITES) -> Pool:
    return Pool(sites, workers)


# cheap: c1 (busy); dear: 3 excess workers. d1 idle, d2 at 10% progress, d3 at 60%.
MIXED = pool(
    busy("c1", "cheap", 50.0),
    idle("d1", "dear"),
    busy("d2", "dear", 10.0),
    busy("d3", "dear", 60.0),
)


def test_oi_terminates_only_jobless_excess_workers() -> None:
    decision = OpportunisticIdle().decide(MIXED)
    assert decision.terminate == ("d1",)
    assert decision.drain == ()
    assert dict(decision.launch) == {"cheap": 1}  # n = 4: three left, one replacement


def test_oi_never_kills_a_busy_worker() -> None:
    allbusy = pool(*(busy(f"d{k}", "dear", 1.0) for k in range(4)))
    decision = OpportunisticIdle().decide(allbusy)
    assert decision.terminate == ()
    assert dict(decision.launch) == {}


def test_oi_stops_at_the_desired_count() -> None:
    sites = (CloudSite("cheap", 1.0, 1), CloudSite("dear", 2.0, 2))
    p = pool(*(idle(f"d{k}", "dear") for k in range(3)), sites=sites)
    decision = OpportunisticIdle().decide(p)
    assert decision.terminate == ("d0",)  # excess on dear is 3 - 2
    assert dict(decision.launch) == {"cheap": 1}


def test_oi_begins_with_the_site_of_most_excess() -> None:
    sites = (CloudSite("a", 1.0, 0), CloudSite("b", 1.0, 0), CloudSite("c", 1.0, 3))
    p = pool(idle("a1", "a"), idle("b1", "b"), idle("b2", "b"), idle("c1", "c"), sites=sites)
    assert OpportunisticIdle().decide(p).terminate == ("b1", "b2", "a1")


def test_fo_drains_busy_excess_and_terminates_idle_excess() -> None:
    decision = ForceOffline().decide(MIXED)
    assert decision.terminate == ("d1",)
    assert set(decision.drain) == {"d2", "d3"}
    assert dict(decision.launch) == {"cheap": 1}  # drained workers are still live


def test_fo_drains_the_workers_nearest_completion_first() -> None:
    sites = (CloudSite("cheap", 1.0, 1), CloudSite("dear", 2.0, 2))
    p = pool(
        busy("d1", "dear", 10.0), busy("d2", "dear", 90.0), busy("d3", "dear", 50.0), sites=sites
    )
    assert ForceOffline().decide(p).drain == ("d2",)


def test_fo_counts_draining_workers_and_terminates_them_once_idle() -> None:
    draining = PoolWorker("d2", "dear", DRAIN, RunningJob("j", 30.0, 100.0))
    drained = PoolWorker("d3", "dear", DRAIN)  # finished its job
    p = pool(busy("c1", "cheap", 5.0), busy("d1", "dear", 20.0), draining, drained)
    decision = ForceOffline().decide(p)
    assert decision.terminate == ("d3",)
    assert decision.drain == ("d1",)  # d2 is already on its way out
    assert dict(decision.launch) == {"cheap": 1}
    again = retire_drained(p)
    assert again.terminate == ("d3",)
    assert again.drain == ()
    assert dict(again.launch) == {"cheap": 1}


def test_fo_does_nothing_in_the_desired_state() -> None:
    p = pool(*(busy(f"c{k}", "cheap", 1.0) for k in range(4)))
    decision = ForceOffline().decide(p)
    assert (decision.terminate, decision.drain, dict(decision.launch)) == ((), (), {})


def test_ap_kills_below_threshold_least_progress_first_and_idle_first() -> None:
    decision = Aggressive(50.0).decide(MIXED)
    assert decision.terminate == ("d1", "d2")  # d3 at 60% is spared
    assert dict(decision.launch) == {"cheap": 2}
    assert Aggressive(100.0).decide(MIXED).terminate == ("d1", "d2", "d3")


def test_ap_spares_a_worker_exactly_at_the_threshold() -> None:
    p = pool(busy("d1", "dear", 25.0), busy("d2", "dear", 24.0))
    assert Aggressive(25.0).decide(p).terminate == ("d2",)


def test_ap_takes_only_the_excess_in_increasing_progress() -> None:
    sites = (CloudSite("cheap", 1.0, 2), CloudSite("dear", 2.0, 1))
    p = pool(
        busy("d1", "dear", 40.0),
        busy("d2", "dear", 5.0),
        busy("d3", "dear", 20.0),
        sites=sites,
    )
    decision = Aggressive(100.0).decide(p)
    assert decision.terminate == ("d2", "d3")
    assert dict(decision.launch) == {"cheap": 2}


def test_ap_progress_is_elapsed_over_requested() -> None:
    # d1 ran longer but on a long request: 100 of 1000 s is 10%; d2 ran 30 of 60 s, 50%.
    sites = (CloudSite("cheap", 1.0, 1), CloudSite("dear", 2.0, 1))
    p = pool(busy("d1", "dear", 100.0, 1000.0), busy("d2", "dear", 30.0, 60.0), sites=sites)
    assert Aggressive(100.0).decide(p).terminate == ("d1",)


def test_ap_zero_kills_idle_but_no_busy_worker() -> None:
    assert Aggressive(0.0).decide(MIXED).terminate == ("d1",)


def test_upscaling_goes_to_the_largest_deficit() -> None:
    sites = (CloudSite("a", 1.0, 3), CloudSite("b", 1.0, 5), CloudSite("c", 1.0, 0))
    p = pool(idle("a1", "a"), idle("b1", "b"), idle("c1", "c"), idle("c2", "c"), sites=sites)
    # n = 8, 4 live; deficits a 2, b 4: b gets two, then ties alternate, earlier site first.
    assert upscale(p) == {"b": 3, "a": 1}
    assert upscale(p, ["c1", "c2"]) == {"b": 4, "a": 2}


def test_upscaling_skips_a_full_site() -> None:
    sites = (CloudSite("a", 1.0, 3, capacity=1), CloudSite("b", 1.0, 0))
    p = pool(idle("a1", "a"), sites=sites)
    assert upscale(p) == {"b": 2}  # a lower-preferred site rather than none


def test_upscaling_counts_booting_and_draining_workers() -> None:
    p = pool(idle("c1", "cheap", BOOT), PoolWorker("d1", "dear", DRAIN, RunningJob("j", 1.0, 10.0)))
    assert upscale(p) == {"cheap": 2}


def test_policy_names() -> None:
    assert make_downscaling_policy("oi").name == "OI"
    assert make_downscaling_policy("FO").name == "FO"
    ap = make_downscaling_policy("AP-25")
    assert isinstance(ap, Aggressive) and ap.threshold_pct == 25.0 and ap.name == "AP-25"


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Aggressive(150.0), "threshold_pct"),
        (lambda: Aggressive(-1.0), "threshold_pct"),
        (lambda: make_downscaling_policy("AP-250"), "threshold_pct"),
        (lambda: make_downscaling_policy("LIFO"), "policy"),
        (lambda: CloudSite("x", -1.0, 1), "price"),
        (lambda: CloudSite("x", 1.0, -1), "desired"),
        (lambda: CloudSite("", 1.0, 1), "site name"),
        (lambda: pool(idle("w", "nowhere")), "site 'nowhere'"),
        (lambda: Pool(()), "sites"),
        (lambda: pool(idle("w", "dear"), idle("w", "cheap")), "worker ids"),
        (lambda: PoolWorker("w", "dear", BUSY), "busy needs a job"),
        (lambda: PoolWorker("w", "dear", IDLE, RunningJob("j", 1.0, 2.0)), "state idle"),
        (lambda: RunningJob("j", -1.0, 10.0), "elapsed"),
        (lambda: RunningJob("j", 1.0, 0.0), "requested"),
        (lambda: upscale(MIXED, ["ghost"]), "terminated"),
    ],
)
def test_bad_input_is_refused_naming_the_field(make: Callable[[], object], field: str) -> None:
    with pytest.raises(InputError, match=field):
        make()
