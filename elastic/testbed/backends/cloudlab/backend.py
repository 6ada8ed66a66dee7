"""The CloudLab backend: geni-lib's aggregate API (AM API v2) against one CloudLab site.

Credentials come from a geni-lib context (made once with geni-lib's ``build-context`` from the
CloudLab portal's credential bundle), loaded with ``geni.util.loadContext``. ``create``:
ensure the slice, ``createsliver`` with the rendered request, poll ``sliverstatus`` until ready
(or failed, or the timeout), fetch the final manifest with ``listresources``, then wait until
every node's SSH port answers. On any failure the sliver is deleted again.

Node operations (``power_off``, ``power_on``, ``reload``; ``replace_nodes`` is ``reload``) go
through the AM API v3's ``PerformOperationalAction`` on each node's sliver URN; ``release`` and
``allocate`` are refused before any call, saying why (see ``nodeops``).

The manifest is returned as CloudLab sent it, except that the context user's ``<login>`` is
moved first on every node (CloudLab lists one per project member), so downstream code that
takes the first login SSHes in as the user who owns the key.
"""

from __future__ import annotations

import datetime
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from lxml import etree

from elastic.errors import InputError, TestbedError
from elastic.events import OnEvent, Reporter
from elastic.profile import genilib_compat, rspec
from elastic.profile.namespaces import GENI_NS
from elastic.profile.topology import Node, Topology
from elastic.testbed.backends.base import Backend, Capabilities
from elastic.testbed.backends.cloudlab import nodeops
from elastic.testbed.backends.cloudlab.slices import slice_name
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment

SITES = ("utah", "wisconsin", "clemson", "apt")
_SITE_AM = {"utah": "Utah", "wisconsin": "Wisconsin", "clemson": "Clemson", "apt": "Apt"}
SLICE_LIFETIME = datetime.timedelta(hours=16)
READY_TIMEOUT_S = 30 * 60.0
SSH_TIMEOUT_S = 10 * 60.0
POLL_INTERVAL_S = 15.0
_GENI_SEARCHFAILED = 12  # AM API: "no such slice/sliver"

Probe = Callable[[str, int, float], bool]


