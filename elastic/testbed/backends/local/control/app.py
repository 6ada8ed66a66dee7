"""The control service's HTTP API (FastAPI), for one experiment.

``GET /v1/health``        the experiment served; the only call without the credential
``GET /v1/nodes``         this experiment's nodes and their states
``GET /v1/hosts``         their LAN addresses and the host keys the testbed pinned for them
``GET /metrics``          operations, refusals and node states in Prometheus's text format
``POST /v1/operations``   {"id", "action": power_on | power_off | reload | release | allocate,
                          "nodes": [...]}
``GET /v1/operations/ID`` the journal's record of one operation

``release`` parks the nodes: their machines go back to the testbed's free pool and the
experiment keeps the right to ``allocate`` them back (with fresh disks, same names and
addresses), which is all ``allocate`` may bring in: a node released any other way (by its
user, or lent to another experiment) is refused with 403. A finished ``reload`` or
``allocate`` answers with each node's addresses and new public host keys (``hosts``), pinned
by the testbed when it made the disk, so the head trusts the new keys without a first-contact
guess.

Every other call presents ``Authorization: Bearer <credential>``. Refusals change nothing and
name what they refuse: 401 a missing or wrong credential, 404 a node unknown to the testbed,
403 a node of another experiment, 409 a node busy with another request (or a request id reused
for a different operation), 422 a malformed request naming the field. A failed operation is
502 with the node and the step. Error bodies are ``{"detail", "node", "step"}``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from elastic.errors import InputError, PtcError
from elastic.events import Event, OnEvent
from elastic.profile import rspec
from elastic.testbed import experiment as experiments
from elastic.testbed import known_hosts
from elastic.testbed.backends.local.capacity import NoMachines
from elastic.testbed.backends.local.control import credential
from elastic.testbed.backends.local.control.journal import FINISHED, REQUEST_ID, Journal, Record
from elastic.testbed.backends.local.control.metrics import CONTENT_TYPE, ControlMetrics
from elastic.testbed.backends.local.control.names import (
    ForeignNode,
    NotParked,
    Resolver,
    UnknownNode,
)
from elastic.testbed.backends.local.provisioning import is_full as fresh_disk
from elastic.testbed.experiment import Experiment

log = logging.getLogger("ptc.control")

Action = Literal["power_on", "power_off", "reload", "release", "allocate"]


class NodeOps(Protocol):
    """``elastic.testbed.nodeops`` as the service uses it (tests pass a fake)."""

    def power_on(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None: ...

    def power_off(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None: ...

    def reload(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None: ...

    def release(
        self,
        exp: Experiment,
        nodes: Sequence[str],
        on_event: OnEvent | None = None,
        *,
        park: bool = False,
    ) -> None: ...

    def allocate(
        self,
        exp: Experiment,
        nodes: Sequence[str],
        like: str | None = None,
        on_event: OnEvent | None = None,
    ) -> None: ...

    def states(self, exp: Experiment) -> dict[str, str]: ...


class OperationRequest(BaseModel):
    id: str = Field(pattern=REQUEST_ID.pattern)
    action: Action
    nodes: list[str] = Field(min_length=1)


class Refused(Exception):
    def __init__(
        self, status: int, detail: str, node: str | None = None, step: str | None = None
    ) -> None:
        super().__init__(detail)
        self.status, self.detail, self.node, self.step = status, detail, node, step


@dataclass
class _InFlight:
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class Settings:
    experiment: str
    credential_digest: bytes
    journal: Journal
    ops: NodeOps
    resolver: Resolver = field(default_factory=Resolver)
    load: Callable[[str], Experiment] = experiments.load


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title=f"ptc testbed control ({settings.experiment})", docs_url=None)
    for record in settings.journal.recover():
        log.warning(
            "request %s (%s %s) was interrupted by a stop of the service; "
            "the same request id runs it again",
            record.id,
            record.action,
            ", ".join(record.nodes),
        )

    def node_states() -> dict[str, str]:
        return settings.ops.states(settings.load(settings.experiment))

    metrics = ControlMetrics(node_states)
    busy: dict[str, str] = {}  # node -> the request id operating on it
    in_flight: dict[str, _InFlight] = {}
    lock = threading.Lock()

    @app.exception_handler(Refused)
    async def refused(_: Request, err: Refused) -> JSONResponse:
        metrics.observe_refusal(err.status)
        headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else None
        body = {"detail": err.detail, "node": err.node, "step": err.step}
        return JSONResponse(body, status_code=err.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        parts = []
        for e in err.errors():
            where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {e.get('msg', 'invalid')}")
        body = {"detail": "; ".join(parts), "node": None, "step": None}
        return JSONResponse(body, status_code=422)

    def authenticated(authorization: Annotated[str | None, Header()] = None) -> None:
        if not authorization:
            raise Refused(401, "missing credential (Authorization: Bearer <credential>)")
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credential.matches(
            presented.strip(), settings.credential_digest
        ):
            raise Refused(401, f"wrong credential for experiment {settings.experiment!r}")

    Auth = Depends(authenticated)

    def experiment() -> Experiment:
        try:
            return settings.load(settings.experiment)
        except PtcError as err:
            raise Refused(503, f"experiment {settings.experiment!r}: {err}") from err

    @app.get("/v1/health")
    def health() -> dict[str, Any]:
        return {"experiment": settings.experiment}

    @app.get("/v1/nodes", dependencies=[Auth])
    def nodes() -> dict[str, Any]:
        exp = experiment()
        try:
            states = settings.ops.states(exp)
        except PtcError as err:
            raise Refused(502, str(err), getattr(err, "node", None), "states") from err
        return {"experiment": exp.name, "nodes": states}

    @app.get("/metrics", dependencies=[Auth], include_in_schema=False)
    def metrics_text() -> Response:
        """The service's metrics in Prometheus's text format."""
        try:
            return Response(metrics.exposition(), media_type=CONTENT_TYPE)
        except PtcError as err:
            raise Refused(502, str(err), getattr(err, "node", None), "states") from err

    @app.get("/v1/hosts", dependencies=[Auth])
    def hosts() -> dict[str, Any]:
        """Each node's LAN addresses and the host keys the testbed pinned for it."""
        exp = experiment()
        names = [n.client_id for n in rspec.parse_manifest(exp.manifest()).nodes]
        return {"experiment": exp.name, "hosts": _hosts(exp, names)}

    @app.get("/v1/operations/{request_id}", dependencies=[Auth])
    def operation(request_id: str) -> dict[str, Any]:
        try:
            record = settings.journal.get(request_id)
        except InputError as err:
            raise Refused(422, str(err)) from err
        if record is None:
            raise Refused(404, f"no operation with request id {request_id!r}")
        return record.view()

    @app.post("/v1/operations", dependencies=[Auth])
    def operate(body: OperationRequest) -> JSONResponse:
        exp = experiment()
        try:
            if settings.journal.get(body.id) is not None:
                # the same request again: what it did (a release or allocate moved its nodes
                # out of or into the manifest since) is checked against the journal below
                targets = settings.resolver.resolve_any(exp, body.nodes)
            elif body.action == "allocate":
                targets = settings.resolver.resolve_parked(exp, body.nodes)
            else:
                targets = settings.resolver.resolve(exp, body.nodes)
        except NotParked as err:
            log.info("request %s: refused node %s, not parked", body.id, err.node)
            raise Refused(err.status, str(err), err.node) from err
        except UnknownNode as err:
            log.info("request %s: refused unknown node %s", body.id, err.node)
            raise Refused(404, str(err), err.node) from err
        except ForeignNode as err:
            log.info("request %s: refused another experiment's node %s", body.id, err.node)
            raise Refused(403, str(err), err.node) from err

        while True:
            with lock:
                waiting = in_flight.get(body.id)
                if waiting is None:
                    record = settings.journal.get(body.id)
                    if record is not None:
                        _same_operation(record, body.action, targets)
                        if record.state in FINISHED:
                            hosts = None
                            if record.error is None and fresh_disk(record.action):
                                hosts = _hosts(exp, list(record.nodes))
                            return _answer(record, replayed=True, hosts=hosts)
                    if taken := [n for n in targets if n in busy]:
                        raise Refused(
                            409,
                            f"node {taken[0]!r} is busy with request {busy[taken[0]]!r}; "
                            "retry when it has finished",
                            taken[0],
                        )
                    busy.update(dict.fromkeys(targets, body.id))
                    mine = in_flight[body.id] = _InFlight()
                    # recorded before any node is touched: a restart finds it
                    record = settings.journal.start(body.id, body.action, targets)
                    break
            # the same request again while it runs (a client whose connection broke): its result
            waiting.done.wait()

        try:
            done = _run(settings, exp, record)
            metrics.observe_operation(done.action, done.seconds or 0.0, done.error is not None)
            hosts = None
            if done.error is None and fresh_disk(done.action):
                hosts = _hosts(settings.load(settings.experiment), list(done.nodes))
            return _answer(done, hosts=hosts)
        finally:
            with lock:
                for node in targets:
                    busy.pop(node, None)
                in_flight.pop(body.id, None)
                mine.done.set()

    return app


