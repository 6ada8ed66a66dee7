"""A bounded Jepsen-style workload on the configuration server, and a checker for its history.

Clients (threads, each with its own connections) run, until a deadline or an operation budget:

- ``cas``: read the register (linearizable), then one transaction ``if mod_revision(register) ==
  seen then put seen+1``: an increment that can only land on the value it read;
- ``append``: put a key of its own, ``PREFIX/append/CLIENT-SEQ``, that nobody else writes;
- ``read``: a linearizable read of the register.

Each operation is recorded with its invocation and completion times and its outcome: ``ok``
(acknowledged), ``fail`` (certainly not applied: compare failed, or refused before it was sent),
or ``info`` (the answer was lost: it may or may not have been applied).

``linearizable`` checks the register's operations against a compare-and-swap register with
Wing and Gong's search (``elastic.history``), which needs no revision. The checker below takes
etcd's revisions as the candidate order of the register's operations and
verifies it: acknowledged increments wrote distinct, increasing values in revision order; that
order respects real time (an operation that completed before another began has the smaller
revision); every acknowledged read saw the latest write acknowledged before it began, and
nothing written after it ended (no stale and no future reads); a read's value is the one written
at the revision it saw; the final register holds every acknowledged increment, with at most as
many extra increments as there were ``info`` ones; and every acknowledged append is present.

Run on a node (``PYTHONPATH=REPOSITORY python3 REPOSITORY/tests/support/faults.py``) it prints
the history as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elastic.configserver.client import EtcdClient, compare_mod_revision, op_put
from elastic.configserver.errors import ConfigServerError, Indeterminate
from elastic.history.linearizable import Result
from elastic.history.linearizable import check as check_linearizable
from elastic.history.models import CasRegister
from elastic.history.ops import Op as HistoryOp
from elastic.history.ops import Outcome

DEFAULT_PREFIX = "/ptc/manager/jepsen/"


@dataclass(frozen=True)
class Op:
    client: int
    kind: str  # cas | append | read
    invoke: float
    complete: float
    outcome: str  # ok | fail | info
    value: int | None = None  # cas: the value written; read: the value seen
    revision: int = 0  # cas/append ok: the write's revision; read ok: the register's mod_revision
    key: str = ""  # append: the key
    error: str = ""


def _register(prefix: str) -> str:
    return prefix + "register"


def run_client(
    client: EtcdClient,
    index: int,
    prefix: str,
    deadline: float,
    max_ops: int,
    think_s: float = 0.0,
    seed: int = 0,
) -> list[Op]:
    rng = random.Random(seed * 1000 + index)
    history: list[Op] = []
    register = _register(prefix)
    seq = 0
    while len(history) < max_ops and time.time() < deadline:
        kind = rng.choices(["cas", "append", "read"], weights=[4, 3, 3])[0]
        start = time.time()
        try:
            if kind == "read":
                kv = client.get(register)
                value = int(kv.value) if kv else 0
                history.append(
                    Op(index, kind, start, time.time(), "ok", value, kv.mod_revision if kv else 0)
                )
            elif kind == "append":
                seq += 1
                key = f"{prefix}append/{index}-{seq}"
                try:
                    rev = client.put(key, str(start))
                    history.append(Op(index, kind, start, time.time(), "ok", seq, rev, key))
                except Indeterminate as err:
                    history.append(
                        Op(index, kind, start, time.time(), "info", seq, 0, key, str(err))
                    )
            else:
                kv = client.get(register)
                seen = int(kv.value) if kv else 0
                seen_rev = kv.mod_revision if kv else 0
                try:
                    result = client.txn(
                        [compare_mod_revision(register, "=", seen_rev)],
                        [op_put(register, str(seen + 1))],
                    )
                except Indeterminate as err:
                    history.append(
                        Op(index, kind, start, time.time(), "info", seen + 1, 0, "", str(err))
                    )
                else:
                    outcome = "ok" if result.succeeded else "fail"
                    rev = result.revision if result.succeeded else 0
                    history.append(Op(index, kind, start, time.time(), outcome, seen + 1, rev))
        except ConfigServerError as err:  # refused before anything was sent: not applied
            history.append(Op(index, kind, start, time.time(), "fail", None, 0, "", str(err)))
        if think_s:
            time.sleep(think_s)
    return history


def run_workload(
    make_client: Callable[[], EtcdClient],
    clients: int = 3,
    max_ops: int = 1000,
    duration_s: float = 60.0,
    prefix: str = DEFAULT_PREFIX,
    think_s: float = 0.0,
    seed: int = 0,
) -> list[Op]:
    """``clients`` threads share ``max_ops`` operations until ``duration_s`` has passed."""
    deadline = time.time() + duration_s
    results: list[list[Op]] = [[] for _ in range(clients)]
    per_client = [max_ops // clients + (1 if i < max_ops % clients else 0) for i in range(clients)]

    def work(i: int) -> None:
        with make_client() as client:
            results[i] = run_client(client, i, prefix, deadline, per_client[i], think_s, seed)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted((op for ops in results for op in ops), key=lambda o: o.invoke)


@dataclass
class CheckResult:
    ops: int
    acknowledged: int
    indeterminate: int
    failed: int
    problems: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


def check(
    history: Sequence[Op],
    final_value: int,
    final_revision: int,
    present_keys: set[str],
    limit: int = 20,
) -> CheckResult:
    """Verify a history against the register's final state and the keys present afterwards."""
    res = CheckResult(
        ops=len(history),
        acknowledged=sum(o.outcome == "ok" for o in history),
        indeterminate=sum(o.outcome == "info" for o in history),
        failed=sum(o.outcome == "fail" for o in history),
    )
    problems = res.problems
    cas_ok = sorted(
        (o for o in history if o.kind == "cas" and o.outcome == "ok"), key=lambda o: o.revision
    )
    cas_info = [o for o in history if o.kind == "cas" and o.outcome == "info"]
    reads = [o for o in history if o.kind == "read" and o.outcome == "ok"]

    # Acknowledged appends are all there.
    for o in history:
        if o.kind == "append" and o.outcome == "ok" and o.key not in present_keys:
            problems.append(f"lost write: acknowledged append {o.key} is missing")

    # Increments: distinct values, increasing with revision.
    values = [o.value for o in cas_ok]
    if len(set(values)) != len(values):
        problems.append("lost update: two acknowledged increments wrote the same value")
    for a, b in itertools.pairwise(cas_ok):
        if a.value is not None and b.value is not None and b.value <= a.value:
            problems.append(
                f"increments out of order: {a.value}@{a.revision} then {b.value}@{b.revision}"
            )
    top = max((v for v in values if v is not None), default=0)
    if final_value < top:
        problems.append(f"lost write: the register ends at {final_value}, below acknowledged {top}")
    if final_value > len(cas_ok) + len(cas_info):
        problems.append(
            f"the register ends at {final_value}, more than {len(cas_ok)} acknowledged and "
            f"{len(cas_info)} indeterminate increments"
        )
    if cas_ok and final_revision < cas_ok[-1].revision:
        problems.append("the register's final revision is older than an acknowledged write")

    # Real time: a write acknowledged before another began has the smaller revision.
    by_complete = sorted(cas_ok, key=lambda o: o.complete)
    for w in cas_ok:
        for earlier in by_complete:
            if earlier.complete >= w.invoke:
                break
            if earlier.revision >= w.revision:
                problems.append(
                    f"real-time order broken: write {earlier.value}@{earlier.revision} ended "
                    f"before write {w.value}@{w.revision} began"
                )

    # Reads: not stale, not from the future, and the value written at the revision seen.
    value_at = {o.revision: o.value for o in cas_ok}
    for r in reads:
        before = [w for w in cas_ok if w.complete < r.invoke]
        if before and r.revision < max(w.revision for w in before):
            latest = max(before, key=lambda w: w.revision)
            problems.append(
                f"stale read: client {r.client} read {r.value}@{r.revision} after write "
                f"{latest.value}@{latest.revision} was acknowledged"
            )
        after = [w for w in cas_ok if w.invoke > r.complete]
        if after and r.revision >= min(w.revision for w in after):
            problems.append(f"read from the future: {r.value}@{r.revision}")
        if r.revision in value_at and value_at[r.revision] != r.value:
            problems.append(
                f"read {r.value}@{r.revision}, but {value_at[r.revision]} was written there"
            )
    for a in reads:
        for b in reads:
            if a.complete < b.invoke and b.revision < a.revision:
                problems.append(f"reads went back in time: {a.revision} then {b.revision}")
                break
    del problems[limit:]
    return res


