"""A small etcd v3 client over etcd's JSON gateway (``/v3/...``), standard library only.

It runs where ptc runs and on the nodes themselves (their system Python), so it needs nothing
but ``http.client`` and ``ssl``. Every request is HTTPS with a client certificate of the
cluster's CA; the etcd user is proven by password, which buys a JWT token that every member
accepts (the members share the signing key). The token is renewed when etcd says it expired.

Endpoints are tried in turn. A read, or a write that surely was not applied (the connection was
refused, the member had no leader), moves on to the next member. A write whose answer was lost
raises :class:`Indeterminate`: it may have been applied, and only the caller knows whether a
retry is safe. Reads are linearizable unless ``serializable=True`` is asked for.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import ssl
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from elastic.configserver.errors import (
    ConfigServerError,
    Indeterminate,
    PermissionDenied,
    Unavailable,
)
from elastic.errors import InputError, NotFoundError

# gRPC status codes etcd's gateway returns in {"code": N}.
_UNAUTHENTICATED = 16
_PERMISSION_DENIED = 7
_INVALID_ARGUMENT = 3
# Unavailable answers after which a write was certainly not proposed.
_NOT_PROPOSED = ("no leader", "too many requests", "not capable", "unhealthy cluster")
# Other codes after which a write was certainly not applied: etcd refuses these before it
# proposes, or its apply rejects them whole (a bad argument, a missing lease, a NOSPACE alarm,
# a compacted revision). Any other code (Canceled when a member shuts down mid-request,
# DeadlineExceeded, Unknown, Internal) can come after the proposal was committed.
_NOT_APPLIED = frozenset({3, 5, 6, 7, 8, 9, 11, 12, 16})
_AUTH_EXPIRED = ("invalid auth token", "auth: revision in header is old", "user name is empty")


@dataclass(frozen=True)
class Endpoint:
    """Where to connect, and the name the member's certificate must carry."""

    url: str  # https://HOST:PORT actually dialled (a tunnel's local end, or the member)
    server_name: str  # checked against the certificate's SANs and sent as SNI
    member: str = ""  # the member's name, for messages

    @property
    def label(self) -> str:
        return self.member or self.server_name


@dataclass(frozen=True)
class Credentials:
    """A client certificate of the cluster's CA, and the etcd user it acts as."""

    ca: Path
    cert: Path
    key: Path
    user: str
    password: str = field(repr=False)

    @classmethod
    def from_dir(cls, directory: Path, user: str) -> Credentials:
        """``ca.crt``, ``USER.crt``, ``USER.key`` and ``USER.password`` in ``directory`` (the
        layout of a node's /etc/ptc/etcd; the controller's PKI directory uses the same names
        under clients/ and users/, see :func:`from_pki`)."""
        return cls._load(
            directory / "ca.crt",
            directory / f"{user}.crt",
            directory / f"{user}.key",
            directory / f"{user}.password",
            user,
        )

    @classmethod
    def from_pki(cls, pki: Path, user: str) -> Credentials:
        """The controller's PKI directory, as the etcd role writes it."""
        return cls._load(
            pki / "ca.crt",
            pki / "clients" / f"{user}.crt",
            pki / "clients" / f"{user}.key",
            pki / "users" / f"{user}.password",
            user,
        )

    @classmethod
    def _load(cls, ca: Path, cert: Path, key: Path, password: Path, user: str) -> Credentials:
        for what, path in (
            ("CA certificate", ca),
            (f"client certificate of {user!r}", cert),
            (f"client key of {user!r}", key),
            (f"password of {user!r}", password),
        ):
            if not path.is_file():
                raise NotFoundError(f"{what}: {path} does not exist")
        return cls(ca, cert, key, user, password.read_text().strip())

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        try:
            ctx.load_cert_chain(str(self.cert), str(self.key))
        except (ssl.SSLError, OSError) as err:
            raise InputError(f"client certificate {self.cert}: unusable ({err})") from err
        return ctx


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0

    @property
    def text(self) -> str:
        return self.value.decode()


@dataclass(frozen=True)
class RangeResult:
    revision: int  # the store's revision the read saw
    kvs: list[KeyValue]
    count: int
    more: bool


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    responses: list[dict[str, Any]]