def _same_operation(record: Record, action: str, targets: list[str]) -> None:
    if record.action != action or sorted(record.nodes) != sorted(targets):
        raise Refused(
            409,
            f"request id {record.id!r} was used for {record.action} of "
            f"{', '.join(record.nodes)}; use a new id for a different operation",
        )


def _run(settings: Settings, exp: Experiment, record: Record) -> Record:
    events: list[Event] = []
    began = time.monotonic()
    stamps: list[float] = []

    def on_event(event: Event) -> None:
        stamps.append(time.monotonic() - began)
        events.append(event)

    log.info(
        "request %s: %s %s (attempt %d)",
        record.id,
        record.action,
        ", ".join(record.nodes),
        record.attempts,
    )
    error: dict[str, Any] | None = None
    try:
        _operation(settings.ops, record.action)(exp, list(record.nodes), on_event)
    except Exception as err:  # every failure is recorded, so a retry replays it
        node, step = _where(err, events)
        # no free machine is a lasting condition of the testbed, not this request's failure:
        # 503, marked, so the head pauses the site instead of failing the node
        capacity = isinstance(err, NoMachines)
        error = {
            "status": 404 if isinstance(err, InputError) else 503 if capacity else 502,
            "message": str(err),
            "node": node,
            "step": step or record.action,
            "capacity": capacity,
        }
        log.info("request %s: failed: %s", record.id, err)
    steps = [_step(e, t) for e, t in zip(events, stamps, strict=True)]
    record = settings.journal.finish(record, steps, error)
    if error is None:
        log.info("request %s: done in %.1f s", record.id, record.seconds or 0.0)
    return record


