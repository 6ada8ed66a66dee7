"""Reconciliation's rules on hand-made instance records (no AWS, no fake): what is an orphan,
a lost node, a young instance, and what is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from elastic.errors import InputError
from elastic.sites.ec2.reconcile import reconcile
from elastic.sites.ec2.records import Instance, InstanceState

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def instance(instance_id: str, state: InstanceState, age_s: float, node: str = "") -> Instance:
    return Instance(
        instance_id=instance_id,
        node=node or f"demo-east-{instance_id[2:]}",
        cluster="demo",
        site="east",
        state=state,
        launch_time=NOW - timedelta(seconds=age_s),
    )


def test_each_instance_lands_in_one_place() -> None:
    observed = [
        instance("i-booting", InstanceState.PENDING, 30, node="n-booting"),  # ours, booting
        instance("i-running", InstanceState.RUNNING, 5000, node="n-running"),
        instance("i-stopped", InstanceState.STOPPED, 5000),  # nobody's, old: still costs disk
        instance("i-ending", InstanceState.SHUTTING_DOWN, 5000, node="n-ending"),
        instance("i-ended", InstanceState.TERMINATED, 5000),  # nobody's and gone: nothing to do
        instance("i-edge", InstanceState.RUNNING, 600),  # exactly the grace period: an orphan
        instance("i-fresh", InstanceState.RUNNING, 599),
    ]
    believed = {
        "east": {"n-booting": "i-booting", "n-running": "i-running", "n-ending": "i-ending"},
        "west": {"n-vanished": "i-vanished"},
    }
    found = reconcile(believed, observed, grace_s=600, now=NOW)
    assert [(o.instance.instance_id, o.age_s) for o in found.orphans] == [
        ("i-stopped", 5000),
        ("i-edge", 600),
    ]
    assert [(n.node, n.site, n.why) for n in found.lost] == [
        ("n-ending", "east", "shutting-down"),
        ("n-vanished", "west", "missing"),
    ]
    assert [i.instance_id for i in found.young] == ["i-fresh"]
    assert found.matched == ("n-booting", "n-running")


def test_nothing_believed_and_nothing_found_is_quiet() -> None:
    found = reconcile({}, [], grace_s=0, now=NOW)
    assert (found.orphans, found.lost, found.young, found.matched) == ((), (), (), ())


@pytest.mark.parametrize("grace", [-1, float("nan")])
def test_a_bad_grace_period_is_refused(grace: float) -> None:
    with pytest.raises(InputError, match=r"^grace_s: .* is not a number of seconds >= 0"):
        reconcile({}, [], grace_s=grace, now=NOW)


def test_a_time_without_zone_is_refused() -> None:
    with pytest.raises(InputError, match=r"^now: a time without a zone"):
        reconcile({}, [], grace_s=60, now=datetime(2025, 3, 1, 12, 0))
