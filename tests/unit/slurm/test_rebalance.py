"""One rebalancing round on a pool of two sites, against the stand-in for Slurm's commands."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm, Job, expand

from elastic.errors import InputError
from elastic.policies import make_downscaling_policy
from elastic.slurm.commands import Slurm
from elastic.slurm.rebalance import REASON, keep_drained, run_round, slurmd_start_times
from elastic.slurm.sites import load_sites, parse_sites

NOW = datetime(2026, 11, 27, 12, 0, 0).timestamp()
SITES = {
    "sites": [
        {"name": "cheap", "price": 1.0, "desired": 2, "nodes": "node-[0-1]"},
        {"name": "dear", "price": 2.0, "desired": 0, "nodes": "node-[2-3]"},
    ]
}


def busy_pool(fake: FakeSlurm) -> None:
    """Every node runs a one-node job; the dear site's slurmds started 90 min before NOW."""
    fake.jobs = [
        Job("10", ["node-0"], elapsed="30:00", left="30:00"),
        Job("11", ["node-1"], elapsed="30:00", left="30:00"),
        Job("12", ["node-2"], elapsed="5:00", left="55:00"),  # progress 1/12
        Job("13", ["node-3"], elapsed="45:00", left="15:00"),  # progress 3/4
    ]
    fake.states = dict.fromkeys(["node-0", "node-1", "node-2", "node-3"], "allocated")
    fake.slurmd_started = dict.fromkeys(["node-2", "node-3"], "2026-11-27T10:30:00")


def test_ap_100_requeues_the_dear_site_s_jobs_and_powers_its_nodes_down() -> None:
    fake = FakeSlurm()
    busy_pool(fake)
    slurm = Slurm(fake)
    report = run_round(slurm, parse_sites(SITES, expand), make_downscaling_policy("AP-100"), NOW)
    assert report.live_before == {"cheap": 2, "dear": 2}
    assert {r.node for r in report.terminated} == {"node-2", "node-3"}
    assert sorted(fake.requeued) == ["12", "13"]
    assert fake.states["node-2"] == "drained~" and fake.states["node-3"] == "drained~"
    assert fake.reasons["node-2"].startswith(REASON)
    assert fake.states["node-0"] == "allocated"  # the cheap site is left alone
    # 90 minutes up -> 2 whole hours at 2 per hour, for each of the two nodes
    assert report.excess_cost == 8.0
    assert report.discarded_s == 5 * 60 + 45 * 60
    # the pool is back at n = 2 without launching anything
    assert sum(report.launch.values()) == 0


def test_ap_25_spares_jobs_past_a_quarter_of_their_time() -> None:
    fake = FakeSlurm()
    busy_pool(fake)
    report = run_round(
        Slurm(fake), parse_sites(SITES, expand), make_downscaling_policy("AP-25"), NOW
    )
    assert [r.node for r in report.terminated] == ["node-2"]
    assert fake.requeued == ["12"]
    assert fake.states["node-3"] == "allocated"


def test_fo_drains_and_kills_nothing_then_powers_down_once_idle() -> None:
    fake = FakeSlurm()
    busy_pool(fake)
    slurm = Slurm(fake)
    sites = parse_sites(SITES, expand)
    first = run_round(slurm, sites, make_downscaling_policy("FO"), NOW)
    assert first.terminated == () and fake.requeued == []
    assert sorted(first.drained) == ["node-2", "node-3"]
    assert all(fake.reasons[n].startswith(REASON) for n in ("node-2", "node-3"))
    # node-2's job ends; the next round powers the drained, idle node down and spares node-3
    fake.jobs = [j for j in fake.jobs if j.job_id != "12"]
    second = run_round(slurm, sites, make_downscaling_policy("FO"), NOW + 60)
    assert [r.node for r in second.terminated] == ["node-2"]
    assert second.terminated[0].job_id is None and second.discarded_s == 0
    assert fake.states["node-2"] == "drained~" and fake.requeued == []


def test_oi_powers_down_idle_excess_only() -> None:
    fake = FakeSlurm()
    busy_pool(fake)
    fake.jobs = [j for j in fake.jobs if j.job_id != "13"]
    fake.states["node-3"] = "idle"
    report = run_round(Slurm(fake), parse_sites(SITES, expand), make_downscaling_policy("OI"), NOW)
    assert [r.node for r in report.terminated] == ["node-3"]
    assert fake.requeued == [] and fake.states["node-2"] == "allocated"


def test_nodes_drained_by_someone_else_are_not_the_pool_s() -> None:
    fake = FakeSlurm()
    busy_pool(fake)
    fake.jobs = [j for j in fake.jobs if j.job_id != "12"]
    fake.states["node-2"] = "drained"
    fake.reasons["node-2"] = "lent to another experiment"
    report = run_round(
        Slurm(fake), parse_sites(SITES, expand), make_downscaling_policy("AP-100"), NOW
    )
    assert report.live_before["dear"] == 1
    assert [r.node for r in report.terminated] == ["node-3"]
    assert fake.reasons["node-2"] == "lent to another experiment"


