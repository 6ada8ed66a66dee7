"""A CloudLab head powering its own experiment's nodes, through the Portal API.

The controller's ResumeProgram and SuspendProgram use this where the local testbed's nodes use
its control service: the same calls (power on, power off, the nodes' states), over the portal's
HTTPS API with a token the head holds root-only (never on a command line or in a log).

Which token: the narrowest the portal has, one whose scope is this experiment. Before the first
operation (and at deploy) the token is checked with ``GET /tokens/this``: a token that is
expired, for another experiment, or of a broader scope (``global``: every experiment, profile
and reservation of its user) is refused, naming the file and what it reaches, unless the
deployment says a broader one is wanted (``allow_broad_token``).

What the portal is asked, from its published OpenAPI description: ``GET /experiments/{id}``
(each aggregate's nodes with ``client_id``, ``state`` ``started``/``stopped`` and ``status``),
``POST /experiments/{id}/node/{client_id}/start`` and ``/stop``. An operation is asynchronous:
the node's state is polled until it is the one asked for, with a ``status`` of ``ready`` for a
start. A busy answer (409, 423 or 503: another operation holds the experiment, or the portal's
load is too high) is reported as busy (409), and the provisioner asks again. None of this has run
against CloudLab itself: the tests use a labelled fake of the portal (tests/support).

Only ``power`` is offered: a reload gives the node a fresh disk with new host keys, and the
portal publishes no keys the head could pin before it first connects; a node leaves a running
CloudLab experiment only with the whole experiment.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from elastic.errors import InputError, NodeControlError

DEFAULT_URL = "https://boss.emulab.net:43794"
# What a caller may ask of this control (the provisioner's node operations).
OPERATIONS = ("power",)
# Answers meaning "not now": the experiment is locked by another operation, or the portal's
# load is too high ("Load average too high or too many experiments waiting").
_BUSY = {409, 423, 503}
_STATE = {"started": "running", "stopped": "stopped"}


class PortalCredentialError(NodeControlError):
    """The portal token is missing, refused, expired, for another experiment or too broad."""


@dataclass(frozen=True)
class PortalSettings:
    url: str
    token_file: Path
    experiment: str  # the experiment's UUID, or "project,name"
    allow_broad_token: bool = False
    timeout: float = 600.0  # how long a start or stop may take to show
    poll_interval: float = 2.0

    @classmethod
    def from_mapping(cls, raw: dict[str, Any], where: str) -> PortalSettings:
        known = {"kind", *cls.__dataclass_fields__}
        if unknown := sorted(set(raw) - known):
            raise InputError(f"{where}: unknown setting {unknown[0]!r} (known: {sorted(known)})")
        for key in ("token_file", "experiment"):
            if not str(raw.get(key) or "").strip():
                raise InputError(f"{where}: {key}: missing")
        url = str(raw.get("url") or DEFAULT_URL).rstrip("/")
        parts = urlsplit(url)
        loopback = parts.hostname in ("127.0.0.1", "::1", "localhost")
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise InputError(
                f"{where}: url: {url!r}: the token travels with every request, so the portal "
                "is reached over https (plain http only on this host's loopback)"
            )
        try:
            timeout = float(raw.get("timeout", cls.timeout))
            poll = float(raw.get("poll_interval", cls.poll_interval))
        except (TypeError, ValueError) as err:
            raise InputError(f"{where}: timeout/poll_interval: {err}") from err
        if timeout <= 0 or poll <= 0:
            raise InputError(f"{where}: timeout and poll_interval must be positive")
        return cls(
            url=url,
            token_file=Path(str(raw["token_file"])),
            experiment=experiment_id(str(raw["experiment"]).strip(), f"{where}: experiment"),
            allow_broad_token=bool(raw.get("allow_broad_token", False)),
            timeout=timeout,
            poll_interval=poll,
        )


class PortalControl:
    """The provisioner's ``PowerControl`` over CloudLab's Portal API."""

    operations: tuple[str, ...] = OPERATIONS

    def __init__(
        self,
        settings: PortalSettings,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._clock = clock
        self._now = now
        self._checked = False
        # one connection pool for every call: an operation polls the portal every few seconds
        self._http = httpx.Client(base_url=settings.url, transport=transport, timeout=60.0)

    # -- the credential ------------------------------------------------------------------
    def _token(self) -> str:
        path = self.settings.token_file
        try:
            token = path.read_text().strip()
        except OSError as err:
            raise PortalCredentialError(
                f"CloudLab portal: cannot read the token file {path}: {err.strerror}"
            ) from err
        if not token:
            raise PortalCredentialError(f"CloudLab portal: the token file {path} is empty")
        return token

    def check(self) -> str:
        """Refuse a token the portal does not accept, expired, for another experiment or broader
        than this experiment (unless allowed); what the token reaches, in words."""
        where = f"the CloudLab portal token in {self.settings.token_file}"
        info = self._request("GET", "/tokens/this", step="token")
        expires = _time(info.get("expires_at"))
        if expires is not None and expires <= self._now():
            raise PortalCredentialError(
                f"{where} expired at {info['expires_at']}; download a new one from the portal",
                status=401,
                step="token",
            )
        scope, value = str(info.get("scope") or ""), str(info.get("scope_value") or "")
        other = PortalCredentialError(
            f"{where} is scoped to experiment {value!r}, not this one ({self.settings.experiment})",
            status=403,
            step="token",
        )
        try:
            experiment = self._request("GET", self._experiment_path(), step="experiment")
        except PortalCredentialError as err:
            # the portal refuses another experiment's token here: say why
            raise other if scope == "experiment" else err from err
        if scope == "experiment":
            if value not in (str(experiment.get("id") or ""), self.settings.experiment):
                raise other
            reach = f"experiment {self.settings.experiment} only"
        elif self.settings.allow_broad_token:
            reach = (
                f"everything its scope {scope or 'unknown'!r} covers (allowed by the deployment)"
            )
        else:
            raise PortalCredentialError(
                f"{where} has scope {scope or 'unknown'!r}: it reaches every experiment, profile "
                "and reservation of its user, not only this experiment. Give a token scoped to "
                "this experiment, or allow a broad one explicitly (allow_broad_token)",
                status=403,
                step="token",
            )
        self._checked = True
        return f"{where} reaches {reach}" + (f", until {info['expires_at']}" if expires else "")

    # -- the provisioner's PowerControl ---------------------------------------------------
    def nodes(self) -> dict[str, str]:
        """client_id -> running, stopped, or the portal's own state word."""
        found: dict[str, str] = {}
        for node in self._experiment_nodes().values():
            state = str(node.get("state") or "")
            found[str(node["client_id"])] = _STATE.get(state, state or "unknown")
        return found

    def hosts(self) -> dict[str, Any]:
        # A start keeps the node's disk, and with it the host keys the head already knows.
        return {}

    def power_on(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        return self._operate("start", "started", nodes)

    def power_off(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        return self._operate("stop", "stopped", nodes)

    def reload(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        raise self._unoffered("reload", nodes)

    def release(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        raise self._unoffered("release", nodes)

    def allocate(self, nodes: Sequence[str], request_id: str) -> dict[str, Any]:
        raise self._unoffered("allocate", nodes)

    def _unoffered(self, step: str, nodes: Sequence[str]) -> NodeControlError:
        return NodeControlError(
            f"CloudLab portal: {step} of {', '.join(nodes)} is not offered through the portal "
            "here (only power: start and stop)",
            step=step,
        )

    # -- operations ---------------------------------------------------------------------------
    def _operate(self, action: str, wanted: str, nodes: Sequence[str]) -> dict[str, Any]:
        if not self._checked:
            self.check()
        known = self._experiment_nodes()
        if unknown := [n for n in nodes if n not in known]:
            raise NodeControlError(
                f"CloudLab portal: experiment {self.settings.experiment} has no node "
                f"{', '.join(unknown)}",
                status=404,
                node=unknown[0],
                step=action,
            )
        todo = [n for n in nodes if known[n].get("state") != wanted]
        for node in todo:
            path = f"{self._experiment_path()}/node/{quote(node, safe='')}/{action}"
            self._request("POST", path, step=action, node=node)
        deadline = self._clock() + self.settings.timeout
        waiting = list(todo)
        while waiting:
            current = self._experiment_nodes()
            for node in list(waiting):
                seen = current.get(node, {})
                status = str(seen.get("status") or "")
                if status == "failed":
                    raise NodeControlError(
                        f"CloudLab portal: {action} of node {node} failed: the portal reports "
                        f"status failed (state {seen.get('state')!r})",
                        status=500,
                        node=node,
                        step=action,
                    )
                if seen.get("state") == wanted and (wanted != "started" or status == "ready"):
                    waiting.remove(node)
            if not waiting:
                break
            if self._clock() >= deadline:
                states = {n: (current.get(n, {}).get("state"), current.get(n, {}).get("status"))
                          for n in waiting}  # fmt: skip
                raise NodeControlError(
                    f"CloudLab portal: {action} of {', '.join(waiting)} not done after "
                    f"{self.settings.timeout:.0f} s (state, status: {states})",
                    status=504,
                    node=waiting[0],
                    step=action,
                )
            self._sleep(self.settings.poll_interval)
        return {"nodes": {n: _STATE[wanted] for n in nodes}}

    def _experiment_path(self) -> str:
        return f"/experiments/{quote(self.settings.experiment, safe=',')}"

    def _experiment_nodes(self) -> dict[str, dict[str, Any]]:
        body = self._request("GET", self._experiment_path(), step="status")
        found: dict[str, dict[str, Any]] = {}
        aggregates = body.get("aggregates") or {}
        for aggregate in aggregates.values() if isinstance(aggregates, dict) else []:
            for node in aggregate.get("nodes") or []:
                if isinstance(node, dict) and node.get("client_id"):
                    found[str(node["client_id"])] = node
        return found

    def _request(
        self, method: str, path: str, *, step: str, node: str | None = None
    ) -> dict[str, Any]:
        headers = {"X-Api-Token": self._token(), "Accept": "application/json"}
        where = f"CloudLab portal {self.settings.url}: {method} {path}"
        try:
            answer = self._http.request(method, path, headers=headers)
        except httpx.HTTPError as err:
            raise NodeControlError(f"{where}: {err}", node=node, step=step) from err
        try:
            body = answer.json() if answer.content else {}
        except ValueError:
            body = {"error": answer.text[:300]}
        if not isinstance(body, dict):
            body = {"value": body}
        if answer.is_success:
            return body
        said = str(body.get("error") or body.get("message") or answer.reason_phrase)
        status = answer.status_code
        if status in (401, 403):
            raise PortalCredentialError(
                f"{where}: the token in {self.settings.token_file} was refused "
                f"(HTTP {status}: {said}): wrong, expired or revoked",
                status=status,
                node=node,
                step=step,
                body=body,
            )
        if status in _BUSY:
            raise NodeControlError(
                f"{where}: busy (HTTP {status}: {said})",
                status=409,
                node=node,
                step=step,
                body=body,
            )
        raise NodeControlError(
            f"{where}: HTTP {status}: {said}", status=status, node=node, step=step, body=body
        )


def experiment_id(given: str, where: str) -> str:
    """The portal's name for an experiment: a UUID or ``project,name`` as given, or read from
    the slice URN a node's ``geni-get slice_urn`` prints
    (``urn:publicid:IDN+emulab.net:PROJECT[:SUBGROUP]+slice+NAME``)."""
    if not given.startswith("urn:publicid:IDN+"):
        return given
    parts = given.removeprefix("urn:publicid:IDN+").split("+")
    authority = parts[0].split(":")
    if len(parts) != 3 or parts[1] != "slice" or len(authority) < 2 or not parts[2]:
        raise InputError(
            f"{where}: {given!r} is not a slice URN of a project's experiment "
            "(urn:publicid:IDN+SITE:PROJECT+slice+NAME)"
        )
    return f"{authority[1]},{parts[2]}"


def _time(value: Any) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