def _operation(ops: NodeOps, action: str) -> Callable[[Experiment, list[str], OnEvent], None]:
    """What an action does: a release through this service parks the nodes (the experiment
    may allocate them back); the others are nodeops' operations of the same name."""
    # A request run again after a stop of the service finds the nodes it had moved already
    # moved: those are done, not refused.
    if action == "release":

        def release(exp: Experiment, nodes: list[str], on_event: OnEvent) -> None:
            if todo := [n for n in nodes if n not in exp.parked]:
                ops.release(exp, todo, on_event, park=True)

        return release
    if action == "allocate":

        def allocate(exp: Experiment, nodes: list[str], on_event: OnEvent) -> None:
            if todo := [n for n in nodes if n in exp.parked]:
                ops.allocate(exp, todo, on_event=on_event)

        return allocate
    operation: Callable[..., None] = getattr(ops, action)
    return lambda exp, nodes, on_event: operation(exp, nodes, on_event=on_event)


def _hosts(exp: Experiment, nodes: list[str]) -> dict[str, dict[str, list[str]]]:
    """Each node's addresses on the experiment's LANs and its public host keys as the testbed
    pinned them when it made the node's disk."""
    manifest = rspec.parse_manifest(exp.manifest())
    found: dict[str, dict[str, list[str]]] = {}
    for node in manifest.nodes:
        if node.client_id not in nodes:
            continue
        keys = (
            known_hosts.pinned(exp.inventory_dir / "known_hosts", node.login.hostname,
                               node.login.port)
            if node.login
            else []
        )  # fmt: skip
        addresses = [i.ip for i in node.interfaces if i.ip]
        found[node.client_id] = {"addresses": addresses, "keys": keys}
    return found


# how nodeops names the place of a failure: "node NODE: OPERATION: STEP failed: ..."
_FAILED_AT = re.compile(r"^node (?P<node>\S+): [^:]+: (?P<step>[^:]+?) failed:")


def _where(err: Exception, events: list[Event]) -> tuple[str | None, str | None]:
    """The node and step of a failure: the error's own fields, else its message, else the last
    event that named a node."""
    node, step = getattr(err, "node", None), getattr(err, "step", None)
    if match := _FAILED_AT.match(str(err)):
        node, step = node or match["node"], step or match["step"]
    for event in reversed(events):
        if node is None and "node" in event.data:
            node = str(event.data["node"])
            step = step or event.data.get("step")
        if node is not None:
            break
    return node, step


def _step(event: Event, at: float) -> dict[str, Any]:
    step: dict[str, Any] = {
        "at": round(at, 3),
        "topic": event.topic,
        "kind": event.kind.value,
        "message": event.message,
    }
    for key, value in event.data.items():
        step.setdefault(key, value if isinstance(value, str | int | float | bool) else str(value))
    return step


def _answer(
    record: Record, replayed: bool = False, hosts: dict[str, Any] | None = None
) -> JSONResponse:
    body = {**record.view(), "replayed": replayed}
    if hosts is not None:
        body["hosts"] = hosts
    if record.error is not None:
        error = record.error
        return JSONResponse(
            {
                "detail": error["message"],
                "node": error.get("node"),
                "step": error.get("step"),
                "capacity": bool(error.get("capacity")),
                "operation": body,
            },
            status_code=int(error.get("status", 502)),
        )
    return JSONResponse(body)