def unavailability(history: Sequence[Op], faults: Sequence[tuple[str, float]]) -> dict[str, float]:
    """For each fault (name, time it began): seconds from then until a write was acknowledged
    again, counted only if writes failed in between (0 when they never did)."""
    writes = sorted((o for o in history if o.kind in ("cas", "append")), key=lambda o: o.invoke)
    out: dict[str, float] = {}
    for name, began in faults:
        refused = [o for o in writes if o.invoke >= began and o.outcome != "ok"]
        resumed = [o for o in writes if o.invoke >= began and o.outcome == "ok"]
        if not refused:
            out[name] = 0.0
            continue
        first_refused = refused[0].invoke
        after = [o for o in resumed if o.invoke > first_refused]
        out[name] = (after[0].complete if after else writes[-1].complete) - began
    return out


def register_ops(history: Sequence[Op]) -> list[HistoryOp]:
    """The register's operations for the linearizability check (a compare-and-swap register
    starting at 0; appends touch other keys and are left out).

    An increment is ``cas(seen, seen + 1)``: its compare was on the register's mod_revision,
    which changes exactly when its value does, as every write increments. An increment whose
    compare failed returned ``False`` (it ran and found the register moved); one refused before
    it was sent (no value) certainly did nothing; one whose answer was lost may have landed.
    """
    out: list[HistoryOp] = []
    for o in history:
        if o.kind == "append":
            continue
        if o.kind == "read":
            outcome = Outcome.OK if o.outcome == "ok" else Outcome.FAIL
            value, result = None, o.value
        elif o.value is None:
            outcome, value, result = Outcome.FAIL, None, None
        else:
            value = (o.value - 1, o.value)
            outcome = Outcome.INFO if o.outcome == "info" else Outcome.OK
            result = o.outcome == "ok"
        f = "read" if o.kind == "read" else "cas"
        if f == "cas" and outcome is Outcome.FAIL:
            value = (0, 0)  # never applied: any well-formed argument
        out.append(
            HistoryOp(
                index=len(out),
                process=str(o.client),
                f=f,
                value=value,
                outcome=outcome,
                result=result if outcome is Outcome.OK else None,
                invoked=o.invoke,
                returned=o.complete if outcome is not Outcome.INFO else math.inf,
            )
        )
    return out