def test_a_site_below_its_desired_count_gets_its_drained_nodes_back() -> None:
    fake = FakeSlurm()
    fake.states = {"node-0": "drained~", "node-1": "drained~", "node-2": "idle", "node-3": "idle"}
    fake.reasons = dict.fromkeys(["node-0", "node-1"], f"{REASON}: earlier")
    sites = parse_sites(
        {
            "sites": [
                {"name": "cheap", "price": 1, "desired": 2, "nodes": "node-[0-1]"},
                {"name": "dear", "price": 2, "desired": 2, "nodes": "node-[2-3]"},
            ]
        },
        expand,
    )
    report = run_round(Slurm(fake), sites, make_downscaling_policy("AP-100"), NOW)
    assert report.launch == {"cheap": 2}
    assert sorted(report.undrained) == ["node-0", "node-1"]
    assert fake.states["node-0"] == "idle~"


def test_slurmd_start_times_skip_unknown_times() -> None:
    text = (
        "NodeName=node-0 Arch=x86_64 SlurmdStartTime=2026-11-27T10:30:00 State=IDLE\n"
        "NodeName=node-1 Arch=x86_64 SlurmdStartTime=None State=IDLE+POWERED_DOWN\n"
    )
    found = slurmd_start_times(text)
    assert found == {"node-0": datetime(2026, 11, 27, 10, 30).timestamp()}


@pytest.mark.parametrize(
    ("site", "field"),
    [
        ({"name": "a", "price": -1, "desired": 0, "nodes": "node-0"}, "price"),
        ({"name": "a", "price": 1, "desired": 2, "nodes": "node-0"}, "desired"),
        ({"name": "a", "price": 1, "desired": 0, "nodes": ""}, "nodes"),
        ({"name": "", "price": 1, "desired": 0, "nodes": "node-0"}, "name"),
        ({"name": "a", "price": 1, "desired": 0, "nodes": "node-0", "cost": 3}, "cost"),
        ({"name": "a", "price": 1, "nodes": "node-0"}, "desired"),
    ],
)
def test_a_bad_site_is_refused_naming_the_field(site: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=rf"sites\[0\]( \(a\))?: field {field}"):
        parse_sites({"sites": [site]}, expand, need_desired=True)


def test_a_node_in_two_sites_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sites.yml"
    path.write_text(
        "sites:\n"
        "  - {name: a, price: 1, desired: 0, nodes: 'node-[0-1]'}\n"
        "  - {name: b, price: 2, desired: 0, nodes: 'node-[1-2]'}\n"
    )
    with pytest.raises(
        InputError, match=r"sites\[1\] \(b\): field nodes: node-1 is already in site a"
    ):
        load_sites(path, expand)


def test_a_node_slurm_does_not_know_is_named() -> None:
    fake = FakeSlurm()
    sites = parse_sites(
        {"sites": [{"name": "a", "price": 1, "desired": 0, "nodes": "node-[3-4]"}]}, expand
    )
    with pytest.raises(InputError, match="node-4 are not Slurm nodes"):
        run_round(Slurm(fake), sites, make_downscaling_policy("FO"), NOW)


def test_a_terminated_node_is_drained_again_once_it_powers_down() -> None:
    """A forced power down clears DRAIN as it starts: the drain is set again after that."""
    answers = iter(["node-2|mixed\n", "node-2|idle\n", "node-2|idle%\n"])
    calls: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        return next(answers) if argv[0] == "sinfo" else ""

    naps: list[float] = []
    late = keep_drained(Slurm(run), {"node-2": "dear"}, naps.append)
    assert late == [] and len(naps) == 2
    assert calls[-1][:4] == ["scontrol", "update", "NodeName=node-2", "State=DRAIN"]
    assert calls[-1][4].startswith(f"Reason={REASON}")


def test_a_node_that_never_powers_down_is_named_and_drained_all_the_same() -> None:
    calls: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        return "node-2|mixed\n" if argv[0] == "sinfo" else ""

    late = keep_drained(Slurm(run), {"node-2": "dear"}, lambda _: None, timeout_s=2)
    assert late == ["node-2"]
    assert calls[-1][3] == "State=DRAIN"


def test_rounds_logging_to_one_file_take_turns(tmp_path: Path) -> None:
    """The timer's round and an operator's at once: the second waits for the first."""
    import threading

    from elastic.slurm import service

    log = tmp_path / "log" / "rebalance.jsonl"
    entered = threading.Event()

    def second() -> None:
        with service._one_round_at_a_time(log):
            entered.set()

    with service._one_round_at_a_time(log):
        other = threading.Thread(target=second)
        other.start()
        assert not entered.wait(0.5), "a second round ran while the first held the log"
    other.join(5)
    assert entered.is_set()
