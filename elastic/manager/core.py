"""The elastic manager as a library: every RPC is a method taking the caller (a Principal).

Each method reads the state, checks everything, changes a copy and writes it back with one
compare-and-swap; a check that fails raises before the write, so a refused request changes
nothing. Calls to clients (NotifyDeletePending) happen outside the write, from ``tick``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from pydantic import TypeAdapter

from elastic.events import OnEvent, Reporter
from elastic.manager.auth import Principal, Tokens
from elastic.manager.errors import (
    Conflict,
    FieldError,
    NotActive,
    RevisionConflict,
    UnknownError,
)
from elastic.manager.model import (
    NAME_PATTERN,
    AppliedRequest,
    JobRecord,
    Node,
    Partition,
    PreemptionRecord,
    Reclamation,
    State,
)
from elastic.manager.store import Store
from elastic.policies import (
    DEFAULT_MAX_AGE_S,
    JobInfo,
    PreemptionVector,
    Snapshot,
    StalePreemptionVectorError,
    check_fresh,
    select_nodes,
    wasted_cycles,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
Clock = Callable[[], float]
NOTIFY_PATH = "/v1/notify-delete-pending"
_NAME = re.compile(NAME_PATTERN)
# Requests with an Idempotency-Key are remembered this long (s), and at most this many: far
# longer than a client retries one request across managers (elastic.manager.client).
REQUEST_RETENTION_S = 900.0
MAX_REQUESTS = 2000
_REQUEST_KEY: ContextVar[str | None] = ContextVar("ptc_manager_request_key", default=None)


@contextlib.contextmanager
def request_key(key: str | None) -> Iterator[None]:
    """The calls to a Manager inside this block belong to the request ``key`` (the client's
    Idempotency-Key): the change they make is recorded with its result in the same write, and a
    second request with the same key gets that result without changing anything."""
    token = _REQUEST_KEY.set(key)
    try:
        yield
    finally:
        _REQUEST_KEY.reset(token)


class Notifier(Protocol):
    """Delivers NotifyDeletePending to a client; raises on failure (logged, retried later)."""

    def __call__(self, endpoint: str, token: str, payload: dict[str, Any]) -> None: ...


def http_notifier(timeout: float = 5.0, verify: ssl.SSLContext | bool = True) -> Notifier:
    """POSTs to the client's endpoint; ``verify``: the CA its HTTPS certificate verifies to."""

    def notify(endpoint: str, token: str, payload: dict[str, Any]) -> None:
        import httpx

        response = httpx.post(
            endpoint.rstrip("/") + NOTIFY_PATH,
            json=payload,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            verify=verify,
        )
        response.raise_for_status()

    return notify


class Leadership(Protocol):
    """Whether this manager is the active one: the one place that decides it. With several
    managers on the configuration server (``elastic.manager.ha``), only the active one runs
    ``tick`` (deadlines, NotifyDeletePending) and serves requests; the others answer 503 and
    name the active one (``active``: its URL, None when unknown)."""

    def is_active(self) -> bool: ...

    def active(self) -> str | None: ...


class AlwaysActive:
    """A lone manager is always the active one."""

    def is_active(self) -> bool:
        return True

    def active(self) -> str | None:
        return None


@dataclass(frozen=True)
class ManagerConfig:
    notify_interval: float = 60.0  # §3.1: NotifyDeletePending is repeated every minute
    max_pv_age: float = DEFAULT_MAX_AGE_S  # older vectors are refused (elastic.policies)
    max_grace: float = 7 * 86400.0
    clock_skew: float = 5.0  # a PV may be this far in the manager's future


@dataclass(frozen=True)
class AddResult:
    partition: str
    added: list[str]
    reclamations: list[str] = field(default_factory=list)
    waiting: int = 0  # nodes that will arrive when the reclamations finish


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_name(value: str, field_name: str) -> None:
    if not _NAME.match(value):
        raise FieldError(field_name, f"{value!r} is not a valid name ({NAME_PATTERN})")


