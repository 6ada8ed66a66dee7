"""The client of the control service, for the Slurm hooks on the head and the host's CLI.

Every call presents the credential read from its file (never passed on a command line). A
request whose connection fails (the service is restarting) is sent again with the same request
id until ``timeout``; the service's journal makes that safe (see ``journal``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from elastic.errors import NoCapacity, NodeControlError
from elastic.testbed.backends.local.control import CREDENTIAL, SOCKET
from elastic.testbed.backends.local.control.sockpath import SocketPath

RETRY_PAUSE = 0.5


class ControlError(NodeControlError):
    """The control service refused or failed a request, or could not be reached (status None)."""


class ControlClient:
    # The node operations the service carries out (the provisioner's node_operation).
    operations: tuple[str, ...] = ("power", "reload", "release")

    def __init__(
        self,
        socket: Path = SOCKET,
        credential: Path = CREDENTIAL,
        timeout: float = 300.0,
    ) -> None:
        self.socket = socket
        self.credential = credential
        self.timeout = timeout

    def power_on(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        return self._operate("power_on", nodes, request_id)

    def power_off(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        return self._operate("power_off", nodes, request_id)

    def reload(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        return self._operate("reload", nodes, request_id)

    def release(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        """Park the nodes: their machines go back to the testbed, the experiment may take
        them back with ``allocate``."""
        return self._operate("release", nodes, request_id)

    def allocate(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        return self._operate("allocate", nodes, request_id)

    def check(self) -> str:
        """The service answers this credential; what it reaches, in words."""
        count = len(self.nodes())
        return f"the testbed's control service at {self.socket}: this experiment's {count} nodes"

    def nodes(self) -> dict[str, str]:
        states: dict[str, str] = self._request("GET", "/v1/nodes")["nodes"]
        return states

    def hosts(self) -> dict[str, Any]:
        """node -> {"addresses", "keys"}: the host keys the testbed pinned for each node."""
        found: dict[str, Any] = self._request("GET", "/v1/hosts")["hosts"]
        return found

    def operation(self, request_id: str) -> dict[str, Any]:
        """The journal's record of one request."""
        return self._request("GET", f"/v1/operations/{request_id}")

    def metrics(self) -> str:
        """The service's metrics, in Prometheus's text format."""
        response = self._fetch("GET", "/metrics", None, True, True)
        if not response.is_success:
            _answer(response)  # raises, naming the status
        return response.text

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/v1/health", authenticate=False, retry=False)

    def _operate(self, action: str, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        body = {"id": request_id, "action": action, "nodes": list(nodes)}
        return self._request("POST", "/v1/operations", json=body)

    def _headers(self) -> dict[str, str]:
        try:
            secret = self.credential.read_text().strip()
        except OSError as err:
            raise ControlError(
                f"cannot read the control credential {self.credential}: {err.strerror}"
            ) from None
        return {"Authorization": f"Bearer {secret}"}

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        authenticate: bool = True,
        retry: bool = True,
    ) -> dict[str, Any]:
        return _answer(self._fetch(method, path, json, authenticate, retry))

    def _fetch(
        self,
        method: str,
        path: str,
        json: dict[str, Any] | None,
        authenticate: bool,
        retry: bool,
    ) -> httpx.Response:
        headers = self._headers() if authenticate else {}
        deadline = time.monotonic() + self.timeout
        failure = "no attempt"
        while True:
            left = deadline - time.monotonic()
            try:
                response = self._send(method, path, json, headers, max(left, 0.1))
            except (httpx.TransportError, OSError) as err:
                # refused, reset or cut mid-answer: the service is (re)starting
                failure = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
                if not retry or isinstance(err, httpx.TimeoutException) or left <= RETRY_PAUSE:
                    break
                time.sleep(RETRY_PAUSE)
                continue
            return response
        raise ControlError(f"the control service at {self.socket} did not answer ({failure})")

    def _send(
        self,
        method: str,
        path: str,
        json: dict[str, Any] | None,
        headers: dict[str, str],
        timeout: float,
    ) -> httpx.Response:
        sock = SocketPath(self.socket)
        try:
            transport = httpx.HTTPTransport(uds=sock.path)
            with httpx.Client(transport=transport, base_url="http://control", timeout=timeout) as c:
                return c.request(method, path, json=json, headers=headers)
        finally:
            sock.close()


class ControlNoCapacity(ControlError, NoCapacity):
    """The testbed had no free machine for the operation."""


def _answer(response: httpx.Response) -> dict[str, Any]:
    try:
        body: dict[str, Any] = response.json()
    except ValueError:
        body = {"detail": response.text.strip()}
    if response.is_success:
        return body
    error = ControlNoCapacity if body.get("capacity") else ControlError
    raise error(
        f"control service: {response.status_code}: {body.get('detail') or response.reason_phrase}",
        status=response.status_code,
        node=body.get("node"),
        step=body.get("step"),
        body=body,
    )