@dataclass(frozen=True)
class SnapshotStream:
    size: int
    sha256: str  # of the bytes written
    member: str


@dataclass(frozen=True)
class Member:
    id: int
    name: str
    peer_urls: list[str]
    client_urls: list[str]


@dataclass(frozen=True)
class MemberStatus:
    endpoint: str
    member_id: int
    leader: int
    revision: int
    raft_term: int
    raft_index: int
    db_size: int
    version: str
    errors: list[str]


# -- request builders for txn ------------------------------------------------------------------


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode()


def prefix_end(prefix: str) -> str:
    """The range_end that makes [prefix, end) cover every key starting with ``prefix``."""
    raw = bytearray(prefix.encode())
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return bytes(raw).decode(errors="surrogateescape")
        raw.pop()
    return "\0"


_RESULTS = {"=": "EQUAL", "!=": "NOT_EQUAL", ">": "GREATER", "<": "LESS"}


def compare_mod_revision(key: str, op: str, revision: int) -> dict[str, Any]:
    return {"key": b64(key), "target": "MOD", "result": _RESULTS[op], "mod_revision": revision}


def compare_create_revision(key: str, op: str, revision: int) -> dict[str, Any]:
    return {
        "key": b64(key),
        "target": "CREATE",
        "result": _RESULTS[op],
        "create_revision": revision,
    }


def compare_value(key: str, op: str, value: bytes | str) -> dict[str, Any]:
    return {"key": b64(key), "target": "VALUE", "result": _RESULTS[op], "value": b64(value)}


def compare_lease(key: str, op: str, lease: int) -> dict[str, Any]:
    return {"key": b64(key), "target": "LEASE", "result": _RESULTS[op], "lease": lease}


def op_put(key: str, value: bytes | str, lease: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = lease
    return {"request_put": body}


def op_get(key: str, prefix: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"key": b64(key)}
    if prefix:
        body["range_end"] = b64(prefix_end(key))
    return {"request_range": body}


def op_delete(key: str, prefix: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"key": b64(key)}
    if prefix:
        body["range_end"] = b64(prefix_end(key))
    return {"request_delete_range": body}


def parse_kv(raw: dict[str, Any]) -> KeyValue:
    return KeyValue(
        key=base64.b64decode(raw.get("key", "")).decode(errors="surrogateescape"),
        value=base64.b64decode(raw.get("value", "")),
        create_revision=int(raw.get("create_revision", 0)),
        mod_revision=int(raw.get("mod_revision", 0)),
        version=int(raw.get("version", 0)),
        lease=int(raw.get("lease", 0)),
    )


def parse_range(raw: dict[str, Any]) -> RangeResult:
    return RangeResult(
        revision=int(raw.get("header", {}).get("revision", 0)),
        kvs=[parse_kv(kv) for kv in raw.get("kvs", [])],
        count=int(raw.get("count", 0)),
        more=bool(raw.get("more", False)),
    )


# -- transport ---------------------------------------------------------------------------------


class _Connection(http.client.HTTPSConnection):
    """HTTPS to ``host:port`` that checks the certificate against ``server_name`` (a tunnel's
    local end is 127.0.0.1, but the member's certificate names the member)."""

    def __init__(
        self, host: str, port: int, server_name: str, context: ssl.SSLContext, timeout: float
    ) -> None:
        super().__init__(host, port, context=context, timeout=timeout)
        self._server_name = server_name
        self._tls = context

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self._server_name)


class _NotSent(Exception):
    """The request never reached the member (connection or TLS failure)."""


class _Lost(Exception):
    """The request was sent but no answer came back."""


