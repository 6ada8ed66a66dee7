"""The ledger's fold: used, lost, lent and instance time from real sacct lines and manager
event logs, summed by job, user, site and experiment."""

from __future__ import annotations

import math

import pytest
from ledger_samples import (
    ACROSS,
    ACROSS_SINCE,
    BEFORE_RERUN,
    EVENTS,
    EXPAND,
    NOTHING,
    UNTIL,
    WHOLE,
    WHOLE_SINCE,
    lending,
)

from elastic.errors import InputError
from elastic.ledger import pool, records
from elastic.ledger.records import Ledger, Site, summarise
from elastic.ledger.runs import parse_runs


def ledger(
    text: str = WHOLE, since: float = WHOLE_SINCE, until: float = UNTIL, **kwargs: object
) -> Ledger:
    return records.build(
        "devel",
        since,
        until,
        parse_runs(text),
        pool.fold(EVENTS),
        expand=EXPAND,
        **kwargs,  # type: ignore[arg-type]
    )


def by_job(book: Ledger) -> dict[str, dict[str, object]]:
    return {row["job_id"]: row for row in summarise(book, "job")}


def test_used_is_elapsed_raw_times_nnodes_over_every_run_and_an_array_s_tasks_are_jobs() -> None:
    jobs = by_job(ledger())
    assert list(jobs) == ["1", "2_0", "2_1", "2_2", "3", "6"]  # by first start
    assert jobs["1"]["used_node_s"] == 30 * 2
    assert [jobs[t]["used_node_s"] for t in ("2_0", "2_1", "2_2")] == [5, 5, 5]
    # job 6: its requeued run counts; the pending line of its next run has no node-time
    assert (jobs["6"]["runs"], jobs["6"]["used_node_s"], jobs["6"]["lost_node_s"]) == (1, 8, 0)
    assert jobs["6"]["state"] == "REQUEUED"  # requeued by hand: not lost to a reclamation


def test_a_run_a_reclamation_requeued_counts_as_used_and_as_lost() -> None:
    """sacct lost job 3's first run (requeuehold keeps one record), so the client's report of
    it (39 s on 1 node) stands in: used 120 + 39, lost 39, two runs."""
    book = ledger()
    job = by_job(book)["3"]
    assert (job["runs"], job["used_node_s"], job["lost_node_s"]) == (2, 159, 39)
    assert job["reclamations"] == "r1" and job["state"] == "COMPLETED"
    first = next(r for r in book.runs if r.job_id == "3" and r.lost_node_s)
    assert (first.source, first.hosts, first.state) == ("manager", "node-2", "REQUEUED")
    totals = book.totals()
    assert (totals["used_node_s"], totals["lost_node_s"], totals["runs"]) == (242, 39, 7)
    assert totals["jobs"] == 6 and totals["used_node_h"] == pytest.approx(242 / 3600, abs=1e-6)


def test_a_requeued_run_sacct_still_has_is_taken_from_sacct_not_from_the_report() -> None:
    book = ledger(BEFORE_RERUN)
    (run,) = book.runs
    assert (run.source, run.used_node_s, run.lost_node_s, run.reclamation) == (
        "sacct",
        39,
        39,
        "r1",
    )


def test_a_run_across_the_since_boundary_counts_from_the_boundary() -> None:
    """sacct --truncate cuts job 1 at 10:39:00 (10 s of 30 left); the reported run of job 3
    that began before the boundary counts its 20 s after it."""
    jobs = by_job(ledger(ACROSS, since=ACROSS_SINCE))
    assert list(jobs) == ["1", "3", "6"]  # the array had ended before the period
    assert jobs["1"]["used_node_s"] == 10 * 2
    assert (jobs["3"]["used_node_s"], jobs["3"]["lost_node_s"]) == (120 + 20, 20)


def test_a_job_killed_by_a_reclamation_but_absent_from_sacct_and_the_report_is_not_made_up() -> (
    None
):
    """jobs_killed of reclamation-finished has the PV's estimate of elapsed time, not Slurm's:
    a kill known only from it counts only if sacct has the run."""
    events = [e for e in EVENTS if e["kind"] != "jobs-requeued"]
    book = records.build("devel", WHOLE_SINCE, UNTIL, parse_runs(WHOLE), pool.fold(events))
    assert book.totals()["lost_node_s"] == 0 and book.totals()["used_node_s"] == 203
    matched = records.build(
        "devel", WHOLE_SINCE, UNTIL, parse_runs(BEFORE_RERUN), pool.fold(events)
    )
    assert matched.totals()["lost_node_s"] == 39


