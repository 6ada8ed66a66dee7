"""The elastic manager's state in etcd: the manager's ``Store`` contract over one key and the
chunks it names (the configuration server's client below it, the manager's errors beside it).

A pool of 10,000 nodes makes a state of several MB, beyond what etcd takes in one request
(1.5 MiB by default, as the etcd role leaves it), and every revision of a key stays in etcd until
compaction, so rewriting the whole state on each change would fill etcd's space quota within its
compaction window. So the state is cut into content-defined chunks (``elastic.manager.chunks``),
each stored once under ``KEY/chunks/NAME`` (its name is its hash), and ``KEY`` itself holds the
*manifest*: the chunks' names in order. A change writes the chunks it made new and the manifest;
a node changing owner writes a few tens of KB, not the whole state.

``write`` is one transaction, ``if mod_revision(KEY) == expect [and every guard holds] then put
the manifest``, with the new chunks in the same transaction when they fit in one request
(``TXN_BYTES``, ``TXN_OPS``); a larger change (a pool's first write) puts its chunks first, in
transactions of their own, where nothing refers to them until the manifest lands. So every
change the manager makes (an owner and its event, a deadline and its release) lands whole or not
at all, and the revision is the manifest's, which only grows, across members and failovers.

Chunks no manifest names any more are deleted after the write that dropped them, each only if
nobody put it again since (``mod_revision`` below that write's), so a writer that just staged the
same chunk for its own manifest keeps it. A store's first write also sweeps chunks left by
writes that failed half-way. ``read`` fetches the manifest and every chunk in one transaction, a
consistent view, and checks each chunk against its name. A manifest-less value at ``KEY`` (the
whole state, as earlier versions stored it) is read as it is and replaced by the first write.

A *guard* fences a manager that lost its election: extra comparisons (such as "the leader key
was created by my campaign") that must hold for the write to apply. When they fail,
:class:`NotLeader` is raised and nothing is written.

A write whose answer was lost (a member died mid-request) is resolved by reading the key back:
if it holds exactly the manifest written, at a newer revision, the write landed; if the key is
still at ``expect``, the transaction is sent again; otherwise someone else wrote in between and
:class:`RevisionConflict` is raised, as for any lost compare-and-swap.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from elastic.configserver.client import (
    EtcdClient,
    KeyValue,
    compare_mod_revision,
    op_delete,
    op_get,
    op_put,
    parse_range,
)
from elastic.configserver.errors import ConfigServerError, Indeterminate
from elastic.configserver.node import NODE_CLIENT_DIR, open_node
from elastic.errors import InputError, PtcError
from elastic.manager import chunks
from elastic.manager.errors import NotActive, RevisionConflict
from elastic.manager.store import encode

DEFAULT_KEY = "/ptc/manager/state"
INDETERMINATE_RETRIES = 3
FORMAT = "ptc-chunks/1"
# One request's share of etcd's request limit (1.5 MiB) and of its operations per transaction
# (128): room for the manifest, the keys and the encoding's overhead.
TXN_BYTES = 1024 * 1024
TXN_OPS = 64

Guard = Callable[[], Sequence[dict[str, Any]]]


class NotLeader(NotActive):
    """This manager's guard no longer holds (it lost its lease): it must stop acting (HTTP 503
    when a request meets it)."""


class EtcdStore:
    """The ``elastic.manager.store.Store`` protocol on one etcd key and its chunks."""

    def __init__(self, client: EtcdClient, key: str = DEFAULT_KEY, guard: Guard | None = None):
        if not key.startswith("/") or key.endswith("/"):
            raise InputError(f"store key {key!r}: must start with '/' and not end with one")
        self.client = client
        self.key = key
        self.guard = guard
        self.chunk_prefix = f"{key}/chunks/"
        self._lock = threading.Lock()
        # The chunk names of the manifest at one revision: a revision's manifest never changes.
        self._known: tuple[int, frozenset[str]] | None = None
        self._swept = False

    def _chunk_key(self, name: str) -> str:
        return self.chunk_prefix + name

    # -- reading -------------------------------------------------------------------------------

    def read(self) -> tuple[int, dict[str, Any] | None]:
        result = self.client.txn([], [op_get(self.key), op_get(self.chunk_prefix, prefix=True)])
        head = parse_range(result.responses[0]["response_range"]).kvs
        if not head:
            return 0, None
        stored = {
            kv.key[len(self.chunk_prefix) :]: kv.value
            for kv in parse_range(result.responses[1]["response_range"]).kvs
        }
        names = self._manifest(head[0])
        if names is None:  # the whole state in the key, as earlier versions wrote it
            document = self._decode(head[0].value)
        else:
            document = self._decode(self._assemble(names, stored))
            with self._lock:
                self._known = (head[0].mod_revision, frozenset(names))
        return head[0].mod_revision, document if isinstance(document, dict) else None

    def _manifest(self, kv: KeyValue) -> list[str] | None:
        """The chunk names ``kv`` lists, or None when it holds a whole document instead."""
        try:
            value = json.loads(kv.value)
        except ValueError as err:
            raise PtcError(f"etcd key {self.key}: not a JSON document ({err})") from err
        if not (isinstance(value, dict) and value.get("format") == FORMAT):
            return None
        names = value.get("chunks")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PtcError(f"etcd key {self.key}: manifest {FORMAT}: 'chunks' is not a list")
        return names

    def _assemble(self, names: Sequence[str], stored: Mapping[str, bytes]) -> bytes:
        parts = []
        for name in names:
            chunk = stored.get(name)
            if chunk is None:
                raise PtcError(f"etcd key {self._chunk_key(name)}: missing; the state is damaged")
            if chunks.name(chunk) != name:
                raise PtcError(
                    f"etcd key {self._chunk_key(name)}: its bytes do not match its name; "
                    "the state is damaged"
                )
            parts.append(chunk)
        return b"".join(parts)

    def _decode(self, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except ValueError as err:
            raise PtcError(f"etcd key {self.key}: not a JSON document ({err})") from err

    # -- writing -------------------------------------------------------------------------------

    def write(self, document: dict[str, Any], *, expect: int) -> int:
        parts = chunks.split(encode(document))
        names = [chunks.name(part) for part in parts]
        by_name = dict(zip(names, parts, strict=True))
        manifest = encode({"format": FORMAT, "chunks": names})
        with self._lock:
            present = self._present(expect)
            new = {n: by_name[n] for n in dict.fromkeys(names) if n not in present}
            inline = self._fits(new, manifest)
            if not inline:
                self._stage(new)
            revision = self._commit(manifest, expect, new if inline else {})
            self._known = (revision, frozenset(names))
            self._collect([self._chunk_key(n) for n in present - set(names)], revision)
            if not self._swept:
                self._sweep(frozenset(names), revision)
            return revision

    def _present(self, expect: int) -> frozenset[str]:
        """The chunks the manifest at ``expect`` names; RevisionConflict when the key has moved
        on (before anything is staged)."""
        if self._known is not None and self._known[0] == expect:
            return self._known[1]
        kv = self.client.get(self.key)
        current = 0 if kv is None else kv.mod_revision
        if current != expect:
            raise RevisionConflict(f"etcd key {self.key}: revision is {current}, not {expect}")
        names = None if kv is None else self._manifest(kv)
        return frozenset(names or ())

    def _fits(self, new: Mapping[str, bytes], manifest: bytes) -> bool:
        size = len(manifest) + sum(len(c) + len(self.chunk_prefix) + 32 for c in new.values())
        return size <= TXN_BYTES and len(new) < TXN_OPS

    def _batches(self, new: Mapping[str, bytes]) -> Iterable[list[tuple[str, bytes]]]:
        batch: list[tuple[str, bytes]] = []
        size = 0
        for name, chunk in new.items():
            if batch and (size + len(chunk) > TXN_BYTES or len(batch) >= TXN_OPS):
                yield batch
                batch, size = [], 0
            batch.append((name, chunk))
            size += len(chunk)
        if batch:
            yield batch

    def _stage(self, new: Mapping[str, bytes]) -> None:
        """Put chunks no manifest names yet; a lost answer is sent again (a put of the same
        bytes is harmless)."""
        for batch in self._batches(new):
            ops = [op_put(self._chunk_key(name), chunk) for name, chunk in batch]
            for attempt in range(INDETERMINATE_RETRIES):
                try:
                    self.client.txn([], ops)
                    break
                except Indeterminate:
                    if attempt == INDETERMINATE_RETRIES - 1:
                        raise

    def _commit(self, manifest: bytes, expect: int, inline: Mapping[str, bytes]) -> int:
        for _ in range(INDETERMINATE_RETRIES):
            try:
                return self._commit_once(manifest, expect, inline)
            except Indeterminate:
                kv = self.client.get(self.key)
                if kv is not None and kv.mod_revision > expect and kv.value == manifest:
                    return kv.mod_revision  # it landed
                current = 0 if kv is None else kv.mod_revision
                if current != expect:
                    raise RevisionConflict(
                        f"etcd key {self.key}: revision is {current}, not {expect}"
                    ) from None
                # Still at expect: the write did not land; send it again.
        raise PtcError(f"etcd key {self.key}: the write could not be confirmed")

    def _commit_once(self, manifest: bytes, expect: int, inline: Mapping[str, bytes]) -> int:
        guards = list(self.guard()) if self.guard else []
        result = self.client.txn(
            [compare_mod_revision(self.key, "=", expect), *guards],
            [
                *(op_put(self._chunk_key(n), c) for n, c in inline.items()),
                op_put(self.key, manifest),
            ],
            [op_get(self.key)],
        )
        if result.succeeded:
            return result.revision
        current = parse_range(result.responses[0]["response_range"]).kvs
        revision = current[0].mod_revision if current else 0
        if revision == expect and guards:
            raise NotLeader(f"etcd key {self.key}: this manager no longer holds its lease")
        raise RevisionConflict(f"etcd key {self.key}: revision is {revision}, not {expect}")

    # -- chunks nobody names -------------------------------------------------------------------

    def _collect(self, chunk_keys: Iterable[str], before: int) -> None:
        """Delete these chunk keys, each only if its last put came before revision ``before`` (a
        writer that put it again since names it in a manifest of its own). Best effort: a
        chunk left behind is swept by a later store's first write."""
        keys = sorted(chunk_keys)
        for start in range(0, len(keys), TXN_OPS):
            batch = keys[start : start + TXN_OPS]
            try:
                done = self.client.txn(
                    [compare_mod_revision(k, "<", before) for k in batch],
                    [op_delete(k) for k in batch],
                ).succeeded
                if not done:  # one of them was put again: the others, one by one
                    for k in batch:
                        self.client.txn([compare_mod_revision(k, "<", before)], [op_delete(k)])
            except ConfigServerError:
                return

    def _sweep(self, names: frozenset[str], revision: int) -> None:
        """Delete the chunks no manifest names that were put before ``revision`` (left by a
        write that failed after staging, or by a manager that lost its lease)."""
        try:
            listed = self.client.range(self.chunk_prefix, prefix=True, keys_only=True).kvs
        except ConfigServerError:
            return
        self._swept = True
        named = {self._chunk_key(n) for n in names}
        stale = [kv.key for kv in listed if kv.key not in named and kv.mod_revision < revision]
        self._collect(stale, revision)