class Manager:
    def __init__(
        self,
        store: Store,
        tokens: Tokens,
        *,
        clock: Clock = time.time,
        notifier: Notifier | None = None,
        config: ManagerConfig | None = None,
        on_event: OnEvent | None = None,
        leadership: Leadership | None = None,
    ) -> None:
        self.store = store
        self.leadership = leadership or AlwaysActive()
        self.tokens = tokens
        self.clock = clock
        self.notifier = notifier if notifier is not None else http_notifier()
        self.config = config or ManagerConfig()
        self.report = Reporter("elastic-manager", on_event)
        self._lock = threading.RLock()
        self.tokens.ensure("admin")

    # -- state plumbing -------------------------------------------------------------------
    def read(self) -> State:
        _, doc = self.store.read()
        return State.model_validate(doc or {})

    def _update(self, change: Callable[[State], T], returns: Any = None) -> T:
        """Read, ``change`` a copy, write it back with one compare-and-swap (retried when
        another write came first). With ``returns`` (the result's type) and a request key
        (:func:`request_key`), the result is recorded with the change; a retry of the same
        request gets the recorded result and changes nothing. A change that changes nothing
        writes nothing."""
        key = _REQUEST_KEY.get() if returns is not None else None
        op = change.__qualname__.split(".<locals>")[0]
        with self._lock:
            for _ in range(20):
                revision, doc = self.store.read()
                state = State.model_validate(doc or {})
                if key is not None and key in state.requests:
                    done = state.requests[key]
                    if done.op != op:
                        raise FieldError(
                            "Idempotency-Key", f"was used before for another request ({done.op})"
                        )
                    return cast(T, TypeAdapter(returns).validate_python(done.result))
                result = change(state)
                if key is not None:
                    now = self.clock()
                    _forget_old_requests(state, now)
                    state.requests[key] = AppliedRequest(
                        op=op,
                        time=now,
                        result=TypeAdapter(returns).dump_python(result, mode="json"),
                    )
                new = state.model_dump(mode="json")
                if new == doc:
                    return result
                try:
                    self.store.write(new, expect=revision)
                except RevisionConflict:
                    continue
                return result
        raise Conflict("the state kept changing under this request; try again")

    def authenticate(self, token: str | None) -> Principal:
        return self.tokens.authenticate(token, sorted(self.read().partitions))

    # -- pool -----------------------------------------------------------------------------
    def register_node(
        self,
        caller: Principal,
        name: str,
        *,
        cpus: int = 0,
        memory_mb: int = 0,
        features: Iterable[str] = (),
    ) -> Node:
        caller.require_admin("change the pool")
        _check_name(name, "node")
        now = self.clock()

        def change(state: State) -> Node:
            node = state.nodes.get(name)
            if node is None:
                node = state.nodes[name] = Node(name=name, since=now)
                state.append(now, "node-registered", node=name)
            node.cpus, node.memory_mb, node.features = cpus, memory_mb, sorted(set(features))
            return node.model_copy()

        return self._update(change, Node)

    def remove_node(self, caller: Principal, name: str) -> None:
        caller.require_admin("change the pool")
        now = self.clock()

        def change(state: State) -> None:
            node = self._node(state, name, "node")
            if node.owner is not None:
                raise Conflict(f"node {name} is held by partition {node.owner}", "node")
            del state.nodes[name]
            state.append(now, "node-removed", node=name)

        self._update(change, type(None))

    # -- partitions -----------------------------------------------------------------------
    def create_partition(
        self, caller: Principal, name: str, endpoint: str | None = None
    ) -> tuple[Partition, str]:
        """CreatePartition; returns the partition and its token (shown this once)."""
        caller.require_admin("create partitions")
        _check_name(name, "name")
        if name == "admin":
            raise FieldError("name", "'admin' is reserved")
        now = self.clock()

        def change(state: State) -> Partition:
            if name in state.partitions:
                raise Conflict(f"partition {name} exists", "name")
            part = state.partitions[name] = Partition(name=name, endpoint=endpoint, created=now)
            state.append(now, "partition-created", partition=name, endpoint=endpoint)
            return part.model_copy()

        part = self._update(change, Partition)
        token = self.tokens.ensure(name)
        self.report.status(f"partition {name} created")
        return part, token

    def ensure_partition(
        self, name: str, endpoint: str | None = None, minimum: list[str] | None = None
    ) -> Partition:
        """For the service's configuration: create the partition if missing, update its
        endpoint if given, and make sure its token file exists. ``minimum`` (when given) is the
        set of nodes the partition always holds: free ones are added to it now."""
        now = self.clock()

        def change(state: State) -> Partition:
            part = state.partitions.get(name)
            if part is None:
                part = state.partitions[name] = Partition(name=name, created=now)
                state.append(now, "partition-created", partition=name, endpoint=endpoint)
            if endpoint is not None:
                part.endpoint = endpoint
            if minimum is not None:
                for node in minimum:
                    self._node(state, node, "minimum")
                part.minimum = sorted(set(minimum))
                free = [n for n in part.minimum if state.nodes[n].owner is None]
                for node in free:
                    state.nodes[node].owner, state.nodes[node].since = name, now
                if free:
                    state.append(now, "nodes-added", partition=name, nodes=free, minimum=True)
            return part.model_copy()

        _check_name(name, "name")
        part = self._update(change)
        self.tokens.ensure(name)
        return part

    def partition_token(self, caller: Principal, name: str) -> str:
        state = self.read()
        self._partition(state, name, "partition")
        caller.require_partition(name, "read the token")
        token = self.tokens.get(name)
        if token is None:
            token = self.tokens.ensure(name)
        return token

    # -- AddNodes / DeleteNodes -----------------------------------------------------------
    def add_nodes(
        self,
        caller: Principal,
        partition: str,
        *,
        nodes: list[str] | None = None,
        count: int | None = None,
        features: Iterable[str] = (),
        grace: float | None = None,
    ) -> AddResult:
        """AddNodes: named nodes (Slurm's ResumeProgram) or ``count`` matching nodes (the
        reference client). With ``grace``, a shortfall is reclaimed from other partitions and
        the reclaimed nodes go straight to ``partition`` when released."""
        if (nodes is None) == (count is None):
            raise FieldError("nodes", "give either nodes or count, not both or neither")
        if grace is not None:
            self._check_grace(grace)
        wanted = set(features)
        now = self.clock()

        def change(state: State) -> AddResult:
            self._partition(state, partition, "partition")
            caller.require_partition(partition, "add nodes to")
            if nodes is not None:
                return self._add_named(state, partition, nodes, now)
            assert count is not None
            return self._add_count(state, caller, partition, count, wanted, grace, now)

        result = self._update(change, AddResult)
        self.report.status(
            f"partition {partition}: added {', '.join(result.added) or 'no node'}"
            + (f"; reclaiming {result.waiting}" if result.waiting else "")
        )
        return result

    def _add_named(self, state: State, partition: str, names: list[str], now: float) -> AddResult:
        if not names:
            raise FieldError("nodes", "is empty")
        if len(set(names)) != len(names):
            raise FieldError("nodes", "names a node twice")
        for name in names:
            node = self._node(state, name, "nodes")
            if node.owner not in (None, partition):
                raise Conflict(f"node {name} is held by partition {node.owner}", "nodes")
        added = []
        for name in names:
            node = state.nodes[name]
            if node.owner is None:
                node.owner, node.since = partition, now
                added.append(name)
        if added:
            state.append(now, "nodes-added", partition=partition, nodes=added)
        return AddResult(partition, added)

    def _add_count(
        self,
        state: State,
        caller: Principal,
        partition: str,
        count: int,
        wanted: set[str],
        grace: float | None,
        now: float,
    ) -> AddResult:
        matching = [n for n in sorted(state.nodes) if wanted <= set(state.nodes[n].features)]
        if count < 1:
            raise FieldError("count", f"must be at least 1, got {count}")
        mine = [n for n in matching if state.nodes[n].owner == partition]
        if count > len(matching) - len(mine):
            raise FieldError(
                "count",
                f"{count} is more than the {len(matching) - len(mine)} nodes of the pool "
                "that this partition does not hold"
                + (f" with features {sorted(wanted)}" if wanted else ""),
            )
        free = [n for n in matching if state.nodes[n].owner is None]
        take = free[:count]
        shortfall = count - len(take)
        pending_for_me = 0
        if shortfall:
            if grace is None:
                raise Conflict(
                    f"count: only {len(free)} free nodes; give a grace period to reclaim "
                    f"{shortfall} from other partitions",
                    "count",
                )
            reclamations = []
            busy = self._pending_nodes(state)
            owners = {state.nodes[n].owner for n in matching}
            holders = sorted(o for o in owners if o is not None and o != partition)
            for holder in holders:
                kept = (
                    set(state.partitions[holder].minimum) if holder in state.partitions else set()
                )
                eligible = {n for n in matching if state.nodes[n].owner == holder} - busy - kept
                n = min(shortfall - pending_for_me, len(eligible))
                if n == 0:
                    continue
                rec = self._start_reclamation(
                    state, caller, holder, n, grace, now, beneficiary=partition, eligible=eligible
                )
                reclamations.append(rec.id)
                pending_for_me += n
                if pending_for_me == shortfall:
                    break
            if pending_for_me < shortfall:
                raise Conflict(
                    f"count: {shortfall} more nodes are needed but only {pending_for_me} can be "
                    "reclaimed (the others are already being reclaimed, or in a partition's minimum)",
                    "count",
                )
        else:
            reclamations = []
        for name in take:
            state.nodes[name].owner, state.nodes[name].since = partition, now
        if take:
            state.append(now, "nodes-added", partition=partition, nodes=take)
        return AddResult(partition, take, reclamations, pending_for_me)

    def delete_nodes(self, caller: Principal, partition: str, nodes: list[str]) -> list[str]:
        """DeleteNodes: the partition gives nodes back; under a reclamation this is the client
        saying it is done with them. Returns the nodes released."""
        if not nodes:
            raise FieldError("nodes", "is empty")
        now = self.clock()

        def change(state: State) -> list[str]:
            self._partition(state, partition, "partition")
            caller.require_partition(partition, "release nodes")
            for name in nodes:
                node = self._node(state, name, "nodes")
                if node.owner is None:
                    raise Conflict(f"node {name} is not held by any partition", "nodes")
                if node.owner != partition:
                    caller.require_partition(node.owner, f"release node {name}")
                    raise Conflict(f"node {name} is held by partition {node.owner}", "nodes")
                if name in state.partitions[partition].minimum:
                    raise Conflict(f"node {name} is in partition {partition}'s minimum", "nodes")
            for name in nodes:
                self._release(state, name, now, forced=False)
            state.append(now, "nodes-deleted", partition=partition, nodes=list(nodes))
            return list(nodes)

        released = self._update(change, list[str])
        self.report.status(f"partition {partition}: released {', '.join(released)}")
        return released

    # -- SetResourceValues ----------------------------------------------------------------
    def set_values(
        self,
        caller: Principal,
        partition: str,
        values: dict[str, float],
        *,
        policy: str = "",
        at: float | None = None,
        jobs: list[JobRecord] | None = None,
    ) -> tuple[PreemptionRecord, list[str]]:
        """SetResourceValues; values for nodes the partition no longer holds are dropped (the
        client's view may lag a release) and returned as the second item."""
        now = self.clock()
        taken = now if at is None else at
        if not math.isfinite(taken) or taken > now + self.config.clock_skew:
            raise FieldError("time", f"{taken} is in the future (now {now})")
        for node, value in values.items():
            if not 0.0 <= value <= 1.0:
                raise FieldError("values", f"node {node}: {value} is outside [0, 1]")

        def change(state: State) -> tuple[PreemptionRecord, list[str]]:
            part = self._partition(state, partition, "partition")
            caller.require_partition(partition, "set the preemption vector", admin_ok=False)
            for node in values:
                self._node(state, node, "values")
            kept = {n: v for n, v in values.items() if state.nodes[n].owner == partition}
            dropped = [n for n in values if n not in kept]
            part.pv = PreemptionRecord(
                time=taken, received=now, policy=policy, values=kept, jobs=list(jobs or [])
            )
            return part.pv.model_copy(), dropped

        return self._update(change, tuple[PreemptionRecord, list[str]])

    def manager_values(self, caller: Principal) -> dict[str, float]:
        """The manager's own PV towards ``caller``: 0.0 free, 1.0 held by another partition."""
        state = self.read()
        return {
            n: 0.0 if node.owner is None else 1.0
            for n, node in sorted(state.nodes.items())
            if caller.admin or node.owner != caller.name
        }

    # -- reclamation ----------------------------------------------------------------------
    def _check_grace(self, grace: float) -> None:
        if not math.isfinite(grace) or grace < 0:
            raise FieldError("grace", f"must be a number of seconds >= 0, got {grace}")
        if grace > self.config.max_grace:
            raise FieldError("grace", f"{grace} s is more than {self.config.max_grace} s")

    def reclaim(self, caller: Principal, partition: str, count: int, grace: float) -> Reclamation:
        """Host-driven downscaling: take ``count`` nodes from ``partition`` after ``grace``."""
        caller.require_admin("reclaim nodes")
        self._check_grace(grace)
        now = self.clock()

        def change(state: State) -> Reclamation:
            self._partition(state, partition, "partition")
            return self._start_reclamation(state, caller, partition, count, grace, now)

        rec = self._update(change, Reclamation)
        self.report.status(
            f"reclamation {rec.id}: {', '.join(rec.chosen)} of {partition} by {iso(rec.deadline)}"
        )
        return rec

    def _pending_nodes(self, state: State) -> set[str]:
        return {
            n for r in state.reclamations.values() if r.state == "pending" for n in r.outstanding
        }

    def _start_reclamation(
        self,
        state: State,
        caller: Principal,
        partition: str,
        count: int,
        grace: float,
        now: float,
        *,
        beneficiary: str | None = None,
        eligible: set[str] | None = None,
    ) -> Reclamation:
        part = state.partitions[partition]
        busy = self._pending_nodes(state)
        owned = [n for n, node in state.nodes.items() if node.owner == partition]
        # A reclamation takes other nodes than the partition's minimum, never those.
        kept = set(part.minimum)
        candidates = {
            n
            for n in owned
            if n not in busy and n not in kept and (eligible is None or n in eligible)
        }
        if count < 1:
            raise FieldError("count", f"must be at least 1, got {count}")
        if count > len(candidates):
            raise FieldError(
                "count",
                f"{count} is more than the {len(candidates)} nodes partition {partition} holds "
                "outside other reclamations"
                + (f" and its minimum ({', '.join(sorted(kept))})" if kept else ""),
            )
        if part.pv is None:
            raise Conflict(f"partition {partition} has reported no preemption vector", "pv")
        pv = part.pv
        # The vector's own order first (its tie-break), then nodes it does not cover at 1.0:
        # they joined after it was taken, so nothing says they are cheap to take.
        values = {n: v for n, v in pv.values.items() if n in candidates}
        values.update({n: 1.0 for n in sorted(candidates) if n not in values})
        vector = PreemptionVector(pv.time, values, pv.policy)
        try:
            check_fresh(vector, now, self.config.max_pv_age)
        except StalePreemptionVectorError as err:
            raise Conflict(f"partition {partition}: stale vector refused: {err}", "pv") from err
        chosen = select_nodes(vector, count)
        rec_id = f"r{state.next_reclamation}"
        state.next_reclamation += 1
        jobs = [job for job in pv.jobs if set(job.nodes) & set(chosen)]
        rec = Reclamation(
            id=rec_id,
            partition=partition,
            beneficiary=beneficiary,
            requested_by=caller.describe(),
            count=count,
            grace=grace,
            requested_at=now,
            deadline=now + grace,
            policy=pv.policy,
            pv_time=pv.time,
            values=values,
            chosen=chosen,
            jobs=jobs,
        )
        state.reclamations[rec_id] = rec
        state.append(
            now,
            "reclamation-started",
            reclamation=rec_id,
            partition=partition,
            beneficiary=beneficiary,
            requested_by=rec.requested_by,
            policy=pv.policy,
            grace=grace,
            deadline=rec.deadline,
            chosen=chosen,
            pv={
                "time": pv.time,
                "policy": pv.policy,
                "values": dict(values),
                "jobs": [job.model_dump(mode="json") for job in pv.jobs],
            },
            jobs=[job.model_dump(mode="json") for job in jobs],
            predicted_wasted_cycles=predicted_waste(rec),
        )
        return rec

    def _release(self, state: State, name: str, now: float, *, forced: bool) -> None:
        node = state.nodes[name]
        for rec in state.reclamations.values():
            if rec.state != "pending" or name not in rec.outstanding:
                continue
            if forced:
                rec.forced.append(name)
            else:
                rec.released[name] = now
            heir = rec.beneficiary if rec.beneficiary in state.partitions else None
            node.owner, node.since = heir, now
            if heir is not None:
                state.append(now, "nodes-added", partition=heir, nodes=[name], reclamation=rec.id)
            if not rec.outstanding:
                self._finish(state, rec, now)
            return
        node.owner, node.since = None, now

    def _finish(self, state: State, rec: Reclamation, now: float) -> None:
        waste, killed = observed_waste(rec)
        rec.state, rec.finished_at, rec.wasted_cycles = "done", now, waste
        state.append(
            now,
            "reclamation-finished",
            reclamation=rec.id,
            partition=rec.partition,
            policy=rec.policy,
            grace=rec.grace,
            chosen=rec.chosen,
            released={n: t - rec.requested_at for n, t in rec.released.items()},
            forced=rec.forced,
            jobs_killed=killed,
            wasted_cycles=waste,
            predicted_wasted_cycles=predicted_waste(rec),
        )

    def report_jobs(self, caller: Principal, reclamation: str, jobs: list[dict[str, Any]]) -> None:
        """The client's account of what it did to the jobs at the deadline (requeued or not)."""
        now = self.clock()

        def change(state: State) -> None:
            rec = state.reclamations.get(reclamation)
            if rec is None:
                raise UnknownError("reclamation", f"no reclamation {reclamation}")
            caller.require_partition(rec.partition, "report on the reclamations")
            # Idempotent: a job already reported (a retried report) is not logged again.
            new = [job for job in jobs if str(job.get("job_id")) not in rec.killed_reported]
            if not new:
                return
            rec.killed_reported.extend(str(job.get("job_id")) for job in new)
            state.append(
                now, "jobs-requeued", reclamation=reclamation, partition=rec.partition, jobs=new
            )

        self._update(change, type(None))

    def reclamation(self, reclamation: str) -> Reclamation:
        rec = self.read().reclamations.get(reclamation)
        if rec is None:
            raise UnknownError("reclamation", f"no reclamation {reclamation}")
        return rec

    # -- the loop -------------------------------------------------------------------------
    def tick(self) -> None:
        """Drive deadlines and notifications; the app's background loop calls this. Only the
        active manager does (``leadership``)."""
        if not self.leadership.is_active():
            return
        self.expire()
        if self.leadership.is_active():  # a lost lease stops the round at once
            self.notify_due()

    def expire(self) -> list[str]:
        """Force the release of nodes whose grace period ran out; the finished reclamations."""
        now = self.clock()

        def change(state: State) -> list[str]:
            done = []
            for rec in list(state.reclamations.values()):
                if rec.state == "pending" and now >= rec.deadline:
                    for name in rec.outstanding:
                        self._release(state, name, now, forced=True)
                    if rec.state == "pending":  # nothing was outstanding
                        self._finish(state, rec, now)
                    done.append(rec.id)
            return done

        if not any(
            r.state == "pending" and now >= r.deadline for r in self.read().reclamations.values()
        ):
            return []
        done = self._update(change)
        for rec_id in done:
            self.report.status(f"reclamation {rec_id}: grace period over, nodes taken")
        return done

    def notify_due(self) -> int:
        """NotifyDeletePending to every client with a reclamation due a (re)notification."""
        now = self.clock()
        interval = self.config.notify_interval

        def change(state: State) -> list[tuple[str, str, dict[str, Any]]]:
            out = []
            for rec in state.reclamations.values():
                if rec.state != "pending" or now >= rec.deadline:
                    continue
                if rec.last_notified is not None and now - rec.last_notified < interval:
                    continue
                part = state.partitions.get(rec.partition)
                if part is None or not part.endpoint:
                    continue
                rec.last_notified = now
                rec.notifications += 1
                out.append((rec.id, part.endpoint, self._payload(state, rec)))
            return out

        state = self.read()
        if not any(
            r.state == "pending"
            and now < r.deadline
            and (r.last_notified is None or now - r.last_notified >= interval)
            for r in state.reclamations.values()
        ):
            return 0
        due = self._update(change)
        for rec_id, endpoint, payload in due:
            if not self.leadership.is_active():
                raise NotActive("this manager lost its lease: it notifies no more")
            token = self.tokens.get(payload["partition"]) or ""
            error = ""
            try:
                self.notifier(endpoint, token, payload)
            except Exception as err:  # any transport failure: record it, retry next round
                error = f"{type(err).__name__}: {err}"
                self.report.warning(f"reclamation {rec_id}: notifying {endpoint} failed: {error}")
            self._set_notify_error(rec_id, error)
        return len(due)

    def _set_notify_error(self, rec_id: str, error: str) -> None:
        def change(state: State) -> None:
            state.reclamations[rec_id].notify_error = error

        self._update(change)

    def _payload(self, state: State, rec: Reclamation) -> dict[str, Any]:
        return {
            "reclamation": rec.id,
            "partition": rec.partition,
            "nodes": rec.outstanding,
            "grace": rec.grace,
            "deadline": rec.deadline,
            "deadline_iso": iso(rec.deadline),
            "reason": f"ptc reclamation {rec.id} deadline {iso(rec.deadline)}",
            "beneficiary": rec.beneficiary,
            "manager_values": {
                n: 0.0 if node.owner is None else 1.0
                for n, node in sorted(state.nodes.items())
                if node.owner != rec.partition
            },
        }

    # -- views ----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        state = self.read()
        now = self.clock()
        pending = self._pending_nodes(state)
        nodes = []
        for name, node in sorted(state.nodes.items()):
            kind = "free" if node.owner is None else "allocated"
            if name in pending:
                kind = "reclaiming"
            nodes.append({**node.model_dump(mode="json"), "state": kind})
        partitions = []
        for name, part in sorted(state.partitions.items()):
            pv = part.pv
            partitions.append(
                {
                    "name": name,
                    "endpoint": part.endpoint,
                    "nodes": sorted(n for n, node in state.nodes.items() if node.owner == name),
                    "pv": None
                    if pv is None
                    else {
                        "time": pv.time,
                        "age": now - pv.time,
                        "policy": pv.policy,
                        "values": pv.values,
                        "stale": now - pv.time > self.config.max_pv_age,
                    },
                }
            )
        reclamations = [
            {**rec.model_dump(mode="json"), "remaining": rec.deadline - now}
            for rec in state.reclamations.values()
            if rec.state == "pending"
        ]
        return {
            "time": now,
            "nodes": nodes,
            "partitions": partitions,
            "reclamations": reclamations,
        }

    def events(self, since: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        events = self.read().events
        return [e.model_dump(mode="json") for e in events[since : since + limit]]

    # -- lookups --------------------------------------------------------------------------
    @staticmethod
    def _node(state: State, name: str, field_name: str) -> Node:
        node = state.nodes.get(name)
        if node is None:
            raise UnknownError(field_name, f"no node {name!r} in the pool")
        return node

    @staticmethod
    def _partition(state: State, name: str, field_name: str) -> Partition:
        part = state.partitions.get(name)
        if part is None:
            raise UnknownError(field_name, f"no partition {name!r}")
        return part


def _forget_old_requests(state: State, now: float) -> None:
    old = [k for k, r in state.requests.items() if now - r.time > REQUEST_RETENTION_S]
    for k in old:
        del state.requests[k]
    if len(state.requests) >= MAX_REQUESTS:
        by_age = sorted(state.requests, key=lambda k: state.requests[k].time)
        for k in by_age[: len(state.requests) - MAX_REQUESTS + 1]:
            del state.requests[k]


def _snapshot(rec: Reclamation, remaining: Callable[[JobRecord], float]) -> Snapshot:
    """The partition as the reclamation saw it; elapsed times brought forward from the PV's
    time to the reclamation's, as the simulator's snapshot is taken at the reclamation."""
    shift = max(rec.requested_at - rec.pv_time, 0.0)
    nodes = list(rec.values)
    for job in rec.jobs:
        nodes += [n for n in job.nodes if n not in nodes]
    jobs = tuple(
        JobInfo(
            job_id=job.job_id,
            nodes=tuple(job.nodes),
            elapsed=job.elapsed + shift,
            priority=job.priority,
            remaining=remaining(job),
        )
        for job in rec.jobs
    )
    return Snapshot(rec.requested_at, tuple(nodes), jobs)


def observed_waste(rec: Reclamation) -> tuple[float, list[dict[str, Any]]]:
    """Wasted cycles with the simulator's formula (elastic.policies.wasted_cycles) applied to
    what happened: a job on a node taken at the deadline, or one the client reports it
    requeued or killed, did not finish within the grace period (remaining >= GP); every other
    job did (remaining < GP, no waste)."""
    forced = set(rec.forced)
    reported = set(rec.killed_reported)

    def remaining(job: JobRecord) -> float:
        return math.inf if forced & set(job.nodes) or job.job_id in reported else -1.0

    snap = _snapshot(rec, remaining)
    waste = wasted_cycles(snap, [n for n in rec.chosen if n in snap.nodes], rec.grace)
    killed = []
    for job in snap.jobs:
        if job.job_id in waste.per_job and waste.per_job[job.job_id] > 0:
            killed.append(
                {
                    "job_id": job.job_id,
                    "elapsed": job.elapsed,
                    "node_count": job.node_count,
                    "nodes": list(job.nodes),
                    "wasted_cycles": waste.per_job[job.job_id],
                }
            )
    return waste.total, killed


def predicted_waste(rec: Reclamation) -> float | None:
    """The simulator's prediction from the PV's remaining times (Slurm time limits, an upper
    bound); None when a job's remaining time is unknown."""
    if any(job.remaining is None for job in rec.jobs):
        return None
    shift = max(rec.requested_at - rec.pv_time, 0.0)
    snap = _snapshot(rec, lambda job: max((job.remaining or 0.0) - shift, 0.0))
    return wasted_cycles(snap, [n for n in rec.chosen if n in snap.nodes], rec.grace).total