def tcp_probe(host: str, port: int, timeout: float) -> bool:
    """Whether something accepts a TCP connection on host:port (sshd, once the node booted)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class CloudLabBackend(Backend):
    """``Backend`` for CloudLab. Everything after ``context_path`` exists for tests."""

    # CloudLab makes its nodes itself (keys recorded at first contact), keeps its own count,
    # limits and portal (the protocol's default hooks), and its aggregate deletes only whole
    # slices, so nodes do not move.
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(
        self,
        site: str | None,
        context_path: Path | None = None,
        *,
        on_event: OnEvent | None = None,
        context: Any = None,
        ready_timeout: float = READY_TIMEOUT_S,
        ssh_timeout: float = SSH_TIMEOUT_S,
        poll_interval: float = POLL_INTERVAL_S,
        probe: Probe = tcp_probe,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if site not in SITES:
            raise InputError(f"--site must be one of {', '.join(SITES)} (got {site!r})")
        self.site = site
        self.context_path = context_path
        self.report = Reporter("testbed", on_event)
        self._context = context
        self.ready_timeout = ready_timeout
        self.ssh_timeout = ssh_timeout
        self.poll_interval = poll_interval
        self._probe = probe
        self._sleep = sleep
        self._clock = clock

    # --- geni-lib plumbing ----------------------------------------------------------------

    @property
    def aggregate(self) -> Any:
        genilib_compat.install()
        import geni.aggregate.cloudlab as cloudlab

        return getattr(cloudlab, _SITE_AM[self.site])

    def context(self) -> Any:
        if self._context is None:
            genilib_compat.install()
            import geni.util

            where = str(self.context_path) if self.context_path else "geni-lib's default path"
            try:
                self._context = geni.util.loadContext(
                    path=str(self.context_path) if self.context_path else None
                )
            except (OSError, ValueError, KeyError) as err:
                raise TestbedError(
                    f"cannot load the geni-lib context from {where}: {err}. Create it once with "
                    "geni-lib's `build-context --type cloudlab --cert <cloudlab.pem> "
                    "--pubkey <key.pub> --project <project>`"
                ) from err
        return self._context

    def now(self) -> float:
        """The backend's clock (monotonic seconds), for the duration of each step."""
        return self._clock()

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)

    def _username(self, ctx: Any) -> str | None:
        users = list(getattr(ctx, "_users", []) or [])
        return getattr(users[0], "name", None) if users else getattr(ctx, "uname", None)

    def _am_error(self, what: str, err: Exception) -> TestbedError:
        return TestbedError(f"CloudLab {self.site}: {what} failed: {err}")

    # --- Backend --------------------------------------------------------------------------

    def preflight(self) -> None:
        self.context()  # loading the geni-lib context names what is missing

    def claim_name(self, name: str) -> None:
        """Nothing to check here: the aggregate itself refuses a slice name that is taken."""

    def create(self, exp: Experiment, request: Topology) -> bytes:
        from geni.aggregate.exceptions import AMError

        sname = slice_name(exp.name)
        if not exp.request_path.is_file():
            raise TestbedError(
                f"experiment {exp.name!r} has no request RSpec at {exp.request_path}"
            )
        ctx = self.context()
        self._ensure_slice(ctx, sname)
        try:
            self.aggregate.createsliver(ctx, sname, str(exp.request_path))
        except AMError as err:
            raise self._am_error(f"creating sliver {sname!r}", err) from err
        try:
            self._wait_ready(ctx, sname, len(request.nodes))
            manifest = self.fetch_manifest(ctx, sname)
            self.wait_ssh(rspec.parse_manifest(manifest))
        except BaseException:
            self._delete_quietly(ctx, sname)
            raise
        return manifest

    def delete(self, exp: Experiment) -> None:
        from geni.aggregate.exceptions import AMError

        sname = slice_name(exp.name)
        try:
            self.aggregate.deletesliver(self.context(), sname)
        except AMError as err:
            if _search_failed(err):
                return  # already gone: deleting twice is fine
            raise self._am_error(f"deleting sliver {sname!r}", err) from err

    def modify(self, exp: Experiment, request: Topology, change: Change) -> bytes:
        # The aggregate calls ptc makes through geni-lib (createsliver, sliverstatus,
        # deletesliver) cannot change a sliver in place; the portal's Modify can. Say so
        # rather than tear down nodes users have deployed on.
        raise TestbedError(
            f"experiment {exp.name!r} is on CloudLab: ptc cannot {change.describe()} there "
            "through the aggregate API; use the portal's Modify on the experiment page, then "
            f"save its manifest over {exp.manifest_path} and run `ptc inventory {exp.name}`"
        )

    def replace_nodes(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        # A fresh disk with the same name and addresses is what the aggregate's reload does.
        return self.reload(exp, request, nodes)

    # --- node operations (AM API v3 PerformOperationalAction; see nodeops) -----------------

    def power_off(self, exp: Experiment, nodes: list[str]) -> None:
        """Stop the nodes (geni_stop); their disks are kept. A stopped node is left as it is."""
        nodeops.power_off(self, exp, nodes)

    def power_on(self, exp: Experiment, nodes: list[str]) -> None:
        """Start the nodes (geni_start) and wait until the aggregate says ready and SSH answers.
        A running node is left as it is."""
        nodeops.power_on(self, exp, nodes)

    def reload(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        """Fresh disks from the image (geni_reload), same names and addresses; returns the new
        manifest. The nodes' old host keys are forgotten, saying so."""
        return nodeops.reload(self, exp, request, nodes)

    def release(self, exp: Experiment, nodes: list[str]) -> bytes:
        """Refused before any call: the aggregate deletes only whole slices."""
        return nodeops.release(self, exp, nodes)

    def allocate(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        """Refused before any call: the aggregate adds only requests disjoint from the sliver."""
        return nodeops.allocate(self, exp, request, nodes)

    def power_states(self, exp: Experiment) -> dict[str, str]:
        """The aggregate's word for each node: its sliver status does not say "stopped"
        apart from other not-ready states, so this is ``status`` as it is."""
        return self.status(exp)

    def status(self, exp: Experiment) -> dict[str, str]:
        from geni.aggregate.exceptions import AMError

        clients = _sliver_clients(exp)
        try:
            st = self.aggregate.sliverstatus(self.context(), slice_name(exp.name))
        except AMError as err:
            if _search_failed(err):
                return dict.fromkeys(clients.values(), "missing")
            raise self._am_error("sliverstatus", err) from err
        out: dict[str, str] = {}
        for res in st.get("geni_resources", []):
            client = clients.get(res.get("geni_urn", ""), res.get("geni_urn", "?"))
            out[client] = _state_word(res)
        return out

    # --- steps ----------------------------------------------------------------------------

    def _ensure_slice(self, ctx: Any, sname: str) -> None:
        try:
            slices = ctx.cf.listSlices(ctx)
            if any(str(urn).endswith(f"+slice+{sname}") for urn in slices):
                return
            expires = datetime.datetime.now(datetime.UTC) + SLICE_LIFETIME
            ctx.cf.createSlice(ctx, sname, exp=expires, desc="ptc experiment")
        except Exception as err:  # the clearinghouse raises its own error types
            raise TestbedError(f"CloudLab: cannot find or create slice {sname!r}: {err}") from err

    def _wait_ready(self, ctx: Any, sname: str, expected: int) -> None:
        from geni.aggregate.exceptions import AMError

        deadline = self._clock() + self.ready_timeout
        last = "unknown"
        self.report.begin(f"CloudLab {self.site}: {sname} requested")
        while True:
            try:
                st = self.aggregate.sliverstatus(ctx, sname)
            except AMError as err:
                raise self._am_error(f"sliverstatus of {sname!r}", err) from err
            overall = str(st.get("pg_status") or st.get("geni_status") or "unknown")
            resources = st.get("geni_resources", [])
            ready = sum(1 for r in resources if _state_word(r) == "ready")
            last = f"{overall}, {ready}/{len(resources) or expected} resources ready"
            self.report.status(f"CloudLab {self.site}: {sname} {last}")
            if overall == "ready":
                self.report.end(f"CloudLab {self.site}: {sname} ready")
                return
            if overall == "failed":
                errors = [
                    f"{r.get('geni_urn', '?')}: {r.get('geni_error') or _state_word(r)}"
                    for r in resources
                    if _state_word(r) == "failed"
                ]
                detail = "; ".join(errors) or str(st.get("geni_error") or "no detail")
                raise TestbedError(f"CloudLab {self.site}: sliver {sname!r} failed: {detail}")
            if self._clock() >= deadline:
                raise TestbedError(
                    f"CloudLab {self.site}: sliver {sname!r} not ready after "
                    f"{self.ready_timeout:.0f}s (last status: {last}); it has been deleted"
                )
            self._sleep(self.poll_interval)

    def wait_slivers_ready(self, exp: Experiment, nodes: list[Node], operation: str) -> None:
        """Poll the sliver's status until every one of ``nodes`` is ready again; a failed one or
        the timeout is an error naming the nodes and the operation."""
        from geni.aggregate.exceptions import AMError

        sname = slice_name(exp.name)
        ctx = self.context()
        wanted = {n.sliver_id: n.client_id for n in nodes if n.sliver_id}
        deadline = self._clock() + self.ready_timeout
        while True:
            try:
                st = self.aggregate.sliverstatus(ctx, sname)
            except AMError as err:
                raise self._am_error(
                    f"{operation} of {', '.join(wanted.values())}: sliverstatus", err
                ) from err
            states = {
                wanted[r.get("geni_urn", "")]: (_state_word(r), r.get("geni_error") or "")
                for r in st.get("geni_resources", [])
                if r.get("geni_urn") in wanted
            }
            if failed := {c: e for c, (w, e) in states.items() if w == "failed"}:
                detail = "; ".join(f"{c}: {e or 'failed'}" for c, e in failed.items())
                raise TestbedError(
                    f"CloudLab {self.site}: {operation} of node {', '.join(failed)} failed "
                    f"while booting: {detail}"
                )
            pending = [c for c in wanted.values() if states.get(c, ("missing", ""))[0] != "ready"]
            self.report.status(
                f"CloudLab {self.site}: {operation}: {len(wanted) - len(pending)}/{len(wanted)} "
                "nodes ready"
            )
            if not pending:
                return
            if self._clock() >= deadline:
                raise TestbedError(
                    f"CloudLab {self.site}: {operation} of node {', '.join(pending)}: not ready "
                    f"after {self.ready_timeout:.0f}s"
                )
            self._sleep(self.poll_interval)

    def fetch_manifest(self, ctx: Any, sname: str) -> bytes:
        from geni.aggregate.exceptions import AMError

        try:
            manifest = self.aggregate.listresources(ctx, sname)
        except AMError as err:
            raise self._am_error(f"fetching the manifest of {sname!r}", err) from err
        xml = manifest.text if hasattr(manifest, "text") else str(manifest)
        return _user_login_first(xml.encode("utf-8"), self._username(ctx))

    def wait_ssh(self, manifest: Topology) -> None:
        pending = {n.client_id: n.login for n in manifest.nodes if n.login is not None}
        deadline = self._clock() + self.ssh_timeout
        while pending:
            for client_id, login in list(pending.items()):
                if self._probe(login.hostname, login.port, 5.0):
                    del pending[client_id]
            if not pending:
                return
            if self._clock() >= deadline:
                where = ", ".join(f"{c} ({lg.hostname}:{lg.port})" for c, lg in pending.items())
                raise TestbedError(
                    f"CloudLab {self.site}: SSH did not answer within {self.ssh_timeout:.0f}s "
                    f"on {where}"
                )
            self._sleep(min(self.poll_interval, 5.0))

    def _delete_quietly(self, ctx: Any, sname: str) -> None:
        try:
            self.aggregate.deletesliver(ctx, sname)
        except Exception as err:  # cleaning up after a failure must not hide that failure
            self.report.warning(f"could not delete sliver {sname!r}: {err}")


def _state_word(resource: dict[str, Any]) -> str:
    state = str(resource.get("pg_status") or resource.get("geni_status") or "unknown")
    if state in ("ready", "failed"):
        return state
    return "starting"


def _search_failed(err: Exception) -> bool:
    data = getattr(err, "data", None)
    code = data.get("code", {}) if isinstance(data, dict) else {}
    return isinstance(code, dict) and code.get("geni_code") == _GENI_SEARCHFAILED


def _sliver_clients(exp: Experiment) -> dict[str, str]:
    """sliver_id -> client_id, from the manifest we kept (empty before there is one)."""
    if not exp.manifest_path.is_file():
        return {}
    t = rspec.parse_manifest(exp.manifest_path.read_bytes())
    return {n.sliver_id: n.client_id for n in t.nodes if n.sliver_id}


def _user_login_first(xml: bytes, username: str | None) -> bytes:
    if not username:
        return xml
    root = etree.fromstring(xml)
    services = root.iter(f"{{{GENI_NS}}}services")
    for svc in services:
        mine = [
            lg for lg in svc.iterchildren(f"{{{GENI_NS}}}login") if lg.get("username") == username
        ]
        for lg in reversed(mine):
            svc.remove(lg)
            svc.insert(0, lg)
    return bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))
