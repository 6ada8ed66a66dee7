"""The fault workload's checkers: real runs on a loopback etcd check out, with and without a
killed and a frozen server, and hand-made histories with a stale read, a lost write, a broken
order or an increment seen although recorded failed do not."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from etcd_env import EtcdServer, apply_auth, start_etcd
from support.faults import (
    Op,
    check,
    final_state,
    linearizable,
    register_ops,
    run_workload,
    unavailability,
)

from elastic.history.ops import Outcome


def test_a_real_run_checks_out(etcd: EtcdServer) -> None:
    prefix = "/ptc/manager/faults-real/"
    history = run_workload(lambda: etcd.client("manager"), clients=3, max_ops=150, prefix=prefix)
    assert len(history) == 150
    with etcd.client("manager") as c:
        final = final_state(c, prefix)
    result = check(history, final["value"], final["revision"], final["keys"])
    assert result.valid, result.problems
    assert result.acknowledged > 0 and final["value"] > 0
    found = linearizable(history)
    assert found.valid is True, (found.stuck, found.prefix[-5:])


def test_under_a_kill_and_a_freeze_the_register_stays_linearizable(
    pki: Path, tmp_path: Path
) -> None:
    """The server is frozen (SIGSTOP) for 2 s, then killed (SIGKILL) and restarted, while three
    clients with 1 s timeouts work: some answers are lost or refused, none is wrong."""
    server = start_etcd(pki, tmp_path / "data", tmp_path / "etcd.log")
    try:
        apply_auth(server)
        out: list[Op] = []

        def work() -> None:
            out.extend(
                run_workload(
                    lambda: server.client("manager", timeout=1.0),
                    clients=3,
                    max_ops=3000,
                    duration_s=12,
                    prefix="/ptc/manager/faults-kill/",
                    think_s=0.01,
                )
            )

        clients = threading.Thread(target=work)
        clients.start()
        time.sleep(2)
        os.kill(server.proc.pid, signal.SIGSTOP)
        time.sleep(2)
        os.kill(server.proc.pid, signal.SIGCONT)
        time.sleep(2)
        server.kill()
        time.sleep(1)
        server.restart()
        clients.join(timeout=120)
        assert not clients.is_alive()
        with server.client("manager") as c:
            final = final_state(c, "/ptc/manager/faults-kill/")
    finally:
        server.stop()
    result = check(out, final["value"], final["revision"], final["keys"])
    assert result.valid, result.problems
    assert result.acknowledged > 0 and result.indeterminate + result.failed > 0, result
    found = linearizable(out)
    print(
        f"\n{result.ops} ops ({result.acknowledged} ok, {result.indeterminate} indeterminate, "
        f"{result.failed} failed); register {final['value']}; {found.steps} search steps"
    )
    assert found.valid is True, (found.stuck, found.prefix[-5:])


def test_an_increment_seen_although_recorded_failed_is_not_linearizable() -> None:
    """The client recorded a certain failure (refused before it was sent), yet a read saw it."""
    history = [
        Op(0, "cas", 0, 1, "fail", None, 0, "", "refused"),
        Op(1, "read", 2, 3, "ok", 1, 10),
    ]
    assert [o.outcome for o in register_ops(history)] == [Outcome.FAIL, Outcome.OK]
    assert linearizable(history).valid is False
    lost = [Op(0, "cas", 0, 1, "info", 1, 0, "", "timeout"), Op(1, "read", 2, 3, "ok", 1, 10)]
    assert linearizable(lost).valid is True


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
