"""The fault workload's checker: a real run on a loopback etcd checks out, and hand-made
histories with a stale read, a lost write or a broken order do not."""

from __future__ import annotations

from etcd_env import EtcdServer
from support.faults import Op, check, final_state, run_workload, unavailability


def test_a_real_run_checks_out(etcd: EtcdServer) -> None:
    prefix = "/ptc/manager/faults-real/"
    history = run_workload(lambda: etcd.client("manager"), clients=3, max_ops=150, prefix=prefix)
    assert len(history) == 150
    with etcd.client("manager") as c:
        final = final_state(c, prefix)
    result = check(history, final["value"], final["revision"], final["keys"])
    assert result.valid, result.problems
    assert result.acknowledged > 0 and final["value"] > 0


def w(client: int, t0: float, t1: float, value: int, rev: int, outcome: str = "ok") -> Op:
    return Op(client, "cas", t0, t1, outcome, value, rev if outcome == "ok" else 0)


def r(client: int, t0: float, t1: float, value: int, rev: int) -> Op:
    return Op(client, "read", t0, t1, "ok", value, rev)


def test_stale_read_is_caught() -> None:
    history = [w(0, 0, 1, 1, 10), w(1, 2, 3, 2, 11), r(2, 4, 5, 1, 10)]
    problems = check(history, 2, 11, set()).problems
    assert any("stale read" in p for p in problems)


def test_lost_acknowledged_writes_are_caught() -> None:
    history = [w(0, 0, 1, 1, 10), w(1, 2, 3, 2, 11), Op(2, "append", 0, 1, "ok", 1, 12, "/k")]
    problems = check(history, 1, 10, set()).problems
    assert any("below acknowledged 2" in p for p in problems)
    assert any("append /k is missing" in p for p in problems)


def test_real_time_order_and_duplicates_are_caught() -> None:
    history = [w(0, 0, 1, 1, 11), w(1, 2, 3, 2, 10)]
    assert any("order" in p for p in check(history, 2, 11, set()).problems)
    duplicated = [w(0, 0, 1, 1, 10), w(1, 0, 1, 1, 11)]
    assert any("lost update" in p for p in check(duplicated, 1, 11, set()).problems)


def test_indeterminate_increments_may_land() -> None:
    history = [w(0, 0, 1, 1, 10), w(1, 2, 3, 2, 0, outcome="info")]
    assert check(history, 2, 11, set()).valid
    assert not check(history, 3, 12, set()).valid


def test_unavailability_per_fault() -> None:
    history = [
        Op(0, "append", 0.0, 0.1, "ok", 1, 5, "/a"),
        Op(0, "append", 1.0, 2.0, "fail"),
        Op(0, "append", 2.0, 2.5, "info"),
        Op(0, "append", 3.0, 3.2, "ok", 2, 6, "/b"),
    ]
    assert unavailability(history, [("kill", 0.5)]) == {"kill": 3.2 - 0.5}
    assert unavailability(history[:1], [("none", 0.0)]) == {"none": 0.0}
