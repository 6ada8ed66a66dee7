"""The manager's HTTP API (FastAPI; the schema is at ``/openapi.json``).

Every route but ``/v1/health`` needs ``Authorization: Bearer <token>``: the admin's, a
partition's, or the observer's, which only reads (``OBSERVER_READS``; 403 elsewhere). Errors are JSON
``{"error": kind, "field": name, "message": text}`` with 401 (no or unknown token), 403 (not
yours), 404 (unknown node, partition or reclamation), 409 (held elsewhere, stale or missing
PV), 422 (an invalid field; ``field`` names it) or 503 (this manager is not the active one, or
the configuration server is unavailable: ask again, at ``active`` when the body names it; the
header ``elastic.wire.ACTIVE_HEADER`` carries it too).

With several managers (one per configuration-server node), only the active one serves: the
others answer every route but ``/v1/health`` and the schema with 503. A POST may carry an
``Idempotency-Key``: a retry with the same key (a client that lost the answer when the active
manager died) gets the first answer and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from importlib.resources import files
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from starlette.middleware.base import RequestResponseEndpoint

from elastic import wire
from elastic.configserver.errors import Unavailable
from elastic.errors import InputError, PtcError
from elastic.lifespan import lifespan_running
from elastic.manager.auth import Principal
from elastic.manager.core import Manager, request_key
from elastic.manager.errors import NotActive, UnknownError
from elastic.manager.metrics import CONTENT_TYPE, Metrics
from elastic.manager.model import (
    NAME_PATTERN,
    JobRecord,
    JobReport,
    Node,
    NodeValue,
    PreemptionRecord,
    Queue,
    Reclamation,
    Repair,
    ResumeReport,
    SchedulerState,
)
from elastic.manager.view import pool_view
from elastic.manager.view import steady as view_steady

log = logging.getLogger(__name__)
# Served by every manager, active or not.
OPEN_PATHS = frozenset({"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
# Served by standbys too (with a token): each manager reads the same replicated state, and
# Prometheus scrapes every one of them.
METRICS_PATH = "/metrics"
# The live page of the pool (``elastic.manager.view``): its files, its document, and the
# document again as server-sent events whenever it changes.
PAGE_PATH = "/ui"
VIEW_PATH = "/v1/view"
VIEW_STREAM_PATH = "/v1/view/stream"
PAGE_DIR = files("elastic.manager") / "ui"
PAGE_FILES = {"index.html": "text/html", "app.js": "text/javascript", "app.css": "text/css"}
# The page runs its own script and styles only, and is framed nowhere.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
STREAM_CHECK_S = 0.5  # how often the stream looks for a change
STREAM_BEAT_S = 10.0  # a document at least this often, so ages and countdowns stay right
# What the observer token may call: the pool's state and history, never a token or a change.
OBSERVER_READS = frozenset(
    {
        METRICS_PATH,
        PAGE_PATH,
        PAGE_PATH + "/{asset}",
        VIEW_PATH,
        VIEW_STREAM_PATH,
        "/v1/status",
        "/v1/nodes",
        "/v1/partitions",
        "/v1/reclamations",
        "/v1/reclamations/{reclamation}",
        "/v1/events",
    }
)
Name = Annotated[str, Path(pattern=NAME_PATTERN, max_length=63)]
_bearer = HTTPBearer(
    auto_error=False, description="the admin token, a partition's token or the observer's"
)

NodeName = Annotated[str, Field(pattern=NAME_PATTERN, max_length=63)]
Feature = Annotated[str, Field(min_length=1, max_length=64)]


class NodeSpec(BaseModel):
    cpus: int = Field(default=0, ge=0, le=1_000_000)
    memory_mb: int = Field(default=0, ge=0, le=1_000_000_000)
    features: list[Feature] = Field(default_factory=list, max_length=64)


class PartitionSpec(BaseModel):
    name: NodeName
    endpoint: str | None = Field(
        default=None, max_length=512, description="base URL of the client's NotifyDeletePending"
    )


class PartitionCreated(BaseModel):
    name: str
    endpoint: str | None
    token: str


class TokenOut(BaseModel):
    token: str


class AddRequest(BaseModel):
    nodes: list[NodeName] | None = Field(default=None, max_length=10000)
    count: int | None = Field(default=None, ge=1, le=100_000)
    features: list[Feature] = Field(default_factory=list, max_length=64)
    grace: float | None = Field(
        default=None, ge=0, le=1e9, description="reclaim a shortfall from others with this GP"
    )


class AddOut(BaseModel):
    partition: str
    added: list[str]
    reclamations: list[str]
    waiting: int


class ReleaseRequest(BaseModel):
    nodes: list[NodeName] = Field(min_length=1, max_length=10000)
    power_off: float | None = Field(
        default=None, ge=0, le=1e7, description="seconds a suspend spent powering them off"
    )


class ReleaseOut(BaseModel):
    released: list[str]


class ValuesRequest(BaseModel):
    values: dict[NodeName, NodeValue]
    policy: str = Field(default="", max_length=32)
    time: float | None = Field(default=None, ge=0, le=1e11, description="epoch s of the snapshot")
    jobs: list[JobRecord] = Field(default_factory=list, max_length=100_000)
    node_states: dict[NodeName, SchedulerState] = Field(
        default_factory=dict, max_length=100_000, description="each node's scheduler state"
    )
    pending_jobs: int = Field(default=0, ge=0, le=10_000_000)
    pending_nodes: int = Field(default=0, ge=0, le=1_000_000_000)


class ValuesOut(BaseModel):
    pv: PreemptionRecord
    ignored: list[str]


class ReclaimRequest(BaseModel):
    partition: NodeName
    count: int = Field(ge=1, le=100_000)
    grace: float = Field(ge=0, le=1e9, description="grace period, seconds")


class NoticeRequest(BaseModel):
    nodes: list[NodeName] = Field(min_length=1, max_length=100_000)
    deadline: float = Field(ge=0, le=1e11, description="epoch s the provider ends the nodes")
    source: str = Field(
        min_length=1, max_length=200, description="who gave notice, e.g. an EC2 spot interruption"
    )


class JobsReport(BaseModel):
    jobs: list[JobReport] = Field(max_length=100_000)


class Ok(BaseModel):
    ok: bool = True


class Unprotected(BaseModel):
    was_protected: bool


class RepairClaim(BaseModel):
    holder: str = Field(min_length=1, max_length=128, description="the repair loop claiming")
    cause: str = Field(min_length=1, max_length=300, description="why the node needs repair")
    lease: float = Field(gt=0, le=86400, description="seconds the claim lasts unless ended")


class RepairClaimed(BaseModel):
    claimed: bool
    reason: str = Field(default="", description="why not, when not claimed")


class RepairEnd(BaseModel):
    holder: str = Field(min_length=1, max_length=128)
    error: str = Field(default="", max_length=2000, description='"" when the node is back')
    timings: dict[str, Annotated[float, Field(ge=0, le=1e7)]] = Field(
        default_factory=dict, max_length=16
    )


class Health(BaseModel):
    ok: bool = True
    active: bool = Field(description="this manager is the active one")
    active_manager: str | None = Field(
        default=None, description="the active manager's URL, when known"
    )


def _request_key(
    key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=128,
            pattern=r"^[A-Za-z0-9._:-]{1,128}$",
            description="the same key on a retry returns the first answer",
        ),
    ] = None,
) -> str | None:
    return key


RequestKey = Annotated[str | None, Depends(_request_key)]


def not_active(message: str, active: str | None) -> JSONResponse:
    body = {"error": "NotActive", "field": "", "message": message, "active": active}
    headers = {"Retry-After": "1"}
    if active:
        headers[wire.ACTIVE_HEADER] = active
    return JSONResponse(body, status_code=503, headers=headers)


def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    manager: Manager = request.app.state.manager
    who = manager.authenticate(credentials.credentials if credentials else None)
    route = getattr(request.scope.get("route"), "path", "")
    who.require_reader(
        f"{request.method} {route}", request.method == "GET" and route in OBSERVER_READS
    )
    return who


Caller = Annotated[Principal, Depends(_caller)]


def _field_of(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or ".".join(str(p) for p in loc)


def create_app(manager: Manager, *, tick_interval: float = 1.0, run_loop: bool = True) -> FastAPI:
    """The API around ``manager``; with ``run_loop`` a background task calls ``manager.tick``
    every ``tick_interval`` seconds while the app runs (deadlines, notifications)."""

    async def _loop() -> None:
        while True:
            try:
                await asyncio.to_thread(manager.tick)
            except NotActive as err:
                log.warning("tick stopped: %s", err)
            except Unavailable as err:
                log.warning("tick: the configuration server is unavailable: %s", err)
            except Exception:  # keep the loop alive; the next tick retries
                log.exception("manager tick failed")
            await asyncio.sleep(tick_interval)

    leadership = manager.leadership
    running = lifespan_running(_loop if run_loop else None)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        """Campaign while the app runs (a leadership that campaigns has start/stop); resign as
        it shuts down, before uvicorn hands SIGTERM back to the process, so that a standby
        takes over at once instead of after the lease runs out."""
        start = getattr(leadership, "start", None)
        stop = getattr(leadership, "stop", None)
        if start is not None:
            start()
        try:
            async with running(app):
                yield
        finally:
            if stop is not None:
                await asyncio.to_thread(stop)

    app = FastAPI(title="ptc elastic manager", version="1", description=__doc__, lifespan=lifespan)
    app.state.manager = manager
    metrics = Metrics(manager)
    # every read and compare-and-swap of the manager's store is timed from here on
    manager.store = metrics.timed(manager.store)

    @app.middleware("http")
    async def only_the_active_serves(
        request: Request, call_next: RequestResponseEndpoint
    ) -> Response:
        if request.url.path in OPEN_PATHS or request.url.path == METRICS_PATH:
            return await call_next(request)
        if leadership.is_active():
            return await call_next(request)
        active = await asyncio.to_thread(leadership.active)
        return not_active("this elastic manager is a standby; ask the active one", active)

    # Added last, so it runs first: it times what every request costs, refusals included.
    @app.middleware("http")
    async def timed(request: Request, call_next: RequestResponseEndpoint) -> Response:
        started = time.monotonic()
        response = await call_next(request)
        route = request.scope.get("route")
        template = getattr(route, "path", "other")  # the template: no node names in labels
        metrics.observe_request(
            request.method, template, response.status_code, time.monotonic() - started
        )
        return response

    @app.get(METRICS_PATH, include_in_schema=False)
    def metrics_text(who: Caller) -> Response:
        """The manager's metrics in Prometheus's text format (any valid token)."""
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    @app.exception_handler(PtcError)
    async def ptc_error(_: Request, err: PtcError) -> JSONResponse:
        if isinstance(err, NotActive):
            active = await asyncio.to_thread(leadership.active)
            return not_active(str(err), active)
        if isinstance(err, Unavailable):
            body = {"error": "StoreUnavailable", "field": "", "message": str(err)}
            return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})
        status = getattr(err, "status", 422 if isinstance(err, InputError) else 409)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        body = {
            "error": type(err).__name__,
            "field": getattr(err, "field", ""),
            "message": str(err),
        }
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        errors = err.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = _field_of(first.get("loc", ()))
        body = {
            "error": "FieldError",
            "field": field,
            "message": f"{field}: {first.get('msg', 'invalid')}",
            "details": [
                {"field": _field_of(e.get("loc", ())), "message": str(e.get("msg", ""))}
                for e in errors
            ],
        }
        return JSONResponse(body, status_code=422)

    def view_now() -> dict[str, Any]:
        state = manager.read()
        overhead, wasted = metrics.pool_figures(state)
        return pool_view(
            state,
            manager.clock(),
            manager.config.max_pv_age,
            overhead=overhead,
            wasted_seconds=wasted,
        )

    @app.get(PAGE_PATH, include_in_schema=False)
    def page(who: Caller) -> Response:
        """The live page of the pool (any valid token; the workstation's ``ptc elastic ui``
        presents the observer's)."""
        body = (PAGE_DIR / "index.html").read_bytes()
        return Response(body, media_type="text/html", headers=PAGE_HEADERS)

    @app.get(PAGE_PATH + "/{asset}", include_in_schema=False)
    def page_file(asset: str, who: Caller) -> Response:
        if asset not in PAGE_FILES:
            raise UnknownError("asset", f"no page file {asset!r}")
        body = (PAGE_DIR / asset).read_bytes()
        return Response(body, media_type=PAGE_FILES[asset], headers=PAGE_HEADERS)

    @app.get(VIEW_PATH, summary="The pool as the live page shows it")
    def view(who: Caller) -> dict[str, Any]:
        return view_now()

    @app.get(VIEW_STREAM_PATH, include_in_schema=False)
    async def view_stream(request: Request, who: Caller) -> StreamingResponse:
        """The view as server-sent events: one when it changes (checked every half second),
        and one at least every ten seconds."""

        async def events() -> AsyncIterator[bytes]:
            yield b"retry: 2000\n\n"
            sent, sent_at = "", 0.0
            # Ends when this manager stops being the active one: the browser connects again
            # and is sent to the new one, which the page then names.
            while leadership.is_active() and not await request.is_disconnected():
                doc = await asyncio.to_thread(view_now)
                steady = json.dumps(view_steady(doc), sort_keys=True)
                if steady != sent or time.monotonic() - sent_at >= STREAM_BEAT_S:
                    yield f"event: view\ndata: {json.dumps(doc)}\n\n".encode()
                    sent, sent_at = steady, time.monotonic()
                await asyncio.sleep(STREAM_CHECK_S)

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    @app.get("/v1/health", response_model=Health)
    def health() -> Health:
        active = leadership.is_active()
        return Health(active=active, active_manager=leadership.active())

    @app.get("/v1/status", summary="Pool, partitions, PV ages, pending reclamations")
    def status(who: Caller) -> dict[str, Any]:
        return manager.status()

    @app.get("/v1/nodes", summary="DiscoverResources")
    def discover(who: Caller) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = manager.status()["nodes"]
        return nodes

    @app.put("/v1/nodes/{node}", response_model=Node, summary="Add or update a pool node (admin)")
    def put_node(node: Name, spec: NodeSpec, who: Caller) -> Node:
        return manager.register_node(
            who, node, cpus=spec.cpus, memory_mb=spec.memory_mb, features=spec.features
        )

    @app.delete("/v1/nodes/{node}", response_model=Ok, summary="Remove a free node (admin)")
    def delete_node(node: Name, who: Caller) -> Ok:
        manager.remove_node(who, node)
        return Ok()

    @app.get("/v1/values", summary="The manager's resource values towards the caller")
    def values(who: Caller) -> dict[str, float]:
        return manager.manager_values(who)

    @app.get("/v1/partitions")
    def partitions(who: Caller) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = manager.status()["partitions"]
        return parts

    @app.post(
        "/v1/partitions",
        response_model=PartitionCreated,
        status_code=201,
        summary="CreatePartition (admin)",
    )
    def create_partition(spec: PartitionSpec, who: Caller, key: RequestKey) -> PartitionCreated:
        with request_key(key):
            part, token = manager.create_partition(who, spec.name, spec.endpoint)
        return PartitionCreated(name=part.name, endpoint=part.endpoint, token=token)

    @app.get("/v1/partitions/{partition}/token", response_model=TokenOut)
    def token(partition: Name, who: Caller) -> TokenOut:
        return TokenOut(token=manager.partition_token(who, partition))

    @app.post("/v1/partitions/{partition}/nodes", response_model=AddOut, summary="AddNodes")
    def add_nodes(partition: Name, req: AddRequest, who: Caller, key: RequestKey) -> AddOut:
        with request_key(key):
            result = manager.add_nodes(
                who,
                partition,
                nodes=req.nodes,
                count=req.count,
                features=req.features,
                grace=req.grace,
            )
        return AddOut(
            partition=result.partition,
            added=result.added,
            reclamations=result.reclamations,
            waiting=result.waiting,
        )

    @app.post(
        "/v1/partitions/{partition}/nodes/release", response_model=ReleaseOut, summary="DeleteNodes"
    )
    def delete_nodes(
        partition: Name, req: ReleaseRequest, who: Caller, key: RequestKey
    ) -> ReleaseOut:
        with request_key(key):
            released = manager.delete_nodes(who, partition, req.nodes, power_off=req.power_off)
            return ReleaseOut(released=released)

    @app.post(
        "/v1/partitions/{partition}/resumes",
        response_model=Ok,
        summary="Report what a resume did and how long each step took (the event log keeps it)",
    )
    def report_resume(partition: Name, req: ResumeReport, who: Caller, key: RequestKey) -> Ok:
        with request_key(key):
            manager.report_resume(who, partition, req)
        return Ok()

    @app.post(
        "/v1/partitions/{partition}/notices",
        response_model=list[Reclamation],
        summary="Pass on a provider's notice that it ends some of the partition's nodes",
    )
    def notice(partition: Name, req: NoticeRequest, who: Caller) -> list[Reclamation]:
        # a repeated notice starts nothing new: no idempotency key is needed
        return manager.notice(who, partition, req.nodes, req.deadline, req.source)

    @app.post(
        "/v1/partitions/{partition}/unprotect",
        response_model=Unprotected,
        summary="End the partition's protected mode (admin)",
    )
    def unprotect(partition: Name, who: Caller, key: RequestKey) -> Unprotected:
        with request_key(key):
            return Unprotected(was_protected=manager.unprotect(who, partition))

    @app.post(
        "/v1/partitions/{partition}/repairs/{node}",
        response_model=RepairClaimed,
        summary="Claim a node to repair it (the partition's repair loop)",
    )
    def claim_repair(
        partition: Name, node: Name, req: RepairClaim, who: Caller, key: RequestKey
    ) -> RepairClaimed:
        with request_key(key):
            why = manager.claim_repair(who, partition, node, req.holder, req.cause, req.lease)
        return RepairClaimed(claimed=not why, reason=why)

    @app.post(
        "/v1/partitions/{partition}/repairs/{node}/end",
        response_model=Repair,
        summary="End a claimed repair: the node back, or why not",
    )
    def end_repair(
        partition: Name, node: Name, req: RepairEnd, who: Caller, key: RequestKey
    ) -> Repair:
        with request_key(key):
            return manager.end_repair(who, partition, node, req.holder, req.error, req.timings)

    @app.put(
        "/v1/partitions/{partition}/values", response_model=ValuesOut, summary="SetResourceValues"
    )
    def set_values(partition: Name, req: ValuesRequest, who: Caller) -> ValuesOut:
        pv, ignored = manager.set_values(
            who,
            partition,
            dict(req.values),
            policy=req.policy,
            at=req.time,
            jobs=req.jobs,
            queue=Queue(dict(req.node_states), req.pending_jobs, req.pending_nodes),
        )
        return ValuesOut(pv=pv, ignored=ignored)

    @app.post(
        "/v1/reclamations",
        response_model=Reclamation,
        status_code=201,
        summary="Reclaim nodes from a partition (admin)",
    )
    def reclaim(req: ReclaimRequest, who: Caller, key: RequestKey) -> Reclamation:
        with request_key(key):
            return manager.reclaim(who, req.partition, req.count, req.grace)

    @app.get("/v1/reclamations", response_model=list[Reclamation])
    def reclamations(who: Caller) -> list[Reclamation]:
        return list(manager.read().reclamations.values())

    @app.get("/v1/reclamations/{reclamation}", response_model=Reclamation)
    def get_reclamation(reclamation: Name, who: Caller) -> Reclamation:
        return manager.reclamation(reclamation)

    @app.post("/v1/reclamations/{reclamation}/jobs", response_model=Ok)
    def report_jobs(reclamation: Name, req: JobsReport, who: Caller, key: RequestKey) -> Ok:
        with request_key(key):
            manager.report_jobs(who, reclamation, req.jobs)
        return Ok()

    @app.get("/v1/events", summary="The append-only event log")
    def events(
        who: Caller,
        since: Annotated[int, Query(ge=0, le=10**9)] = 0,
        limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
    ) -> list[dict[str, Any]]:
        return manager.events(since, limit)

    return app