STORE_SETTINGS = {"kind", "key", "user", "credentials", "timeout"}


def check_settings(settings: Mapping[str, Any]) -> None:
    unknown = sorted(set(settings) - STORE_SETTINGS)
    if unknown:
        raise InputError(f"store: unknown setting {unknown[0]!r}")
    if settings.get("kind", "etcd") != "etcd":
        raise InputError(f"store: kind: {settings.get('kind')!r} is not 'etcd'")


def open_client(settings: Mapping[str, Any], prefer: str | None = None) -> EtcdClient:
    """The etcd client the manager configuration's ``store:`` mapping describes, with the member
    on ``prefer`` (this node's address) tried first: a manager reads and writes through its own
    node's member, so a dead member elsewhere costs it no timeout."""
    check_settings(settings)
    client = open_node(
        str(settings.get("user", "manager")),
        Path(settings.get("credentials", NODE_CLIENT_DIR)),
        timeout=float(settings.get("timeout", 5.0)),
    )
    if prefer:
        local = [ep for ep in client.endpoints if ep.server_name == prefer]
        client.endpoints = local + [ep for ep in client.endpoints if ep.server_name != prefer]
    return client


def from_config(
    settings: Mapping[str, Any], guard: Guard | None = None, client: EtcdClient | None = None
) -> EtcdStore:
    """An EtcdStore from the manager configuration's ``store:`` mapping::

    store: {kind: etcd, key: /ptc/manager/state, user: manager, credentials: /etc/ptc/etcd}
    """
    check_settings(settings)
    if client is None:
        client = open_client(settings)
    return EtcdStore(client, str(settings.get("key", DEFAULT_KEY)), guard)