def linearizable(history: Sequence[Op]) -> Result:
    """The register's operations checked for linearizability (Wing and Gong's search)."""
    return check_linearizable(CasRegister(start=0), register_ops(history))


def dump(history: Sequence[Op]) -> str:
    return json.dumps([asdict(o) for o in history])


def load(text: str) -> list[Op]:
    return [Op(**o) for o in json.loads(text)]


def main(argv: list[str] | None = None) -> int:
    """On a node: run the workload with the credentials in --credentials; history on stdout."""
    from elastic.configserver.node import open_node

    parser = argparse.ArgumentParser(prog="ptc-etcd-faults")
    parser.add_argument("--credentials", type=Path, required=True)
    parser.add_argument("--user", default="root")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--think", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--prefix", default=DEFAULT_PREFIX)
    args = parser.parse_args(argv)
    history = run_workload(
        lambda: open_node(args.user, args.credentials, timeout=args.timeout),
        clients=args.clients,
        max_ops=args.ops,
        duration_s=args.duration,
        prefix=args.prefix,
        think_s=args.think,
    )
    sys.stdout.write(dump(history) + "\n")
    return 0


def final_state(client: EtcdClient, prefix: str = DEFAULT_PREFIX) -> dict[str, Any]:
    """The register's value and revision, and every appended key, read linearizably."""
    kv = client.get(_register(prefix))
    keys = {k.key for k in client.range(prefix + "append/", prefix=True, keys_only=True).kvs}
    return {
        "value": int(kv.value) if kv else 0,
        "revision": kv.mod_revision if kv else 0,
        "keys": keys,
    }


if __name__ == "__main__":
    sys.exit(main())
