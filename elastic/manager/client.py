"""Talking to the manager over HTTP: the library every client uses, and the reference client.

:class:`ManagerClient` maps each route to a method and each error answer back to the error
kind the manager raised (404 -> NotFoundError, 422 -> InputError, ...), with the field named.
:class:`ReferenceClient` is the paper's general-purpose client: it acquires nodes (reclaiming
from other partitions when the pool is empty) and releases them.

A client is given every manager's URL (``"http://a:8700,http://b:8700"`` or a list): one is
active, the others answer 503 and name it. A request goes to the manager that answered last,
and moves on to the next (first the one a 503 named) when a manager cannot be reached, its
answer was lost, or it says it is not the active one; rounds repeat, a moment apart, for at
most ``failover_timeout`` seconds. A manager that could not be reached is asked again only after
``recheck`` seconds unless no other is left, so a dead node costs its timeout once. Every POST
carries an ``Idempotency-Key`` that its retries share, so a request whose answer was lost when a
manager died is never applied twice.

The managers serve HTTPS only, with certificates of the cluster's CA: a client is given that
CA (``ca``, a PEM file, or an ``ssl.SSLContext``) and verifies every manager's certificate against
it, for the address in the URL (the manager's LAN address, also through an SSH tunnel). A
certificate that does not verify is not a manager that cannot be reached: the request stops at
once with :class:`UntrustedManager`, naming the manager and the CA.

The read timeout is short (3 s): the manager answers in milliseconds, and a node that froze
after accepting a connection (its kernel still completes the handshake) would otherwise hold a
request for the whole timeout before the next manager is asked. A slow answer is safe to give
up on for the same reason a lost one is: the retry carries the same key.
"""

from __future__ import annotations

import contextlib
import ssl
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from elastic import wire
from elastic.errors import InputError, NotFoundError, PtcError
from elastic.manager.errors import Conflict, Forbidden, Unauthenticated
from elastic.manager.model import JobRecord, JobReport, Queue

DEFAULT_FAILOVER_TIMEOUT = 30.0


class ManagerUnreachable(PtcError):
    """No manager answered (down, wrong address), or none was the active one in time."""


class UntrustedManager(PtcError):
    """A manager's certificate does not verify against the CA the client was given."""


TlsTrust = ssl.SSLContext | Path | str | None


def tls_context(ca: TlsTrust) -> ssl.SSLContext:
    """A context that trusts only the cluster's CA (a PEM file); the system's CAs with None."""
    if isinstance(ca, ssl.SSLContext):
        return ca
    if ca is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=str(ca))
    except (OSError, ssl.SSLError) as err:
        raise InputError(f"--ca {ca}: not a readable PEM certificate ({err})") from err


def _trust_name(ca: TlsTrust) -> str:
    if ca is None:
        return "the system's CAs"
    return "the CA given" if isinstance(ca, ssl.SSLContext) else str(ca)


def _untrusted(err: httpx.TransportError) -> bool:
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return True
        cause = cause.__cause__ or cause.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(err)


def read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as err:
        raise InputError(f"--token-file {path}: {err.strerror or err}") from err
    if not token:
        raise InputError(f"--token-file {path}: empty")
    return token


def split_urls(urls: str | Sequence[str]) -> list[str]:
    """Every manager URL, from a list or one string separated by commas or spaces."""
    items = urls.replace(",", " ").split() if isinstance(urls, str) else list(urls)
    found = [u.strip().rstrip("/") for u in items if u.strip()]
    if not found:
        raise InputError("manager URL: none given")
    for url in found:
        if not url.startswith(("http://", "https://")):
            raise InputError(f"manager URL {url!r}: must start with http:// or https://")
    return list(dict.fromkeys(found))


