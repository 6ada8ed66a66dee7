"""Running the manager as a service: its configuration file and ``python -m elastic.manager``.

Configuration (YAML)::

    listen: 10.10.1.1            # the experiment LAN address; 0.0.0.0 and :: are refused
    port: 8700                   # default: elastic.wire.MANAGER_PORT
    state: FILE                  # default: elastic.node_paths.MANAGER_STATE
    tokens: DIR                  # admin.token, partition-<name>.token (0600); default:
                                 # elastic.node_paths.ELASTIC_TOKENS_DIR
    notify_interval: 60          # seconds between NotifyDeletePending repeats
    max_pv_age: 120              # older preemption vectors are refused
    protect_after: 10            # node resumes failed in a row before a partition is protected
    protect_cooldown: 0          # seconds a protection lasts (0: until `ptc elastic unprotect`)
    repair_backoff: 300          # seconds before a node's next repair after one failed (doubling)
    repair_backoff_max: 21600    # ... up to this
    tick_interval: 1
    pool:                        # nodes added to the pool at start (kept if already there)
      - {name: node-0, cpus: 4, memory_mb: 8192, features: [x86_64]}
    partitions:                  # created at start if missing; token files made
      - {name: slurm, endpoint: "http://10.10.1.1:8701", minimum: [node-0]}  # minimum: optional
    store:                       # optional: the state in the configuration server, not `state`
      {kind: etcd, key: /ptc/manager/state, user: manager, credentials: /etc/ptc/etcd, timeout: 2}
    # With the etcd store, a manager runs on every configuration-server node and one is active,
    # elected through a lease (elastic.manager.ha):
    name: cfg-1                  # this node, as the leader key names it
    election: {key: /ptc/manager/leader, ttl: 2}
    peers:                       # every manager's URL: what clients are given (and remote.py reads)
      - https://10.10.1.201:8700
    tls:                         # required to serve: HTTPS only, a certificate of the cluster's CA;
      cert: node.crt             # ca: what the clients' endpoints (NotifyDeletePending) verify
      key: node.key              # to; the role puts all three in elastic.node_paths.ELASTIC_TLS_DIR
      ca: ca.crt

The bearer tokens travel on the experiment LAN, so the manager serves HTTPS only: without
``tls`` it refuses to start, and a plain-HTTP request to its port fails the TLS handshake. The
certificate names the ``listen`` address, which every client verifies (also through an SSH
tunnel, whose URL keeps that address).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from elastic import node_paths, wire
from elastic.errors import InputError
from elastic.events import to_logger
from elastic.manager.auth import RESERVED, Principal, Tokens
from elastic.manager.client import tls_context
from elastic.manager.core import Manager, ManagerConfig, http_notifier
from elastic.manager.ha import ElectedLeadership, identity
from elastic.manager.store import JsonFileStore, Store

log = logging.getLogger("ptc.elastic.manager")
DEFAULT_TTL = 2


@dataclass(frozen=True)
class ServiceConfig:
    listen: str
    port: int = wire.MANAGER_PORT
    state: Path = Path(node_paths.MANAGER_STATE)
    tokens: Path = Path(node_paths.ELASTIC_TOKENS_DIR)
    notify_interval: float = ManagerConfig.notify_interval
    max_pv_age: float = ManagerConfig.max_pv_age
    protect_after: int = ManagerConfig.protect_after
    protect_cooldown: float = ManagerConfig.protect_cooldown
    repair_backoff: float = ManagerConfig.repair_backoff
    repair_backoff_max: float = ManagerConfig.repair_backoff_max
    tick_interval: float = 1.0
    pool: tuple[dict[str, Any], ...] = ()
    partitions: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    store: dict[str, Any] | None = None  # elastic.manager.etcd_store.from_config
    name: str = ""
    election: dict[str, Any] | None = None
    peers: tuple[str, ...] = ()
    tls: dict[str, Path] | None = None  # cert, key, ca (optional)

    @property
    def url(self) -> str:
        host = f"[{self.listen}]" if ":" in self.listen else self.listen
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    @classmethod
    def load(cls, path: Path) -> ServiceConfig:
        raw = read_mapping(path, "the manager configuration")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - known)
        if unknown:
            raise InputError(f"{path}: unknown setting {unknown[0]!r}")
        if "listen" not in raw:
            raise InputError(f"{path}: listen: missing (the LAN address to listen on)")
        check_listen(str(raw["listen"]), f"{path}: listen")
        for key in ("pool", "partitions"):
            items = raw.get(key) or []
            if not isinstance(items, list) or not all(
                isinstance(i, dict) and "name" in i for i in items
            ):
                raise InputError(f"{path}: {key}: expected a list of mappings with a name")
            raw[key] = tuple(items)
        for part in raw["partitions"]:
            if part["name"] in RESERVED:
                raise InputError(
                    f"{path}: partitions: {part['name']!r} is reserved (the {part['name']} "
                    "token's name)"
                )
        for key in ("store", "election"):
            if not isinstance(raw.get(key) or {}, dict):
                raise InputError(f"{path}: {key}: expected a mapping")
        election = raw.get("election") or {}
        unknown = sorted(set(election) - {"key", "ttl"})
        if unknown:
            raise InputError(f"{path}: election: unknown setting {unknown[0]!r}")
        ttl = election.get("ttl", DEFAULT_TTL)
        if not isinstance(ttl, int) or isinstance(ttl, bool) or not 2 <= ttl <= 60:
            raise InputError(f"{path}: election: ttl: {ttl!r} is not a whole number of 2-60 s")
        if election and not raw.get("store"):
            raise InputError(f"{path}: election: needs store: {{kind: etcd}} (a shared state)")
        peers = raw.get("peers") or []
        if not isinstance(peers, list) or not all(isinstance(u, str) for u in peers):
            raise InputError(f"{path}: peers: expected a list of URLs")
        raw["peers"] = tuple(peers)
        for key in ("state", "tokens"):
            if key in raw:
                raw[key] = Path(raw[key])
        if raw.get("tls") is not None:
            raw["tls"] = parse_tls(raw["tls"], f"{path}: tls")
        after = raw.get("protect_after", ManagerConfig.protect_after)
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise InputError(f"{path}: protect_after: {after!r} is not a whole number >= 0")
        for key in ("protect_cooldown", "repair_backoff", "repair_backoff_max"):
            seconds = raw.get(key, 0)
            if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
                raise InputError(f"{path}: {key}: {seconds!r} is not seconds >= 0")
        return cls(**raw)


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """A service's YAML configuration file, which must be a mapping (empty: no settings)."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise InputError(f"{path}: cannot read {what}: {err}") from err
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a mapping")
    return raw


