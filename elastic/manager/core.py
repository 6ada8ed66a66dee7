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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from pydantic import TypeAdapter, ValidationError

from elastic import wire
from elastic.events import OnEvent, Reporter
from elastic.manager import protection, repairs
from elastic.manager import reclamation as reclaiming
from elastic.manager.auth import ADMIN, OBSERVER, RESERVED, Principal, Tokens
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
    JobReport,
    Node,
    NodeValue,
    Partition,
    PreemptionRecord,
    Queue,
    Reclamation,
    Repair,
    ResumeReport,
    State,
)
from elastic.manager.reclamation import iso
from elastic.manager.store import Store
from elastic.policies import (
    DEFAULT_MAX_AGE_S,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
Clock = Callable[[], float]
_NAME = re.compile(NAME_PATTERN)
# Requests with an Idempotency-Key are remembered this long (s), and at most this many: far
# longer than a client retries one request across managers (elastic.manager.client).
REQUEST_RETENTION_S = 900.0
MAX_REQUESTS = 2000
_REQUEST_KEY: ContextVar[str | None] = ContextVar("ptc_manager_request_key", default=None)
# The API checks a request's values with the same type; a library caller gets the same rule.
_VALUES: TypeAdapter[dict[str, float]] = TypeAdapter(dict[str, NodeValue])


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
            endpoint.rstrip("/") + wire.NOTIFY_PATH,
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
    # Protected mode: this many node resumes failed in a row on a partition stop its resumes
    # (0: never); they start again when the administrator says so, or after the cool-down
    # (seconds; 0: no cool-down). ParallelCluster's protected mode starts at 10.
    protect_after: int = 10
    protect_cooldown: float = 0.0
    # A node whose repair failed waits this long before the next (seconds), doubling with each
    # failure in a row up to the cap: a node that cannot be mended is not reloaded in a loop.
    repair_backoff: float = 300.0
    repair_backoff_max: float = 6 * 3600.0


@dataclass(frozen=True)
class AddResult:
    partition: str
    added: list[str]
    reclamations: list[str] = field(default_factory=list)
    waiting: int = 0  # nodes that will arrive when the reclamations finish


def _check_name(value: str, field_name: str) -> None:
    if not _NAME.match(value):
        raise FieldError(field_name, f"{value!r} is not a valid name ({NAME_PATTERN})")


def _check_unreserved(value: str, field_name: str) -> None:
    if value in RESERVED:
        raise FieldError(field_name, f"{value!r} is reserved (the {value} token's name)")


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
        self.tokens.ensure(ADMIN)
        self.tokens.ensure(OBSERVER)

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
            return _register(state, name, cpus, memory_mb, features, now).model_copy()

        return self._update(change, Node)

    def register_nodes(self, caller: Principal, nodes: Sequence[Mapping[str, Any]]) -> int:
        """``register_node`` for each of ``nodes`` ({name, cpus, memory_mb, features}) in one
        write: each write replaces the whole state, so a pool registered node by node costs
        the square of its size. Returns how many there were."""
        caller.require_admin("change the pool")
        for spec in nodes:
            _check_name(str(spec["name"]), "node")
        now = self.clock()

        def change(state: State) -> int:
            for spec in nodes:
                _register(
                    state,
                    str(spec["name"]),
                    int(spec.get("cpus", 0)),
                    int(spec.get("memory_mb", 0)),
                    [str(f) for f in spec.get("features", [])],
                    now,
                )
            return len(nodes)

        return self._update(change, int)

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
        _check_unreserved(name, "name")
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
        _check_unreserved(name, "partitions")
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
            busy = reclaiming.pending_nodes(state)
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
                rec = reclaiming.start(
                    state,
                    caller.describe(),
                    holder,
                    n,
                    grace,
                    now,
                    max_pv_age=self.config.max_pv_age,
                    beneficiary=partition,
                    eligible=eligible,
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

    def delete_nodes(
        self,
        caller: Principal,
        partition: str,
        nodes: list[str],
        *,
        power_off: float | None = None,
    ) -> list[str]:
        """DeleteNodes: the partition gives nodes back; under a reclamation this is the client
        saying it is done with them. ``power_off``: the seconds a suspend spent powering them
        off first, kept in the event. Returns the nodes released."""
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
                reclaiming.release(state, name, now, forced=False)
            timed = {} if power_off is None else {"power_off": power_off}
            state.append(now, "nodes-deleted", partition=partition, nodes=list(nodes), **timed)
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
        queue: Queue | None = None,
    ) -> tuple[PreemptionRecord, list[str]]:
        """SetResourceValues; values for nodes the partition no longer holds are dropped (the
        client's view may lag a release) and returned as the second item."""
        now = self.clock()
        taken = now if at is None else at
        if not math.isfinite(taken) or taken > now + self.config.clock_skew:
            raise FieldError("time", f"{taken} is in the future (now {now})")
        try:
            _VALUES.validate_python(values)
        except ValidationError as err:
            first = err.errors()[0]
            node = first["loc"][0] if first["loc"] else "?"
            raise FieldError("values", f"node {node}: {first['msg']}") from None

        def change(state: State) -> tuple[PreemptionRecord, list[str]]:
            part = self._partition(state, partition, "partition")
            caller.require_partition(partition, "set the preemption vector", admin_ok=False)
            for node in values:
                self._node(state, node, "values")
            kept = {n: v for n, v in values.items() if state.nodes[n].owner == partition}
            dropped = [n for n in values if n not in kept]
            shown = queue or Queue()
            part.pv = PreemptionRecord(
                time=taken,
                received=now,
                policy=policy,
                values=kept,
                jobs=list(jobs or []),
                node_states={n: s for n, s in shown.node_states.items() if n in state.nodes},
                pending_jobs=shown.pending_jobs,
                pending_nodes=shown.pending_nodes,
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
            return reclaiming.start(
                state,
                caller.describe(),
                partition,
                count,
                grace,
                now,
                max_pv_age=self.config.max_pv_age,
            )

        rec = self._update(change, Reclamation)
        self.report.status(
            f"reclamation {rec.id}: {', '.join(rec.chosen)} of {partition} by {iso(rec.deadline)}"
        )
        return rec

    def notice(
        self,
        caller: Principal,
        partition: str,
        nodes: Sequence[str],
        deadline: float,
        source: str,
    ) -> list[Reclamation]:
        """A provider ends ``nodes`` at ``deadline`` (the epoch) and said so first (a spot
        interruption's notice): the partition holding them (or the admin) turns the notice into
        a reclamation of those nodes, so their jobs are requeued before the provider ends them.
        Returns the reclamations that now take them (a repeated notice: the one already begun)."""
        caller.require_partition(partition, "pass on a provider's notice for the nodes")
        if not nodes:
            raise FieldError("nodes", "no nodes given")
        if not math.isfinite(deadline):
            raise FieldError("deadline", f"must be a time (the epoch), got {deadline}")
        now = self.clock()
        self._check_grace(max(deadline - now, 0.0))
        names = sorted(set(nodes))

        def change(state: State) -> tuple[Reclamation | None, list[Reclamation]]:
            self._partition(state, partition, "partition")
            rec = reclaiming.notice(
                state, caller.describe(), partition, names, deadline, now, source=source
            )
            taking = [
                r
                for r in state.reclamations.values()
                if r.state == "pending" and set(r.outstanding) & set(names)
            ]
            return rec, taking

        rec, taking = self._update(change)
        if rec is not None:
            self.report.status(
                f"reclamation {rec.id}: {', '.join(rec.chosen)} of {partition} by "
                f"{iso(rec.deadline)} ({source})"
            )
        return taking

    def report_resume(
        self, caller: Principal, partition: str, report: ResumeReport | Mapping[str, Any]
    ) -> None:
        """A partition's account of one resume (see ResumeReport), as a "resume-reported"
        event: which nodes came up, which failed, and how long each step took."""
        done = report if isinstance(report, ResumeReport) else ResumeReport.model_validate(report)
        now = self.clock()

        def change(state: State) -> str | None:
            part = self._partition(state, partition, "partition")
            caller.require_partition(partition, "report the resumes of")
            state.append(
                now,
                "resume-reported",
                partition=partition,
                nodes=done.nodes,
                ready=done.ready,
                failed=done.failed,
                timings=done.timings,
                called_off=done.called_off,
            )
            return self._count(state, part, done.ready, done.failed, done.called_off, now)

        began = self._update(change, str | None)
        if began is not None:
            self.report.warning(f"partition {partition}: protected mode: {began}")

    def _count(
        self,
        state: State,
        part: Partition,
        ready: Sequence[str],
        failed: Mapping[str, str],
        called_off: Sequence[str],
        now: float,
    ) -> str | None:
        """Count nodes that came up or failed towards the partition's protected mode (inside a
        write); the reason when this put it in protected mode, with its event logged."""
        if not protection.record(part, ready, failed, called_off, now, self.config.protect_after):
            return None
        state.append(
            now,
            "partition-protected",
            partition=part.name,
            failures=part.protection.failures,
            reason=part.protection.reason,
        )
        return part.protection.reason

    def unprotect(self, caller: Principal, partition: str) -> bool:
        """End ``partition``'s protected mode (admin); False if it was not protected."""
        caller.require_admin("end a partition's protected mode")
        now = self.clock()

        def change(state: State) -> bool:
            part = self._partition(state, partition, "partition")
            if not protection.end(part, now):
                return False
            state.append(now, "partition-unprotected", partition=partition, by=caller.describe())
            return True

        ended = self._update(change, bool)
        if ended:
            self.report.status(f"partition {partition}: protected mode ended by the admin")
        return ended

    def claim_repair(
        self, caller: Principal, partition: str, node: str, holder: str, cause: str, lease: float
    ) -> str:
        """``holder`` (a repair loop) claims ``node`` of ``partition`` for ``lease`` seconds to
        repair it for ``cause``: "" when it holds the claim, else why not (another loop holds
        it, the node backs off, the partition is protected). A node lent elsewhere is refused."""
        now = self.clock()

        def change(state: State) -> str:
            part = self._partition(state, partition, "partition")
            caller.require_partition(partition, "repair the nodes of")
            owner = self._node(state, node, "node").owner
            if owner not in (None, partition):
                raise Conflict(f"node {node!r} is held by {owner!r}", "node")
            if why := repairs.claim(part, node, holder, cause, now, lease):
                return why
            state.append(
                now, "repair-started", partition=partition, node=node, cause=cause, holder=holder
            )
            return ""

        refused = self._update(change, str)
        if not refused:
            self.report.status(f"partition {partition}: repairing {node} ({cause})")
        return refused

    def end_repair(
        self,
        caller: Principal,
        partition: str,
        node: str,
        holder: str,
        error: str = "",
        timings: Mapping[str, float] | None = None,
    ) -> Repair:
        """The repair ``holder`` claimed ended: ``error`` "" when the node is back in service.
        A failure backs the node off and counts towards protected mode like a failed resume;
        a success starts the count again."""
        now = self.clock()
        steps = dict(timings or {})

        def change(state: State) -> tuple[Repair, str | None]:
            part = self._partition(state, partition, "partition")
            caller.require_partition(partition, "repair the nodes of")
            if not repairs.holds(part, node, holder):
                raise Conflict(f"{holder!r} holds no repair of {node!r}", "holder")
            cause = part.repairs[node].cause
            started = part.repairs[node].started or now
            done = repairs.finish(
                part, node, error, now, self.config.repair_backoff, self.config.repair_backoff_max
            )
            common = {
                "partition": partition,
                "node": node,
                "cause": cause,
                "holder": holder,
                "seconds": now - started,
                "timings": steps,
            }
            if not error:
                state.append(now, "node-repaired", **common, repaired=done.repaired)
                self._count(state, part, [node], {}, [], now)
                return done, None
            state.append(
                now,
                "repair-failed",
                **common,
                error=done.last_error,
                failures=done.failures,
                retry_at=done.not_before,
            )
            return done, self._count(state, part, [], {node: f"repair: {error}"}, [], now)

        done, began = self._update(change, tuple[Repair, str | None])
        if error:
            self.report.warning(f"partition {partition}: repairing {node} failed: {error}")
        else:
            self.report.status(f"partition {partition}: {node} repaired")
        if began is not None:
            self.report.warning(f"partition {partition}: protected mode: {began}")
        return done

    def report_jobs(
        self,
        caller: Principal,
        reclamation: str,
        jobs: Iterable[JobReport | Mapping[str, Any]],
    ) -> None:
        """The client's account of what it did to the jobs at the deadline (requeued or not);
        a mapping is read as a JobReport."""
        now = self.clock()
        reports = [j if isinstance(j, JobReport) else JobReport.model_validate(j) for j in jobs]

        def change(state: State) -> None:
            rec = state.reclamations.get(reclamation)
            if rec is None:
                raise UnknownError("reclamation", f"no reclamation {reclamation}")
            caller.require_partition(rec.partition, "report on the reclamations")
            # Idempotent: a job already reported (a retried report) is not logged again.
            new = [job for job in reports if job.job_id not in rec.killed_reported]
            if not new:
                return
            rec.killed_reported.extend(job.job_id for job in new)
            state.append(
                now,
                "jobs-requeued",
                reclamation=reclamation,
                partition=rec.partition,
                jobs=[job.model_dump(mode="json") for job in new],
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
        if self.leadership.is_active():
            self.cool_down()

    def cool_down(self) -> list[str]:
        """End the protected modes that have lasted their cool-down; the partitions."""
        now = self.clock()
        cooldown = self.config.protect_cooldown

        def change(state: State) -> list[str]:
            done = []
            for name, part in sorted(state.partitions.items()):
                if protection.cooled_down(part, now, cooldown) and protection.end(part, now):
                    state.append(now, "partition-unprotected", partition=name, by="cool-down")
                    done.append(name)
            return done

        if not any(
            protection.cooled_down(p, now, cooldown) for p in self.read().partitions.values()
        ):
            return []
        done = self._update(change)
        for name in done:
            self.report.status(f"partition {name}: protected mode ended after its cool-down")
        return done

    def expire(self) -> list[str]:
        """Force the release of nodes whose grace period ran out; the finished reclamations."""
        now = self.clock()

        def change(state: State) -> list[str]:
            done = []
            for rec in list(state.reclamations.values()):
                if rec.state == "pending" and now >= rec.deadline:
                    for name in rec.outstanding:
                        reclaiming.release(state, name, now, forced=True)
                    if rec.state == "pending":  # nothing was outstanding
                        reclaiming.finish(state, rec, now)
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
                out.append((rec.id, part.endpoint, reclaiming.payload(state, rec)))
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

    # -- views ----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        state = self.read()
        now = self.clock()
        pending = reclaiming.pending_nodes(state)
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
                    "protection": {
                        **part.protection.model_dump(mode="json"),
                        "protected": part.protection.since is not None,
                    },
                    "repairs": {
                        node: {**r.model_dump(mode="json"), "active": r.lease_until > now}
                        for node, r in sorted(part.repairs.items())
                    },
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


def _register(
    state: State, name: str, cpus: int, memory_mb: int, features: Iterable[str], now: float
) -> Node:
    node = state.nodes.get(name)
    if node is None:
        node = state.nodes[name] = Node(name=name, since=now)
        state.append(now, "node-registered", node=name)
    node.cpus, node.memory_mb, node.features = cpus, memory_mb, sorted(set(features))
    return node


def _forget_old_requests(state: State, now: float) -> None:
    old = [k for k, r in state.requests.items() if now - r.time > REQUEST_RETENTION_S]
    for k in old:
        del state.requests[k]
    if len(state.requests) >= MAX_REQUESTS:
        by_age = sorted(state.requests, key=lambda k: state.requests[k].time)
        for k in by_age[: len(state.requests) - MAX_REQUESTS + 1]:
            del state.requests[k]