class EtcdClient:
    """One etcd cluster, through any of its members. Thread-safe: each thread has its own
    connections; the token is shared."""

    def __init__(
        self, endpoints: Sequence[Endpoint], credentials: Credentials, timeout: float = 5.0
    ) -> None:
        if not endpoints:
            raise InputError("endpoints: at least one member is needed")
        self.endpoints = list(endpoints)
        self.credentials = credentials
        self.timeout = timeout
        self._context = credentials.ssl_context()
        self._local = threading.local()
        self._token_lock = threading.Lock()
        self._token: str | None = None
        self._preferred = 0

    # -- plumbing ----------------------------------------------------------------------------

    def _conn(self, ep: Endpoint) -> _Connection:
        conns: dict[str, _Connection] = self._local.__dict__.setdefault("conns", {})
        conn = conns.get(ep.url)
        if conn is None:
            parts = urlsplit(ep.url)
            if parts.scheme != "https" or not parts.hostname:
                raise InputError(f"endpoint {ep.url!r}: must be https://HOST:PORT")
            conn = _Connection(
                parts.hostname, parts.port or 2379, ep.server_name, self._context, self.timeout
            )
            conns[ep.url] = conn
        return conn

    def _drop(self, ep: Endpoint) -> None:
        conns: dict[str, _Connection] = self._local.__dict__.setdefault("conns", {})
        conn = conns.pop(ep.url, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._local.__dict__.get("conns", {}).values():
            conn.close()
        self._local.__dict__["conns"] = {}

    def __enter__(self) -> EtcdClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self, ep: Endpoint, path: str, body: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any]]:
        """One POST; (HTTP status, JSON body). Raises _NotSent or _Lost."""
        conn = self._conn(ep)
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = token
        payload = json.dumps(body).encode()
        try:
            if conn.sock is None:
                conn.connect()
        except (TimeoutError, OSError, ssl.SSLError) as err:
            self._drop(ep)
            raise _NotSent(f"{ep.label}: cannot connect ({err})") from err
        try:
            conn.request("POST", f"/v3/{path}", body=payload, headers=headers)
        except (OSError, http.client.HTTPException) as err:
            # A kept-alive connection the member closed: nothing of this request got through.
            self._drop(ep)
            if isinstance(err, (BrokenPipeError, ConnectionResetError)):
                raise _NotSent(f"{ep.label}: connection closed ({err})") from err
            raise _Lost(f"{ep.label}: {err}") from err
        try:
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as err:
            self._drop(ep)
            if isinstance(err, http.client.RemoteDisconnected):
                # The member closed an idle kept-alive connection as the request arrived.
                raise _Lost(f"{ep.label}: connection closed without an answer") from err
            raise _Lost(f"{ep.label}: no answer ({err})") from err
        try:
            parsed = json.loads(data or b"{}")
        except ValueError:
            parsed = {"error": data.decode(errors="replace")[:300]}
        if not isinstance(parsed, dict):
            parsed = {"result": parsed}
        return resp.status, parsed

    def _authenticate(self, ep: Endpoint) -> str:
        status, got = self._send(
            ep,
            "auth/authenticate",
            {"name": self.credentials.user, "password": self.credentials.password},
            None,
        )
        if status != 200 or "token" not in got:
            message = str(got.get("message") or got.get("error") or got)
            if "not enabled" in message:
                return ""  # authentication off: requests go without a token
            raise PermissionDenied(
                f"etcd user {self.credentials.user!r} could not log in at {ep.label}: {message}",
                code=got.get("code"),
                endpoint=ep.label,
            )
        return str(got["token"])

    def _token_for(self, ep: Endpoint, renew: bool = False) -> str:
        with self._token_lock:
            if self._token is None or renew:
                self._token = self._authenticate(ep)
            return self._token

    def call(
        self,
        path: str,
        body: dict[str, Any],
        *,
        write: bool = False,
        endpoint: Endpoint | None = None,
    ) -> dict[str, Any]:
        """POST /v3/PATH to the members in turn (only ``endpoint`` when given)."""
        order = (
            [endpoint]
            if endpoint
            else self.endpoints[self._preferred :] + self.endpoints[: self._preferred]
        )
        failures: list[str] = []
        for ep in order:
            try:
                got = self._call_one(ep, path, body, write=write)
            except _NotSent as err:
                failures.append(str(err))
                continue
            except _Lost as err:
                if write:
                    raise Indeterminate(
                        f"{path} on {ep.label}: the answer was lost; the write may or may not "
                        f"have been applied ({err})",
                        endpoint=ep.label,
                    ) from err
                failures.append(str(err))
                continue
            except _Retry as err:
                failures.append(str(err))
                continue
            if endpoint is None:
                self._preferred = self.endpoints.index(ep)
            return got
        raise Unavailable(
            f"{path}: no member of the configuration server could serve it: " + "; ".join(failures),
        )

    def _call_one(
        self, ep: Endpoint, path: str, body: dict[str, Any], *, write: bool
    ) -> dict[str, Any]:
        token = self._token_for(ep)
        status, got = self._send(ep, path, body, token)
        if (status != 200 and _message(got).lower().startswith(_AUTH_EXPIRED)) or (
            status != 200 and got.get("code") == _UNAUTHENTICATED
        ):
            token = self._token_for(ep, renew=True)
            status, got = self._send(ep, path, body, token)
        if status == 200:
            return got
        message = _message(got)
        code = got.get("code")
        if code == _PERMISSION_DENIED or "permission denied" in message:
            raise PermissionDenied(
                f"{path}: etcd user {self.credentials.user!r} is not allowed ({message})",
                code=code,
                endpoint=ep.label,
            )
        if code == 14 or status in (502, 503, 504):
            if not write or any(m in message for m in _NOT_PROPOSED):
                raise _Retry(f"{ep.label}: {message}")
            raise Indeterminate(
                f"{path} on {ep.label}: {message}; the write may or may not have been applied",
                code=code,
                endpoint=ep.label,
            )
        if write and code not in _NOT_APPLIED:
            raise Indeterminate(
                f"{path} on {ep.label}: {message} (code {code}); the write may or may not have "
                "been applied",
                code=code,
                endpoint=ep.label,
            )
        raise ConfigServerError(f"{path} at {ep.label}: {message}", code=code, endpoint=ep.label)

    # -- key-value ---------------------------------------------------------------------------

    def range(
        self,
        key: str,
        *,
        prefix: bool = False,
        range_end: str | None = None,
        keys_only: bool = False,
        limit: int = 0,
        serializable: bool = False,
        revision: int = 0,
    ) -> RangeResult:
        body: dict[str, Any] = {"key": b64(key)}
        if prefix:
            body["range_end"] = b64(prefix_end(key))
        elif range_end is not None:
            body["range_end"] = b64(range_end)
        if keys_only:
            body["keys_only"] = True
        if limit:
            body["limit"] = limit
        if serializable:
            body["serializable"] = True
        if revision:
            body["revision"] = revision
        return parse_range(self.call("kv/range", body))

    def get(self, key: str, *, serializable: bool = False) -> KeyValue | None:
        kvs = self.range(key, serializable=serializable).kvs
        return kvs[0] if kvs else None

    def put(self, key: str, value: bytes | str, *, lease: int = 0) -> int:
        """Store ``value``; the store's revision after the write."""
        body = op_put(key, value, lease)["request_put"]
        got = self.call("kv/put", body, write=True)
        return int(got.get("header", {}).get("revision", 0))

    def delete(self, key: str, *, prefix: bool = False) -> int:
        """Delete ``key`` (or every key under it); how many were deleted."""
        body = op_delete(key, prefix)["request_delete_range"]
        return int(self.call("kv/deleterange", body, write=True).get("deleted", 0))

    def txn(
        self,
        compare: Sequence[dict[str, Any]],
        success: Sequence[dict[str, Any]],
        failure: Sequence[dict[str, Any]] = (),
    ) -> TxnResult:
        """Atomically: if every comparison holds, apply ``success``, else ``failure``."""
        writes = any("request_range" not in op for op in [*success, *failure])
        got = self.call(
            "kv/txn",
            {"compare": list(compare), "success": list(success), "failure": list(failure)},
            write=writes,
        )
        return TxnResult(
            succeeded=bool(got.get("succeeded", False)),
            revision=int(got.get("header", {}).get("revision", 0)),
            responses=list(got.get("responses", [])),
        )

    # -- leases ------------------------------------------------------------------------------

    def lease_grant(self, ttl: int) -> int:
        got = self.call("lease/grant", {"TTL": ttl}, write=True)
        if got.get("error"):
            raise ConfigServerError(f"lease/grant: {got['error']}")
        return int(got["ID"])

    def lease_keepalive(self, lease: int) -> int:
        """Renew ``lease`` once; its remaining TTL (0 or less: it has expired)."""
        got = self.call("lease/keepalive", {"ID": lease}, write=True)
        result = got.get("result", got)
        return int(result.get("TTL", 0))

    def lease_revoke(self, lease: int) -> None:
        self.call("kv/lease/revoke", {"ID": lease}, write=True)

    # -- cluster -----------------------------------------------------------------------------

    def members(self) -> list[Member]:
        got = self.call("cluster/member/list", {})
        return [
            Member(
                id=int(m.get("ID", 0)),
                name=str(m.get("name", "")),
                peer_urls=list(m.get("peerURLs", [])),
                client_urls=list(m.get("clientURLs", [])),
            )
            for m in got.get("members", [])
        ]

    def status(self, endpoint: Endpoint) -> MemberStatus:
        got = self.call("maintenance/status", {}, endpoint=endpoint)
        header = got.get("header", {})
        return MemberStatus(
            endpoint=endpoint.label,
            member_id=int(header.get("member_id", 0)),
            leader=int(got.get("leader", 0)),
            revision=int(header.get("revision", 0)),
            raft_term=int(header.get("raft_term", 0)),
            raft_index=int(got.get("raftIndex", 0)),
            db_size=int(got.get("dbSize", 0)),
            version=str(got.get("version", "")),
            errors=[str(e) for e in got.get("errors", [])],
        )

    def snapshot(self, out: IO[bytes], endpoint: Endpoint | None = None) -> SnapshotStream:
        """Stream a snapshot of the whole keyspace into ``out``.

        The stream ends with etcd's own SHA-256 of the database, which a restore checks.
        """
        order = [endpoint] if endpoint else self.endpoints
        failures: list[str] = []
        for ep in order:
            try:
                return self._snapshot_from(ep, out)
            except (_NotSent, _Lost, _Retry) as err:
                failures.append(str(err))
                out.seek(0)
                out.truncate()
        raise Unavailable("snapshot: no member could send one: " + "; ".join(failures))

    def _snapshot_from(self, ep: Endpoint, out: IO[bytes]) -> SnapshotStream:
        token = self._token_for(ep)
        conn = self._conn(ep)
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = token
        try:
            if conn.sock is None:
                conn.connect()
            conn.request("POST", "/v3/maintenance/snapshot", body=b"{}", headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as err:
            self._drop(ep)
            raise _NotSent(f"{ep.label}: {err}") from err
        digest = hashlib.sha256()
        size = 0
        try:
            for message in _json_stream(resp):
                if "error" in message:
                    error = message["error"]
                    text = error.get("message", error) if isinstance(error, dict) else error
                    if "permission denied" in str(text):
                        raise PermissionDenied(f"snapshot: {text}", endpoint=ep.label)
                    raise _Retry(f"{ep.label}: {text}")
                blob = base64.b64decode(message.get("result", {}).get("blob", ""))
                out.write(blob)
                digest.update(blob)
                size += len(blob)
        except (OSError, http.client.HTTPException) as err:
            raise _Lost(f"{ep.label}: the snapshot stream broke ({err})") from err
        finally:
            self._drop(ep)
        if resp.status != 200 or size == 0:
            raise _Retry(f"{ep.label}: snapshot answered HTTP {resp.status} with {size} bytes")
        return SnapshotStream(size, digest.hexdigest(), ep.label)


class _Retry(Exception):
    """This member cannot serve the request now; another may."""


def _message(got: dict[str, Any]) -> str:
    error = got.get("error")
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(got.get("message") or error or got)


def _json_stream(resp: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    """The gateway streams one JSON object per message, separated by newlines."""
    decoder = json.JSONDecoder()
    buffer = ""
    while True:
        chunk = resp.read(65536)
        if not chunk:
            break
        buffer += chunk.decode()
        while True:
            buffer = buffer.lstrip()
            if not buffer:
                break
            try:
                obj, end = decoder.raw_decode(buffer)
            except ValueError:
                break
            buffer = buffer[end:]
            if isinstance(obj, dict):
                yield obj
    if buffer.strip():
        raise http.client.IncompleteRead(buffer.encode()[:100])