def parse_tls(value: Any, where: str) -> dict[str, Path]:
    """``tls: {cert, key, ca}`` of a service's configuration (``ca`` optional)."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a mapping with cert and key")
    unknown = sorted(set(value) - {"cert", "key", "ca"})
    if unknown:
        raise InputError(f"{where}: unknown setting {unknown[0]!r}")
    for key in ("cert", "key"):
        if not value.get(key):
            raise InputError(f"{where}: {key}: missing (a PEM file)")
    return {k: Path(v) for k, v in value.items() if v}


def require_tls(
    tls: dict[str, Path] | None, where: str, service: str = "the manager"
) -> dict[str, Path]:
    """The certificate and key to serve with: the elastic services never serve plain HTTP."""
    if tls is None:
        raise InputError(
            f"{where}: tls: missing: {service} serves HTTPS only (tls: {{cert: FILE, key: FILE}})"
        )
    for key, path in tls.items():
        if not path.is_file():
            raise InputError(f"{where}: tls: {key}: {path} does not exist")
    return tls


def check_listen(address: str, where: str = "listen") -> None:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise InputError(f"{where}: {address!r} is not an IP address") from None
    if ip.is_unspecified:
        raise InputError(f"{where}: {address} listens everywhere; give the LAN address")


def open_store(config: ServiceConfig) -> Store:
    """The state file, or the configuration server when ``store:`` is set (no election: for
    a lone manager, and tools that read the state)."""
    if config.store is None:
        return JsonFileStore(config.state)
    from elastic.manager.etcd_store import from_config

    return from_config(config.store)


def apply_config(manager: Manager, config: ServiceConfig) -> None:
    """The pool and the partitions the configuration names (what is there already stays)."""
    admin = Principal("admin", admin=True)
    if config.pool:
        manager.register_nodes(admin, config.pool)
    for part in config.partitions:
        minimum = part.get("minimum")
        if minimum is not None and not isinstance(minimum, list):
            raise InputError(f"partitions: {part['name']}: minimum: expected a list of node names")
        manager.ensure_partition(
            str(part["name"]),
            part.get("endpoint"),
            None if minimum is None else [str(n) for n in minimum],
        )


def build_manager(config: ServiceConfig) -> Manager:
    """A manager as the configuration says. A lone one (file store, or etcd without
    ``election``) applies its configuration now; an elected one when it wins (``start`` the
    leadership returned in ``manager.leadership``)."""
    elected: ElectedLeadership | None = None
    store: Store
    if config.store is not None and config.election is not None:
        from elastic.configserver.election import LeaseElection
        from elastic.manager.etcd_store import DEFAULT_KEY, from_config, open_client

        client = open_client(config.store, prefer=config.listen)
        key = str(config.election.get("key", DEFAULT_KEY.rsplit("/", 1)[0] + "/leader"))
        election = LeaseElection(
            client,
            identity(config.name or config.listen, config.url),
            key,
            ttl=int(config.election.get("ttl", DEFAULT_TTL)),
        )
        store = from_config(config.store, guard=election.guard, client=client)
        elected = ElectedLeadership(election)
    else:
        store = open_store(config)
    ca = (config.tls or {}).get("ca")
    manager = Manager(
        store,
        Tokens(config.tokens),
        config=ManagerConfig(
            notify_interval=config.notify_interval,
            max_pv_age=config.max_pv_age,
            protect_after=config.protect_after,
            protect_cooldown=float(config.protect_cooldown),
            repair_backoff=float(config.repair_backoff),
            repair_backoff_max=float(config.repair_backoff_max),
        ),
        on_event=to_logger(log),
        leadership=elected,
        # The clients' endpoints serve HTTPS with the cluster CA's certificates too.
        notifier=http_notifier(verify=tls_context(ca)) if ca else None,
    )
    if elected is None:
        apply_config(manager, config)
    else:
        elected.on_elected = lambda: apply_config(manager, config)
    return manager


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="ptc-elastic-manager", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=Path(node_paths.MANAGER_CONFIG))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # NotifyDeletePending's requests
    try:
        config = ServiceConfig.load(args.config)
        tls = require_tls(config.tls, str(args.config))
    except InputError as err:
        raise SystemExit(f"error: {err}") from None
    import uvicorn

    from elastic.manager.app import create_app

    # An elected manager campaigns while the app runs (until elected, requests get 503 naming
    # the active manager) and resigns as it stops: see create_app's lifespan.
    app = create_app(build_manager(config), tick_interval=config.tick_interval)
    # access_log off: request lines carry no token, but there is no need for them either.
    uvicorn.run(
        app,
        host=config.listen,
        port=config.port,
        access_log=False,
        log_level="info",
        ssl_certfile=str(tls["cert"]),
        ssl_keyfile=str(tls["key"]),
    )