def test_instance_time_is_the_nodes_holds_and_cost_is_priced_or_rounded_up_per_hold() -> None:
    book = ledger(local=Site("local", 2.0))
    held = [(i.node, round(i.instance_s, 1)) for i in book.instances]
    assert held == [
        ("node-0", 39.5),
        ("node-1", 39.5),
        ("node-2", 48.0),
        ("node-3", 171.4),
        ("node-0", 29.5),
    ]
    seconds = sum(i.instance_s for i in book.instances)
    assert book.totals()["cost"] == pytest.approx(seconds / 3600 * 2.0, abs=1e-6)
    rounded = ledger(local=Site("local", 2.0), round_hours=True)
    assert rounded.totals()["cost"] == 5 * 1 * 2.0  # five holds, each its first hour started


def test_sites_split_instances_cost_and_used_time_by_node() -> None:
    book = ledger(sites={"node-3": Site("dear", 3.0)}, local=Site("local", 1.0))
    sites = {row["site"]: row for row in summarise(book, "site")}
    assert list(sites) == ["local", "dear"]
    assert sites["dear"]["used_node_s"] == 120  # job 3's second run, on node-3
    assert sites["local"]["used_node_s"] == 242 - 120
    assert sites["dear"]["instance_s"] == pytest.approx(171.4, abs=0.1)
    assert sites["dear"]["cost"] == pytest.approx(sites["dear"]["instance_s"] / 3600 * 3, abs=1e-6)
    assert sites["local"]["lost_node_s"] == 39  # job 3's first run, on node-2


def test_lent_time_runs_from_the_lend_to_the_give_back_and_names_the_borrower_of_a_live_loan() -> (
    None
):
    t0 = 1796036000.0
    book = records.build(
        "devel",
        t0 - 1000,
        t0 + 7200,
        [],
        pool.fold(lending(t0)),
        borrowers={"node-2": "other"},
    )
    loans = [(loan.node, loan.borrower, loan.node_s, loan.end) for loan in book.loans]
    # node-1 went to ref by the reclamation: slurm's DeleteNodes logged after it does not end it
    assert loans == [("node-1", "ref", 3600.0, t0 + 3600), ("node-2", "other", 5400.0, None)]
    assert [(i.node, i.instance_s) for i in book.instances] == [("node-1", 100.0)]
    rows = {row["experiment"]: row for row in summarise(book, "experiment")}
    assert rows["devel"]["lent_node_s"] == 9000.0 and rows["devel"]["instance_s"] == 100.0
    assert rows["other"]["borrowed_node_s"] == 5400.0 and rows["ref"]["borrowed_node_s"] == 3600.0


def test_forced_nodes_leave_their_partition_at_the_reclamation_s_end() -> None:
    events = [
        {"seq": 1, "time": 0.0, "kind": "nodes-added", "data": {"partition": "slurm", "nodes": ["a"]}},
        {"seq": 2, "time": 50.0, "kind": "reclamation-started",
         "data": {"reclamation": "r1", "partition": "slurm", "jobs": []}},
        {"seq": 3, "time": 60.0, "kind": "reclamation-finished",
         "data": {"reclamation": "r1", "partition": "slurm", "forced": ["a"], "jobs_killed": []}},
    ]  # fmt: skip
    assert pool.fold(events).holds == (pool.Hold("a", "slurm", 0.0, 60.0),)


def test_users_sum_their_jobs() -> None:
    (row,) = summarise(ledger(), "user")
    assert (row["user"], row["jobs"], row["runs"], row["used_node_s"], row["lost_node_s"]) == (
        "ptc",
        6,
        7,
        242,
        39,
    )


def test_a_period_with_no_data_is_refused_naming_since() -> None:
    with pytest.raises(records.EmptyPeriod, match="--since 2026-11-30T09:00:00Z") as err:
        records.build("devel", 1796029200.0, 1796032200.0, parse_runs(NOTHING), pool.fold(EVENTS))
    assert err.value.exit_code == 2


def test_a_wrong_by_is_refused_naming_by() -> None:
    with pytest.raises(InputError, match="--by 'bogus': not one of job, user, site, experiment"):
        summarise(ledger(), "bogus")


def test_the_json_document_carries_rows_totals_and_every_run() -> None:
    doc = ledger().to_json("job")
    assert doc["totals"]["used_node_s"] == sum(r["used_node_s"] for r in doc["rows"]) == 242
    assert len(doc["runs"]) == 7 and doc["since_iso"] == "2026-11-30T10:00:00Z"
    assert all(math.isfinite(i["instance_s"]) for i in doc["instances"])
