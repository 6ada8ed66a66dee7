"""Talking to the manager over HTTP: the library every client uses, and the reference client.

:class:`ManagerClient` maps each route to a method and each error answer back to the error
kind the manager raised (404 -> NotFoundError, 422 -> InputError, ...), with the field named.
:class:`ReferenceClient` is the paper's general-purpose client: it acquires nodes (reclaiming
from other partitions when the pool is empty) and releases them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from elastic.errors import InputError, NotFoundError, PtcError
from elastic.manager.errors import Conflict, Forbidden, Unauthenticated


class ManagerUnreachable(PtcError):
    """The manager did not answer (down, wrong address)."""


def read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as err:
        raise InputError(f"--token-file {path}: {err.strerror or err}") from err
    if not token:
        raise InputError(f"--token-file {path}: empty")
    return token


class ManagerClient:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"}
        if client is not None:  # e.g. FastAPI's TestClient
            client.headers.update(headers)
            self._http = client
        else:
            self._http = httpx.Client(
                base_url=self.url, headers=headers, timeout=timeout, transport=transport
            )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as err:
            raise ManagerUnreachable(f"elastic manager at {self.url}: {err}") from err
        if response.status_code < 400:
            return response.json()
        try:
            body = response.json()
        except ValueError:
            body = {}
        message = body.get("message") if isinstance(body, dict) else None
        message = message or f"HTTP {response.status_code}: {response.text[:200]}"
        field = body.get("field", "") if isinstance(body, dict) else ""
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

    def delete_nodes(self, partition: str, nodes: list[str]) -> list[str]:
        result = self._call(
            "POST", f"/v1/partitions/{partition}/nodes/release", json={"nodes": nodes}
        )
        released: list[str] = result["released"]
        return released

    def set_values(
        self,
        partition: str,
        values: dict[str, float],
        *,
        policy: str = "",
        at: float | None = None,
        jobs: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        body = {"values": values, "policy": policy, "time": at, "jobs": jobs or []}
        result: dict[str, Any] = self._call("PUT", f"/v1/partitions/{partition}/values", json=body)
        return result

    def reclaim(self, partition: str, count: int, grace: float) -> dict[str, Any]:
        body = {"partition": partition, "count": count, "grace": grace}
        result: dict[str, Any] = self._call("POST", "/v1/reclamations", json=body)
        return result

    def reclamation(self, rec_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/reclamations/{rec_id}")
        return result

    def report_jobs(self, rec_id: str, jobs: list[dict[str, Any]]) -> None:
        self._call("POST", f"/v1/reclamations/{rec_id}/jobs", json={"jobs": jobs})

    def events(self, since: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call(
            "GET", "/v1/events", params={"since": since, "limit": limit}
        )
        return result


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
