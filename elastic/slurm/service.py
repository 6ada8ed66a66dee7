"""The Slurm client as a service (PV loop + NotifyDeletePending endpoint) and as the programs
slurmctld runs: ``python -m elastic.slurm {serve|resume|suspend|resume-fail} [HOSTLIST]``.

Configuration (YAML, ``--config``, default ``elastic.node_paths.SLURM_CLIENT_CONFIG``; the
elastic role writes it, and the files it names, at the paths of ``elastic.node_paths``)::

    manager_url: https://10.10.1.1:8700
    manager_ca: ca.crt            # the cluster's CA
    tls: {cert: node.crt, key: node.key}  # to serve
    token_file: partition-slurm.token   # root-only
    partition: slurm              # the manager's partition
    slurm_partition: elastic      # whose jobs make the PV (omit: every partition)
    policy: LIFO                  # RANDOM, FIFO, LIFO, PAP, PAP+
    priority_rules: []            # PAP+: ["queue=high:10", "user=alice:5"]
    seed: 0                       # RANDOM
    listen: 10.10.1.1             # the endpoint the manager notifies (LAN address)
    port: 8701                    # default: elastic.wire.CLIENT_PORT
    pv_interval: 30               # T: SetResourceValues every T seconds
    step_interval: 1              # reclamation steps (idle nodes back, requeue at deadline)
    sync_interval: 5              # drain nodes other partitions hold, undrain freed ones
    repair_interval: 60           # the repair loop's rounds (0: no repair loop)
    # an ec2 site's instances against Slurm every ec2.sync_interval s (elastic/slurm/ec2_sync.py)
    repair_after: 2               # rounds a node must be seen broken before it is repaired
    lender:                       # the reference partition that holds lent machines (omit:
      partition: ref              #   the repair loop leaves lent machines' nodes alone)
      token_file: partition-ref.token   # root-only
    observer_token_file: observer.token  # root-only; it may read /metrics (omit: only token_file)
    register_timeout: 0           # resume: wait for slurmd (0: until Slurm's ResumeTimeout)
    requeue_lead: 2
    log_file: slurm-hooks.log     # the hooks' log (slurmctld drops output)
    timings_file: resume-timings.jsonl  # one JSON line per resume
    provisioner: ""               # "module:function" returning a Provisioner; "" = none
    # any other key is the provisioner's (elastic.slurm.provision.from_settings)

The elastic role installs three tiny programs for slurm.conf, e.g. ``ptc-slurm-resume``::

    #!/bin/sh
    exec sudo -n /usr/local/sbin/ptc-elastic-hook resume "$@"

(``suspend``, ``resume-fail`` alike; slurmctld runs them as SlurmUser, and the token and the SSH
key need root), ``ptc-elastic-hook`` running ``python -m elastic.slurm --config ... "$@"`` from
the virtualenv, and a systemd unit running ``python -m elastic.slurm serve``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hmac
import importlib
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from elastic import node_paths, wire
from elastic.errors import InputError, PtcError
from elastic.events import to_logger
from elastic.lifespan import lifespan_running
from elastic.manager.client import ManagerClient, read_token
from elastic.manager.service import check_listen, parse_tls, read_mapping, require_tls
from elastic.policies import (
    DEFAULT_DOWNSCALING_POLICY,
    POLICY_NAMES,
    PriorityRule,
    make_downscaling_policy,
    make_policy,
)
from elastic.slurm import hostlist
from elastic.slurm.client import (
    ClientConfig,
    HookResult,
    NoProvisioner,
    Provisioner,
    SlurmElasticClient,
)
from elastic.slurm.commands import Slurm, subprocess_runner
from elastic.slurm.ec2_sync import ORPHAN_GRACE_S, SYNC_INTERVAL_S, Ec2Sync, ec2_controls
from elastic.slurm.join import KEY_PATH, JoinTokens, KeyServer
from elastic.slurm.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from elastic.slurm.metrics import ClientMetrics
from elastic.slurm.rebalance import run_round
from elastic.slurm.repair import Lender, RepairConfig, RepairLoop
from elastic.slurm.sites import (
    SiteNodes,
    check_same_providers,
    cloud_nodes,
    features,
    load_sites,
)

log = logging.getLogger("ptc.elastic.slurm")


@dataclass(frozen=True)
class SlurmClientSettings:
    manager_url: str
    token_file: Path
    manager_ca: Path | None = None  # the cluster's CA, which the managers' certificates verify to
    partition: str = ClientConfig.partition
    slurm_partition: str | None = ClientConfig.slurm_partition
    policy: str = "LIFO"
    priority_rules: tuple[str, ...] = ()
    seed: int = 0
    listen: str = "127.0.0.1"
    port: int = wire.CLIENT_PORT
    pv_interval: float = 30.0
    step_interval: float = 1.0
    sync_interval: float = 5.0
    repair_interval: float = RepairConfig.interval
    repair_after: int = RepairConfig.after
    register_timeout: float = ClientConfig.register_timeout
    requeue_lead: float = ClientConfig.requeue_lead
    log_file: Path | None = None
    timings_file: Path | None = None
    provisioner: str = ""
    tls: dict[str, Path] | None = None  # cert, key: the endpoint serves HTTPS only
    protected_file: Path | None = Path(node_paths.PROTECTED_PARTITIONS)
    lender: tuple[str, Path] | None = None  # (partition, token file)
    observer_token_file: Path | None = None  # the manager's read-only token: may read /metrics
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> SlurmClientSettings:
        raw = read_mapping(path, "the Slurm client configuration")
        known = set(cls.__dataclass_fields__) - {"extra"}
        for key in ("manager_url", "token_file"):
            if key not in raw:
                raise InputError(f"{path}: {key}: missing")
        extra = {k: raw.pop(k) for k in list(raw) if k not in known}
        if str(raw.get("policy", cls.policy)).upper() not in POLICY_NAMES:
            raise InputError(f"{path}: policy: {raw['policy']!r}; choose from {POLICY_NAMES}")
        check_listen(str(raw.get("listen", cls.listen)), f"{path}: listen")
        after = raw.get("repair_after", cls.repair_after)
        if not isinstance(after, int) or isinstance(after, bool) or after < 1:
            raise InputError(f"{path}: repair_after: {after!r} is not a whole number >= 1")
        every = raw.get("repair_interval", cls.repair_interval)
        if not isinstance(every, int | float) or isinstance(every, bool) or every < 0:
            raise InputError(f"{path}: repair_interval: {every!r} is not seconds >= 0")
        raw["token_file"] = Path(raw["token_file"])
        if raw.get("lender") is not None:
            raw["lender"] = _lender(raw["lender"], f"{path}: lender")
        for key in (
            "log_file",
            "timings_file",
            "manager_ca",
            "protected_file",
            "observer_token_file",
        ):
            if raw.get(key):
                raw[key] = Path(raw[key])
        raw["priority_rules"] = tuple(raw.get("priority_rules") or ())
        if raw.get("tls") is not None:
            raw["tls"] = parse_tls(raw["tls"], f"{path}: tls")
        return cls(**raw, extra=extra)


def _lender(raw: Any, where: str) -> tuple[str, Path]:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: a mapping with partition and token_file")
    for key in ("partition", "token_file"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise InputError(f"{where}: {key}: missing or not a string")
    if unknown := sorted(set(raw) - {"partition", "token_file"}):
        raise InputError(f"{where}: {', '.join(unknown)}: unknown (partition, token_file)")
    return raw["partition"], Path(raw["token_file"])


def build_repair(settings: SlurmClientSettings, client: SlurmElasticClient) -> RepairLoop:
    """The repair loop of ``client``; with a lender, a client of the manager as that partition."""
    lender = None
    if settings.lender is not None:
        partition, token_file = settings.lender
        try:
            lender = Lender(partition, client.manager.with_token(read_token(token_file)))
        except InputError as err:  # the loop still mends nodes; only lent machines wait
            log.warning("lender: %s: lent machines' nodes are left to ptc elastic reconcile", err)
    return RepairLoop(
        client,
        RepairConfig(interval=settings.repair_interval, after=settings.repair_after),
        on_event=to_logger(log),
        lender=lender,
    )


def load_provisioner(spec: str, settings: SlurmClientSettings) -> Provisioner:
    """The seam for the testbed's power and playbook steps: ``module:function`` is called with
    the settings and returns a Provisioner (elastic.deploy will provide one)."""
    if not spec:
        return NoProvisioner()
    module, _, name = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise InputError(f"provisioner: {spec!r}: {err}") from err
    provisioner: Provisioner = factory(settings)
    return provisioner


def build_client(settings: SlurmClientSettings) -> SlurmElasticClient:
    rule = PriorityRule.parse(settings.priority_rules) if settings.priority_rules else None
    return SlurmElasticClient(
        Slurm(subprocess_runner()),
        ManagerClient(
            settings.manager_url, read_token(settings.token_file), ca=settings.manager_ca
        ),
        make_policy(settings.policy, seed=settings.seed, rule=rule),
        provisioner=load_provisioner(settings.provisioner, settings),
        config=ClientConfig(
            partition=settings.partition,
            slurm_partition=settings.slurm_partition,
            register_timeout=settings.register_timeout,
            requeue_lead=settings.requeue_lead,
            protected_file=settings.protected_file,
        ),
        on_event=to_logger(log),
    )


class DeletePending(BaseModel):
    reclamation: str = Field(min_length=1, max_length=64)
    partition: str = Field(max_length=64)
    nodes: list[str] = Field(max_length=10000)
    grace: float = Field(ge=0)
    deadline: float
    deadline_iso: str = ""
    reason: str = Field(default="", max_length=250)
    beneficiary: str | None = Field(default=None, max_length=64)
    manager_values: dict[str, float] = Field(default_factory=dict)


_bearer = HTTPBearer(auto_error=False)


def create_app(
    client: SlurmElasticClient,
    token: str,
    *,
    pv_interval: float = 30.0,
    step_interval: float = 1.0,
    sync_interval: float = 5.0,
    power_interval: float = 15.0,
    repair: RepairLoop | None = None,
    run_loop: bool = True,
    observer_token: str | None = None,
    keys: KeyServer | None = None,
    ec2_sync: Ec2Sync | None = None,
) -> FastAPI:
    """The client's endpoint (NotifyDeletePending, authenticated with the partition's token;
    its metrics, with that token or the manager's read-only observer token) and, while it runs, the PV loop, the reclamation steps, the pool's drains, protected mode,
    the pool's power and the repair loop. Each runs on its own: one failing (Slurm or the
    manager away) does not stop the others."""

    async def loop() -> None:
        jobs: list[tuple[str, float, Callable[[], object]]] = [
            ("pv", pv_interval, client.report_pv),
            ("sync", sync_interval, client.sync_pool),
            ("protect", sync_interval, client.sync_protection),
            ("sites", sync_interval, client.sync_sites),
            ("power", power_interval, client.settle_power),
            ("step", 0.0, client.step),
        ]
        if repair is not None and repair.config.interval > 0:
            jobs.append(("repair", repair.config.interval, repair.round))
        if ec2_sync is not None and ec2_sync.interval > 0:
            jobs.append(("ec2", ec2_sync.interval, ec2_sync.round))
        last = {name: -1e18 for name, _, _ in jobs}
        while True:
            for name, interval, job in jobs:
                now = client.clock()
                if interval and now - last[name] < interval:
                    continue
                last[name] = now
                started, failed = time.monotonic(), True
                try:
                    await asyncio.to_thread(job)
                    failed = False
                except PtcError as err:
                    log.warning("%s: %s", name, err)
                except Exception:
                    log.exception("slurm client loop: %s", name)
                metrics.observe_round(name, time.monotonic() - started, failed)
            await asyncio.sleep(step_interval)

    metrics = ClientMetrics(client)

    app = FastAPI(
        title="ptc Slurm elastic client",
        version="1",
        lifespan=lifespan_running(loop if run_loop else None),
    )

    def check(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        given = (credentials.credentials if credentials else "").encode()
        if not hmac.compare_digest(given, token.encode()):
            raise _Unauthorized()

    def check_reader(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        given = (credentials.credentials if credentials else "").encode()
        # both compared, whichever matches: the time taken says nothing of which
        ok = [hmac.compare_digest(given, t.encode()) for t in (token, observer_token) if t]
        if not any(ok):
            raise _Unauthorized()

    @app.exception_handler(PtcError)
    async def ptc_error(_: Any, err: PtcError) -> JSONResponse:
        status = 401 if isinstance(err, _Unauthorized) else 500
        return JSONResponse({"error": type(err).__name__, "message": str(err)}, status)

    @app.get("/v1/health")
    def health() -> dict[str, bool]:
        return {"ok": True}

    @app.post(wire.NOTIFY_PATH, dependencies=[Depends(check)])
    def notify(payload: DeletePending) -> dict[str, bool]:
        client.notified(payload.model_dump())
        return {"ok": True}

    @app.get(KEY_PATH, include_in_schema=False)  # FastAPI's {node} is the path's
    def join_key(
        node: str,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Response:
        """A joining cloud instance's munge key, once, against its node's join token (its user
        data holds the token, never the key). Every refusal says the same."""
        key = keys.key_for(node, credentials.credentials if credentials else "") if keys else None
        if key is None:
            log.warning("join: %s: refused (no good token for it)", node[:64])
            return JSONResponse({"error": "Forbidden", "message": "no join for this node"}, 403)
        log.info("join: %s: munge key handed out", node)
        return Response(key, media_type="application/octet-stream")

    @app.get("/metrics", dependencies=[Depends(check_reader)], include_in_schema=False)
    def metrics_text() -> Response:
        """The client's metrics in Prometheus's text format (the partition's token or the
        observer's)."""
        return Response(metrics.exposition(), media_type=METRICS_CONTENT_TYPE)

    return app


def build_ec2_sync(settings: SlurmClientSettings, client: SlurmElasticClient) -> Ec2Sync | None:
    """The reconciliation of the ec2 sites' instances on the client's timer; None without an
    ec2 site. ``ec2: {sync_interval, orphan_grace}`` (seconds; an interval of 0: none)."""
    controls = ec2_controls(client.provisioner)
    raw = settings.extra.get("ec2")
    if not controls or not isinstance(raw, dict):
        return None
    return Ec2Sync(
        client.slurm,
        controls,
        interval=raw.get("sync_interval", SYNC_INTERVAL_S),
        grace_s=raw.get("orphan_grace", ORPHAN_GRACE_S),
        busy=lambda: set(client.under_repair),
        on_event=to_logger(log),
    )


def key_server(settings: SlurmClientSettings) -> KeyServer | None:
    """The join endpoint's keys when ec2 sites take the munge key from the controller
    (``ec2: {munge_key: controller, tokens_file, key_file}``); None otherwise."""
    raw = settings.extra.get("ec2")
    if not isinstance(raw, dict) or raw.get("munge_key") != "controller":
        return None
    if not raw.get("tokens_file"):
        raise InputError("ec2.tokens_file: missing (munge_key is controller)")
    key_file = Path(str(raw.get("key_file") or "/etc/munge/munge.key"))
    return KeyServer(JoinTokens(Path(str(raw["tokens_file"]))), key_file)


def _observer_token(settings: SlurmClientSettings) -> str | None:
    """The manager's read-only token, if the settings name one and it can be read: without
    it only the partition's token reads the metrics, and the client serves all the same."""
    if settings.observer_token_file is None:
        return None
    try:
        return read_token(settings.observer_token_file)
    except InputError as err:
        log.warning("observer: %s: only the partition's token reads /metrics", err)
        return None


class _Unauthorized(PtcError):
    def __init__(self) -> None:
        super().__init__("wrong or missing token")


def _setup_logging(settings: SlurmClientSettings | None, to_file: bool) -> None:
    """The service logs to stderr (the journal). The programs slurmctld runs log to
    ``log_file`` only: slurmctld gives them no usable stdout or stderr."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if to_file and settings is not None and settings.log_file is not None:
        settings.log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers = [logging.FileHandler(settings.log_file)]
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
    )
    # one line per request to the manager would drown what the client itself reports
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _record_timings(settings: SlurmClientSettings, hostlist: str, result: HookResult) -> None:
    """One JSON line per resume (benchmarks/elastic_latency.py reads them); appended, as a log."""
    if settings.timings_file is None:
        return
    line = {
        "time": time.time(),
        "started": result.started,
        "hostlist": hostlist,
        "ready": result.ready,
        "failed": result.failed,
        "timings": result.timings,
    }
    try:
        settings.timings_file.parent.mkdir(parents=True, exist_ok=True)
        with settings.timings_file.open("a") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")
    except OSError as err:
        log.warning("timings: %s: %s", settings.timings_file, err)


@contextlib.contextmanager
def _one_round_at_a_time(log_file: Path | None) -> Iterator[None]:
    """Rounds that log to the same file (the timer's, an operator's) take turns: two at once
    would both see the same excess and act on it twice."""
    if log_file is None:
        yield
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with (log_file.parent / f".{log_file.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _rebalance(sites_file: Path | None, policy_name: str, log_file: Path | None) -> int:
    """One round; its report as one JSON line on stdout (and appended to ``log_file``)."""
    try:
        if sites_file is None:
            raise InputError("rebalance: --sites FILE is missing")
        policy = make_downscaling_policy(policy_name)
        slurm = Slurm(subprocess_runner())
        sites = load_sites(sites_file, slurm.expand, need_desired=True)
        current = Path(node_paths.SITES_FILE)
        if sites_file != current and current.is_file():
            deployed = load_sites(current, slurm.expand)
            check_same_providers(deployed, sites, f"sites file {sites_file}")
        with _one_round_at_a_time(log_file):
            report = run_round(slurm, sites, policy, time.time(), to_logger(log))
    except PtcError as err:
        print(f"rebalance: {err}", file=sys.stderr)
        return err.exit_code
    line = json.dumps(report.to_json(), sort_keys=True)
    if log_file is not None:
        with log_file.open("a", encoding="utf-8") as fh:  # one whole line per round
            fh.write(line + "\n")
    print(line)
    return 0


def _sites_view(
    command: str, sites_file: Path | None, view: Callable[[Sequence[SiteNodes]], object]
) -> int:
    """``view`` of the sites file's sites, as JSON on stdout: each node's Slurm features from
    its site (``site-features``), or the nodes of the cloud sites, whose provider makes their
    machines (``site-cloud-nodes``)."""
    try:
        if sites_file is None:
            raise InputError(f"{command}: --sites FILE is missing")
        print(json.dumps(view(load_sites(sites_file, hostlist.expand)), sort_keys=True))
    except PtcError as err:
        print(f"{command}: {err}", file=sys.stderr)
        return err.exit_code
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elastic.slurm")
    parser.add_argument("--config", type=Path, default=Path(node_paths.SLURM_CLIENT_CONFIG))
    parser.add_argument(
        "action",
        choices=[
            "serve",
            "resume",
            "suspend",
            "resume-fail",
            "rebalance",
            "check-node-control",
            "site-features",
            "site-cloud-nodes",
        ],
    )
    parser.add_argument("hostlist", nargs="?", default="")
    parser.add_argument(
        "--sites", type=Path, help="rebalance, site-features, site-cloud-nodes: the sites file"
    )
    parser.add_argument(
        "--policy", default=DEFAULT_DOWNSCALING_POLICY, help="rebalance: OI, FO or AP-X"
    )
    parser.add_argument("--log", type=Path, help="rebalance: append each round's report here")
    parser.add_argument(
        "--every", type=float, default=0.0, help="rebalance: a round every SECONDS (0: once)"
    )
    args = parser.parse_args(argv)
    if args.action == "rebalance":
        if args.every < 0:
            parser.error(f"--every: {args.every} is negative")
        while True:
            status = _rebalance(args.sites, args.policy, args.log)
            if not args.every or status == InputError.exit_code:
                return status
            time.sleep(args.every)
    if args.action == "site-features":  # at deploy: each node's site, for slurm.conf
        return _sites_view("site-features", args.sites, features)
    if args.action == "site-cloud-nodes":  # at deploy: nodes no inventory host stands for
        return _sites_view("site-cloud-nodes", args.sites, cloud_nodes)
    settings = SlurmClientSettings.load(args.config)
    if args.action == "check-node-control":  # at deploy: the answer goes to the deployer
        try:
            print(load_provisioner(settings.provisioner, settings).check())
        except PtcError as err:
            print(f"check-node-control: {err}", file=sys.stderr)
            return err.exit_code
        return 0
    _setup_logging(settings, to_file=args.action != "serve")
    try:
        if args.action == "serve":  # the endpoint carries the manager's token: HTTPS only
            tls = require_tls(settings.tls, str(args.config), "the Slurm client's endpoint")
        client = build_client(settings)
        if args.action == "serve":
            import uvicorn

            token = read_token(settings.token_file)
            app = create_app(
                client,
                token,
                observer_token=_observer_token(settings),
                keys=key_server(settings),
                ec2_sync=build_ec2_sync(settings, client),
                pv_interval=settings.pv_interval,
                step_interval=settings.step_interval,
                sync_interval=settings.sync_interval,
                repair=build_repair(settings, client),
            )
            uvicorn.run(
                app,
                host=settings.listen,
                port=settings.port,
                access_log=False,
                ssl_certfile=str(tls["cert"]),
                ssl_keyfile=str(tls["key"]),
            )
            return 0
        if not args.hostlist:
            raise InputError(f"{args.action}: HOSTLIST missing")
        if args.action == "resume":
            result = client.resume(args.hostlist)
            _record_timings(settings, args.hostlist, result)
            return 0 if not result.failed else 1
        if args.action == "suspend":
            client.suspend(args.hostlist)
        else:
            client.resume_failed(args.hostlist)
        return 0
    except PtcError as err:
        log.error("%s %s: %s", args.action, args.hostlist, err)
        return err.exit_code
