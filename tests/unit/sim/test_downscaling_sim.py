"""The rebalancing simulator on workloads small enough to follow by hand, and its EC formula."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pytest
from tracedata import trace_file

from elastic.errors import InputError
from elastic.events import Event, Kind, collect
from elastic.policies import CloudSite, make_downscaling_policy
from elastic.sim.downscaling import (
    DownscalingSetup,
    SimJob,
    jobs_from_trace,
    simulate_downscaling,
)
from elastic.sim.downscaling_metrics import (
    DownscalingRun,
    InstanceRecord,
    billed_hours,
    excess_cost,
)
from elastic.sim.traces import load_condor_submit

SITES = (CloudSite("cheap", 1.0, 1), CloudSite("dear", 2.0, 0))
# One worker on the dear site, one wanted on the cheap one; policy every 600 s, 100 s boots.
ONE = DownscalingSetup(SITES, {"dear": 1}, interval_s=600.0, boot_s=100.0)
LONG = (SimJob("a", 1000.0, 1000.0),)


def run(
    policy: str, jobs: tuple[SimJob, ...] = LONG, setup: DownscalingSetup = ONE
) -> DownscalingRun:
    return simulate_downscaling(jobs, setup, make_downscaling_policy(policy))


def test_oi_waits_for_the_job_then_the_next_policy_run() -> None:
    r = run("OI")
    # The job ends at 1000; the policy at 1200 finds the worker idle, the replacement is up at 1300.
    assert r.makespan_s == 1000.0
    assert r.convergence_s == 1300.0
    assert r.discarded_s == 0.0 and r.killed == ()
    assert r.excess_cost == 2.0  # 1200 s on the dear site: one whole hour at 2


def test_fo_drains_and_terminates_when_the_job_ends() -> None:
    r = run("FO")
    assert r.makespan_s == 1000.0
    assert r.convergence_s == 1100.0  # terminated at 1000, replacement booted at 1100
    assert r.discarded_s == 0.0
    dear = [i for i in r.instances if i.site == "dear"]
    assert [(i.terminated, i.rebalanced) for i in dear] == [(1000.0, True)]


def test_ap100_kills_the_job_and_requeues_it() -> None:
    r = run("AP-100")
    # Killed at 600 (60% done), rerun on the replacement from 700 to 1700.
    assert [(k.time, k.job_id, k.elapsed) for k in r.killed] == [(600.0, "a", 600.0)]
    assert r.discarded_s == 600.0
    assert r.overhead_pct == pytest.approx(60.0)
    assert r.convergence_s == 700.0
    assert r.makespan_s == 1700.0
    assert r.excess_cost == 2.0


def test_ap_spares_a_job_past_its_threshold() -> None:
    r = run("AP-50")  # 60% done at the first run: spared; idle at 1200, terminated then
    assert r.killed == ()
    assert r.convergence_s == 1300.0
    assert r.makespan_s == 1000.0


def test_excess_cost_rounds_each_instance_up_to_its_billing_unit() -> None:
    ten_minutes = replace(ONE, billing_s=600.0)
    # Lifetimes on the dear site: OI 1200 s (2 units), FO 1000 s (2), AP-100 600 s (1).
    assert run("OI", setup=ten_minutes).excess_cost == pytest.approx(2 * 1200 / 3600)
    assert run("FO", setup=ten_minutes).excess_cost == pytest.approx(2 * 1200 / 3600)
    assert run("AP-100", setup=ten_minutes).excess_cost == pytest.approx(2 * 600 / 3600)
    exact = replace(ONE, billing_s=0.0)
    assert run("FO", setup=exact).excess_cost == pytest.approx(2 * 1000 / 3600)


def test_killed_jobs_go_back_to_the_head_of_the_queue() -> None:
    jobs = (SimJob("a", 1000.0, 1000.0), SimJob("b", 100.0, 100.0))
    r = run("AP-100", jobs)
    # a restarts first on the replacement (700-1700), b follows (1700-1800); b first would
    # have finished one job at 800.
    assert r.makespan_s == 1800.0
    assert all(s.done_jobs == 0 for s in r.timeline if s.time < 1700.0)


def test_a_terminated_idle_worker_takes_no_requeued_job() -> None:
    sites = (CloudSite("cheap", 1.0, 2), CloudSite("dear", 2.0, 0))
    setup = DownscalingSetup(sites, {"dear": 2}, interval_s=600.0, boot_s=100.0)
    jobs = (SimJob("a", 1000.0, 1000.0), SimJob("b", 100.0, 100.0))
    r = simulate_downscaling(jobs, setup, make_downscaling_policy("AP-100"))
    # At 600 AP kills both dear workers (one idle since 100); a waits for a replacement (700).
    assert [k.job_id for k in r.killed] == ["a"]
    assert r.makespan_s == 1700.0
    assert r.convergence_s == 700.0


def test_a_worker_terminated_while_booting_never_joins() -> None:
    # The cheap site has no room, so replacements land on the dear site again (the fallback)
    # and boot for longer than a policy interval: OI terminates each one while it boots.
    sites = (CloudSite("cheap", 1.0, 1, capacity=0), CloudSite("dear", 2.0, 0))
    setup = DownscalingSetup(sites, {"dear": 1}, interval_s=600.0, boot_s=1000.0, horizon_s=2000.0)
    r = simulate_downscaling((SimJob("late", 50.0, 50.0, submit=1700.0),), setup,
                             make_downscaling_policy("OI"))  # fmt: skip
    assert [(i.launched, i.terminated) for i in r.instances] == [
        (0.0, 600.0),
        (600.0, 1200.0),
        (1200.0, 1800.0),
        (1800.0, None),
    ]
    assert all(s.running_jobs == 0 and s.done_jobs == 0 for s in r.timeline)
    assert r.convergence_s is None


def small_case(policy: str) -> DownscalingRun:
    # 2 cheap + 2 dear workers, 4 wanted on cheap; 8 jobs of 1000 s; policy every 300 s.
    sites = (CloudSite("cheap", 1.0, 4), CloudSite("dear", 2.0, 0))
    setup = DownscalingSetup(
        sites, {"cheap": 2, "dear": 2}, interval_s=300.0, boot_s=50.0, billing_s=0.0
    )
    jobs = tuple(SimJob(f"j{k}", 1000.0, 1000.0) for k in range(8))
    return simulate_downscaling(jobs, setup, make_downscaling_policy(policy))


def test_small_case_by_hand() -> None:
    oi, fo, ap25, ap100 = (small_case(p) for p in ("OI", "FO", "AP-25", "AP-100"))
    # OI: both rounds of jobs end at 2000, the dear workers go at 2100.
    assert (oi.convergence_s, oi.makespan_s, oi.discarded_s) == (2150.0, 2000.0, 0.0)
    assert oi.excess_cost == pytest.approx(2 * 2 * 2100 / 3600)
    # FO: drained at 300, terminated when their first jobs end at 1000.
    assert (fo.convergence_s, fo.discarded_s) == (1050.0, 0.0)
    assert fo.excess_cost == pytest.approx(2 * 2 * 1000 / 3600)
    # AP-25: 30% done at 300 (spared); the second jobs are 20% done at 1200 (killed).
    assert (ap25.convergence_s, ap25.discarded_s, len(ap25.killed)) == (1250.0, 400.0, 2)
    assert ap25.excess_cost == pytest.approx(2 * 2 * 1200 / 3600)
    # AP-100: both dear jobs killed at 300.
    assert (ap100.convergence_s, ap100.discarded_s, len(ap100.killed)) == (350.0, 600.0, 2)
    assert ap100.excess_cost == pytest.approx(2 * 2 * 300 / 3600)


def test_small_case_keeps_the_thesis_orderings() -> None:
    runs = {p: small_case(p) for p in ("OI", "FO", "AP-25", "AP-100")}
    conv = {p: r.convergence_s or math.inf for p, r in runs.items()}
    ec = {p: r.excess_cost for p, r in runs.items()}
    lost = {p: r.discarded_s for p, r in runs.items()}
    assert conv["AP-100"] < conv["FO"] < conv["AP-25"] < conv["OI"]
    assert ec["AP-100"] < ec["FO"] < ec["AP-25"] < ec["OI"]
    assert lost["OI"] == lost["FO"] == 0 < lost["AP-25"] < lost["AP-100"]
    assert all(runs["OI"].makespan_s <= r.makespan_s for r in runs.values())


def test_a_pool_in_the_desired_state_has_converged_at_once() -> None:
    setup = DownscalingSetup(SITES, {"cheap": 1})
    r = simulate_downscaling(LONG, setup, make_downscaling_policy("AP-100"))
    assert (r.convergence_s, r.excess_cost, r.discarded_s, r.makespan_s) == (0.0, 0.0, 0.0, 1000.0)


def test_a_run_that_never_converges_stops_at_the_horizon() -> None:
    setup = replace(ONE, horizon_s=5000.0)
    r = simulate_downscaling((SimJob("a", 10000.0, 10000.0),), setup, make_downscaling_policy("OI"))
    assert r.convergence_s is None
    assert r.end_s == 5000.0
    assert r.excess_cost == 4.0  # the dear worker, still excess, billed 2 hours up to the stop


def test_progress_is_reported() -> None:
    events: list[Event] = []
    simulate_downscaling(LONG, ONE, make_downscaling_policy("AP-100"), on_event=collect(events))
    kinds = [e.kind for e in events]
    assert kinds[0] is Kind.BEGIN and kinds[-1] is Kind.END
    assert any(e.kind is Kind.STATUS and "terminate 1" in e.message for e in events)
    assert events[-1].data["discarded_s"] == 600.0


def test_ec_counts_only_excess_instances() -> None:
    records = [
        InstanceRecord("d1", "dear", 0.0, 5400.0, rebalanced=True),  # 1.5 h -> 2 h at 2
        InstanceRecord("c1", "cheap", 0.0, None),  # wanted: free of EC
        InstanceRecord("c2", "cheap", 600.0, 700.0),  # failed, not rebalanced: no EC
    ]
    assert excess_cost(records, SITES, end=7200.0) == 4.0
    assert billed_hours(3600.0000001, 3600.0) == 1.0  # float noise is no extra hour
    assert billed_hours(3601.0, 3600.0) == 2.0


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: DownscalingSetup(SITES, {"elsewhere": 1}), "initial"),
        (lambda: DownscalingSetup(SITES, {"dear": -1}), "initial"),
        (lambda: DownscalingSetup(SITES, interval_s=0.0), "interval_s"),
        (lambda: DownscalingSetup(SITES, boot_s=-1.0), "boot_s"),
        (lambda: DownscalingSetup(SITES, reap_s=-5.0), "reap_s"),
        (lambda: SimJob("x", -1.0, 10.0), "runtime"),
        (lambda: SimJob("x", 1.0, 0.0), "requested"),
        (lambda: simulate_downscaling(LONG * 2, ONE, make_downscaling_policy("OI")), "job ids"),
        (lambda: billed_hours(10.0, -1.0), "billing_s"),
    ],
)
def test_bad_input_is_refused_naming_the_field(make: Callable[[], object], field: str) -> None:
    with pytest.raises(InputError, match=field):
        make()


def test_thesis_setup_ap100_by_hand() -> None:
    """On the real HTC trace, AP-100 terminates all 16 dear workers at the first run (0.5 h)."""
    jobs = jobs_from_trace(load_condor_submit(trace_file("htc-condor")))
    setup = DownscalingSetup(
        (CloudSite("hotel", 1.0, 64), CloudSite("sierra", 2.0, 0)),
        {"hotel": 48, "sierra": 16},
        boot_s=360.0,
    )
    r = simulate_downscaling(jobs, setup, make_downscaling_policy("AP-100"))
    assert len(r.killed) == 16 and all(k.time == 1800.0 for k in r.killed)
    assert r.convergence_s == 1800.0 + 360.0
    assert r.excess_cost == 16 * 2 * 1  # each lived half an hour: one billed hour at 2
    assert 0 < r.discarded_s <= 16 * 1800.0