class ManagerClient:
    def __init__(
        self,
        url: str | Sequence[str],
        token: str,
        *,
        timeout: float = 3.0,
        connect_timeout: float = 2.0,
        failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT,
        recheck: float = 2.0,
        transport: httpx.BaseTransport | None = None,
        transports: Mapping[str, httpx.BaseTransport] | None = None,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        ca: TlsTrust = None,
    ) -> None:
        self.urls = split_urls(url)
        self.ca = ca
        self.url = self.urls[0]
        self.failover_timeout = failover_timeout
        self.recheck = recheck
        self.round_pause = 0.2  # between rounds when no manager was active
        self._unreachable: dict[str, float] = {}  # url -> when it last could not be reached
        self._clock = clock
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {token}"}
        self._clients: dict[str, httpx.Client] = {}
        self._transports = dict(transports or {})
        self._settings = (timeout, connect_timeout, transport)
        if client is not None:  # e.g. FastAPI's TestClient
            client.headers.update(headers)
            self._clients[self.url] = client
            self.urls = [self.url]
        else:
            limits = httpx.Timeout(timeout, connect=connect_timeout)
            for base in self.urls:
                self._clients[base] = httpx.Client(
                    base_url=base,
                    headers=headers,
                    timeout=limits,
                    transport=self._transports.get(base, transport),
                    verify=tls_context(ca),
                )
        self._http = self._clients[self.url]  # the first manager's (older callers use it)

    def with_token(self, token: str) -> ManagerClient:
        """The same managers, through the same transports, as someone else."""
        timeout, connect_timeout, transport = self._settings
        return ManagerClient(
            self.urls,
            token,
            timeout=timeout,
            connect_timeout=connect_timeout,
            failover_timeout=self.failover_timeout,
            recheck=self.recheck,
            transport=transport,
            transports=self._transports,
            clock=self._clock,
            sleep=self._sleep,
            ca=self.ca,
        )

    def close(self) -> None:
        for http in self._clients.values():
            http.close()

    def _order(self, hint: str | None, tried: set[str]) -> list[str]:
        rest = [u for u in self.urls if u not in tried]
        # A manager that could not be reached is asked again within ``recheck`` seconds only
        # when no other was asked in this round: a dead node costs its timeout once, not in
        # every round of a failover.
        now = self._clock()
        fresh = [u for u in rest if now - self._unreachable.get(u, -1e18) >= self.recheck]
        rest = fresh if fresh or tried else rest
        if hint in rest:
            rest.remove(hint)
            rest.insert(0, hint)
        return rest

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = dict(kwargs.pop("headers", None) or {})
        if method == "POST":
            headers.setdefault("Idempotency-Key", uuid.uuid4().hex)
        deadline = self._clock() + self.failover_timeout
        failures: dict[str, str] = {}
        while True:
            tried: set[str] = set()
            hint: str | None = None
            while order := self._order(hint, tried):
                base = order[0]
                tried.add(base)
                try:
                    response = self._clients[base].request(method, path, headers=headers, **kwargs)
                except httpx.TransportError as err:
                    # Not reached, or the answer was lost: the next manager (a POST's retry
                    # carries the same Idempotency-Key, so it is applied at most once).
                    failures[base] = self._unanswered(base, err)
                    continue
                self._unreachable.pop(base, None)
                if response.status_code == 503:
                    failures[base], hint = _standby(response)
                    continue
                if base != self.url:  # answer there first next time
                    self.url = base
                    self.urls.remove(base)
                    self.urls.insert(0, base)
                return self._answer(response)
            remaining = deadline - self._clock()
            if remaining <= 0:
                detail = "; ".join(f"{u}: {m}" for u, m in failures.items())
                raise ManagerUnreachable(
                    f"no active elastic manager answered {method} {path} within "
                    f"{self.failover_timeout:.0f} s ({detail})"
                )
            self._sleep(min(self.round_pause, remaining))

    def _unanswered(self, base: str, err: httpx.TransportError) -> str:
        """Why ``base`` gave no answer; it is asked last from now on (a dead node costs its
        timeout once). A certificate that does not verify is no reason to try the next one."""
        if _untrusted(err):
            raise UntrustedManager(
                f"manager {base}: its TLS certificate does not verify against "
                f"{_trust_name(self.ca)} ({err}); give "
                "the cluster's CA (the configuration server's ca.crt)"
            ) from err
        self.urls.remove(base)
        self.urls.append(base)
        self._unreachable[base] = self._clock()
        return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__

    @contextlib.contextmanager
    def streamed(
        self, path: str, read_timeout: float | None
    ) -> Iterator[tuple[str, httpx.Response]]:
        """GET ``path`` from the active manager with its body not read yet: (that manager's
        URL, its answer, which may be an error). One round over the managers, no waiting: a
        caller that streams (the live page) asks again when the stream ends."""
        failures: dict[str, str] = {}
        tried: set[str] = set()
        hint: str | None = None
        while order := self._order(hint, tried):
            base = order[0]
            tried.add(base)
            http = self._clients[base]
            timeout = httpx.Timeout(read_timeout, connect=self._settings[1])
            try:
                response = http.send(http.build_request("GET", path, timeout=timeout), stream=True)
            except httpx.TransportError as err:
                failures[base] = self._unanswered(base, err)
                continue
            self._unreachable.pop(base, None)
            if response.status_code == 503:
                response.read()
                response.close()
                failures[base], hint = _standby(response)
                continue
            try:
                yield base, response
            finally:
                response.close()
            return
        detail = "; ".join(f"{u}: {m}" for u, m in failures.items())
        raise ManagerUnreachable(f"no active elastic manager answered GET {path} ({detail})")

    def _answer(self, response: httpx.Response) -> Any:
        if response.status_code < 400:
            return response.json()
        body = _json(response)
        message = body.get("message")
        message = message or f"HTTP {response.status_code}: {response.text[:200]}"
        field = body.get("field", "")
        status = response.status_code
        if status == 401:
            raise Unauthenticated(message)
        if status == 403:
            raise Forbidden(message, field)
        if status == 404:
            raise NotFoundError(message)
        if status == 409:
            raise Conflict(message, field)
        if status in (400, 422):
            raise InputError(message)
        raise PtcError(f"elastic manager: {message}")

    def health(self) -> dict[str, Any]:
        """The health of the manager that answers first (any manager answers, active or not)."""
        result: dict[str, Any] = self._call("GET", "/v1/health")
        return result

    # routes
    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/v1/status")
        return result

    def discover(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/v1/nodes")
        return result

    def register_node(
        self, node: str, cpus: int = 0, memory_mb: int = 0, features: Iterable[str] = ()
    ) -> dict[str, Any]:
        body = {"cpus": cpus, "memory_mb": memory_mb, "features": list(features)}
        result: dict[str, Any] = self._call("PUT", f"/v1/nodes/{node}", json=body)
        return result

    def create_partition(self, name: str, endpoint: str | None = None) -> dict[str, Any]:
        body = {"name": name, "endpoint": endpoint}
        result: dict[str, Any] = self._call("POST", "/v1/partitions", json=body)
        return result

    def add_nodes(
        self,
        partition: str,
        *,
        nodes: list[str] | None = None,
        count: int | None = None,
        grace: float | None = None,
        features: Iterable[str] = (),
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"features": list(features)}
        if nodes is not None:
            body["nodes"] = nodes
        if count is not None:
            body["count"] = count
        if grace is not None:
            body["grace"] = grace
        result: dict[str, Any] = self._call("POST", f"/v1/partitions/{partition}/nodes", json=body)
        return result

    def delete_nodes(
        self, partition: str, nodes: list[str], *, power_off: float | None = None
    ) -> list[str]:
        body: dict[str, Any] = {"nodes": nodes}
        if power_off is not None:
            body["power_off"] = power_off
        result = self._call("POST", f"/v1/partitions/{partition}/nodes/release", json=body)
        released: list[str] = result["released"]
        return released

    def set_values(
        self,
        partition: str,
        values: dict[str, float],
        *,
        policy: str = "",
        at: float | None = None,
        jobs: Sequence[JobRecord] = (),
        queue: Queue | None = None,
    ) -> dict[str, Any]:
        records = [job.model_dump(mode="json") for job in jobs]
        body: dict[str, Any] = {"values": values, "policy": policy, "time": at, "jobs": records}
        if queue is not None:
            body.update(
                node_states=queue.node_states,
                pending_jobs=queue.pending_jobs,
                pending_nodes=queue.pending_nodes,
            )
        result: dict[str, Any] = self._call("PUT", f"/v1/partitions/{partition}/values", json=body)
        return result

    def reclaim(self, partition: str, count: int, grace: float) -> dict[str, Any]:
        body = {"partition": partition, "count": count, "grace": grace}
        result: dict[str, Any] = self._call("POST", "/v1/reclamations", json=body)
        return result

    def notice(
        self, partition: str, nodes: list[str], deadline: float, source: str
    ) -> list[dict[str, Any]]:
        """The reclamations that take ``nodes`` after a provider's notice (see Manager.notice)."""
        body = {"nodes": nodes, "deadline": deadline, "source": source}
        result: list[dict[str, Any]] = self._call(
            "POST", f"/v1/partitions/{partition}/notices", json=body
        )
        return result

    def reclamation(self, rec_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/reclamations/{rec_id}")
        return result

    def report_resume(
        self,
        partition: str,
        nodes: Sequence[str],
        ready: Sequence[str],
        failed: Mapping[str, str],
        timings: Mapping[str, float],
        called_off: Sequence[str] = (),
    ) -> None:
        body = {
            "nodes": list(nodes),
            "ready": list(ready),
            "failed": dict(failed),
            "timings": {k: max(0.0, float(v)) for k, v in timings.items()},
            "called_off": list(called_off),
        }
        self._call("POST", f"/v1/partitions/{partition}/resumes", json=body)

    def unprotect(self, partition: str) -> bool:
        """End the partition's protected mode (admin); whether it was protected."""
        result = self._call("POST", f"/v1/partitions/{partition}/unprotect")
        return bool(result["was_protected"])

    def protection(self, partition: str) -> dict[str, Any]:
        """The partition's protected mode as the manager holds it (``protected``, ``since``,
        ``reason``, ``failures``, ...)."""
        parts: list[dict[str, Any]] = self._call("GET", "/v1/partitions")
        for part in parts:
            if part["name"] == partition:
                return dict(part["protection"])
        raise NotFoundError(f"partition: no partition {partition!r} in the manager")

    def claim_repair(self, partition: str, node: str, holder: str, cause: str, lease: float) -> str:
        """Claim ``node`` for ``lease`` seconds to repair it; "" when claimed, else why not."""
        body = {"holder": holder, "cause": cause[:300], "lease": lease}
        result = self._call("POST", f"/v1/partitions/{partition}/repairs/{node}", json=body)
        return "" if result["claimed"] else str(result["reason"])

    def end_repair(
        self,
        partition: str,
        node: str,
        holder: str,
        error: str = "",
        timings: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """End the repair ``holder`` claimed: ``error`` "" when the node is back; the node's
        repair record (its failures in a row, when the next may start)."""
        body = {
            "holder": holder,
            "error": error[:2000],
            "timings": {k: max(0.0, float(v)) for k, v in (timings or {}).items()},
        }
        result: dict[str, Any] = self._call(
            "POST", f"/v1/partitions/{partition}/repairs/{node}/end", json=body
        )
        return result

    def report_jobs(self, rec_id: str, jobs: Sequence[JobReport]) -> None:
        reports = [job.model_dump(mode="json") for job in jobs]
        self._call("POST", f"/v1/reclamations/{rec_id}/jobs", json={"jobs": reports})

    def events(self, since: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call(
            "GET", "/v1/events", params={"since": since, "limit": limit}
        )
        return result


def _standby(response: httpx.Response) -> tuple[str, str | None]:
    """A 503's reason, and the active manager it names (its header, else its body), if any."""
    body = _json(response)
    hint = response.headers.get(wire.ACTIVE_HEADER) or body.get("active") or None
    return str(body.get("message") or "HTTP 503"), hint.rstrip("/") if isinstance(
        hint, str
    ) else None


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


@dataclass(frozen=True)
class Acquired:
    partition: str
    nodes: list[str]  # every node the partition holds at the end
    added: list[str]  # nodes it got from the pool at once
    reclamations: list[str]
    complete: bool  # False if ``wait`` ran out before the reclaimed nodes arrived


class ReferenceClient:
    """The paper's general-purpose client: acquire and release nodes on request."""

    def __init__(
        self,
        manager: ManagerClient,
        partition: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.manager = manager
        self.partition = partition
        self._clock = clock
        self._sleep = sleep

    def held(self) -> list[str]:
        return sorted(n["name"] for n in self.manager.discover() if n["owner"] == self.partition)

    def acquire(
        self,
        count: int,
        *,
        grace: float | None = None,
        features: Iterable[str] = (),
        wait: float = 0.0,
        poll: float = 2.0,
    ) -> Acquired:
        """Take ``count`` nodes; with ``grace``, reclaim a shortfall from other partitions and
        (with ``wait`` > 0) wait up to ``wait`` seconds for the reclaimed nodes to arrive."""
        before = set(self.held())
        result = self.manager.add_nodes(self.partition, count=count, grace=grace, features=features)
        target = len(before) + len(result["added"]) + int(result["waiting"])
        deadline = self._clock() + wait
        held = self.held()
        while len(held) < target and self._clock() < deadline:
            self._sleep(poll)
            held = self.held()
        return Acquired(
            self.partition, held, result["added"], result["reclamations"], len(held) >= target
        )

    def release(self, nodes: list[str]) -> list[str]:
        return self.manager.delete_nodes(self.partition, nodes)
