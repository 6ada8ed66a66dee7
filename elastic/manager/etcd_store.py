"""The elastic manager's state in etcd: the manager's ``Store`` contract on one key (the
configuration server's client below it, the manager's errors beside it).

``read`` returns the key's ``mod_revision`` and its JSON document; ``write`` is one transaction,
``if mod_revision(key) == expect [and every guard holds] then put``, so every change the
manager makes (an owner and its event, a deadline and its release) lands whole or not at all.
The revision is etcd's own, so it only grows, across members and failovers.

A *guard* fences a manager that lost its election: extra comparisons (such as "the leader key
was created by my campaign") that must hold for the write to apply. When they fail,
:class:`NotLeader` is raised and nothing is written.

A write whose answer was lost (a member died mid-request) is resolved by reading the key back:
if it holds exactly the document written, at a newer revision, the write landed; if the key is
still at ``expect``, the transaction is sent again; otherwise someone else wrote in between and
:class:`RevisionConflict` is raised, as for any lost compare-and-swap.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from elastic.configserver.client import (
    EtcdClient,
    compare_mod_revision,
    op_get,
    op_put,
    parse_range,
)
from elastic.configserver.errors import Indeterminate
from elastic.configserver.node import NODE_CLIENT_DIR, open_node
from elastic.errors import InputError, PtcError
from elastic.manager.errors import NotActive, RevisionConflict
from elastic.manager.store import encode

DEFAULT_KEY = "/ptc/manager/state"
INDETERMINATE_RETRIES = 3

Guard = Callable[[], Sequence[dict[str, Any]]]


class NotLeader(NotActive):
    """This manager's guard no longer holds (it lost its lease): it must stop acting (HTTP 503
    when a request meets it)."""


class EtcdStore:
    """The ``elastic.manager.store.Store`` protocol on one etcd key."""

    def __init__(self, client: EtcdClient, key: str = DEFAULT_KEY, guard: Guard | None = None):
        if not key.startswith("/"):
            raise InputError(f"store key {key!r}: must start with '/'")
        self.client = client
        self.key = key
        self.guard = guard

    def read(self) -> tuple[int, dict[str, Any] | None]:
        kv = self.client.get(self.key)  # linearizable
        if kv is None:
            return 0, None
        try:
            document = json.loads(kv.value)
        except ValueError as err:
            raise PtcError(f"etcd key {self.key}: not a JSON document ({err})") from err
        return kv.mod_revision, document if isinstance(document, dict) else None

    def write(self, document: dict[str, Any], *, expect: int) -> int:
        payload = encode(document)
        for _ in range(INDETERMINATE_RETRIES):
            try:
                return self._write_once(payload, expect)
            except Indeterminate:
                kv = self.client.get(self.key)
                if kv is not None and kv.mod_revision > expect and kv.value == payload:
                    return kv.mod_revision  # it landed
                current = 0 if kv is None else kv.mod_revision
                if current != expect:
                    raise RevisionConflict(
                        f"etcd key {self.key}: revision is {current}, not {expect}"
                    ) from None
                # Still at expect: the write did not land; send it again.
        raise PtcError(f"etcd key {self.key}: the write could not be confirmed")

    def _write_once(self, payload: bytes, expect: int) -> int:
        guards = list(self.guard()) if self.guard else []
        result = self.client.txn(
            [compare_mod_revision(self.key, "=", expect), *guards],
            [op_put(self.key, payload)],
            [op_get(self.key)],
        )
        if result.succeeded:
            return result.revision
        current = parse_range(result.responses[0]["response_range"]).kvs
        revision = current[0].mod_revision if current else 0
        if revision == expect and guards:
            raise NotLeader(f"etcd key {self.key}: this manager no longer holds its lease")
        raise RevisionConflict(f"etcd key {self.key}: revision is {revision}, not {expect}")


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
