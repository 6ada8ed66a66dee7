"""Node operations on a CloudLab experiment, through the aggregate's AM API v3.

What ProtoGENI's aggregate (which CloudLab runs) does with them, from its AM v3 server:

- ``PerformOperationalAction`` takes individual sliver URNs and the actions ``geni_start``,
  ``geni_stop``, ``geni_restart`` and ``geni_reload`` (also spelled ``pg_reload``). It checks
  every named sliver first and refuses them all, changing nothing, if one is in the wrong state:
  start needs a stopped (or new) sliver ("Sliver is not stopped (yet)"), stop and restart a
  started one ("Sliver is not started (yet)"), reload a started or stopped one. An unknown
  sliver is SEARCHFAILED, an unknown action REFUSED ("Invalid operational action"). Stop keeps
  the node's disk; reload loads the image afresh and keeps the node's name and addresses.
- ``Delete`` accepts only the slice URN: a list of sliver URNs is REFUSED ("Must pass only slice
  URN"), as its ``GetVersion`` announces (``geni_single_allocation``: a slice's slivers are
  provisioned, renewed and deleted together). One node cannot leave a running experiment that
  way, so ``release`` is refused here. (geni-lib's ``AMAPIv3.delete`` would not even report the
  refusal on Python 3: its error path calls ``dict.has_key``.)
- ``Allocate`` on a slice that has a sliver merges a *disjoint* request into it: any client_id
  of the sliver (a node, a link or an interface) in the new request is an error ("New rspec is
  not disjoint from sliver"; ``GetVersion`` says ``geni_allocate: geni_disjoint``), so a new node cannot join the experiment's existing LAN. The
  whole-sliver ``Update`` that could do it is not among geni-lib's calls, so ``allocate`` is
  refused here too.

geni-lib exposes ``PerformOperationalAction`` as ``AMAPIv3.poa`` (its ``PGCompute`` wraps only
start and restart, so stop and reload go through ``poa`` directly); it sends the slice
credential, which must be the one the experiment's slice was made with.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from elastic.errors import InputError, TestbedError
from elastic.events import Reporter
from elastic.profile import rspec
from elastic.profile.topology import Node, Topology
from elastic.testbed.backends.cloudlab import host_keys
from elastic.testbed.backends.cloudlab.slices import slice_name
from elastic.testbed.experiment import Experiment


class SliceAccess(Protocol):
    """What the operations need of the backend: its aggregate, clock, events and waits."""

    site: str
    report: Reporter
    ready_timeout: float
    poll_interval: float

    @property
    def aggregate(self) -> Any: ...
    def context(self) -> Any: ...
    def now(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...
    def fetch_manifest(self, ctx: Any, sname: str) -> bytes: ...
    def wait_slivers_ready(self, exp: Experiment, nodes: list[Node], operation: str) -> None: ...
    def wait_ssh(self, manifest: Topology) -> None: ...


GENI_REFUSED = 7  # AM API: the aggregate will not do it (wrong state, unsupported form)
GENI_BUSY = 14  # AM API: the slice is locked by another operation; try again

# What each operation asks of PerformOperationalAction, and the refusal that means the node is
# already where the operation would put it (so the operation has nothing to do).
ACTIONS = {
    "power_off": ("geni_stop", "is not started"),
    "power_on": ("geni_start", "is not stopped"),
    "reload": ("geni_reload", None),
}

RELEASE_REFUSAL = (
    "CloudLab's aggregate deletes only a whole slice (AM API v3 Delete with a node's sliver URN "
    "is refused: 'Must pass only slice URN'); the node stays in the experiment"
)
ALLOCATE_REFUSAL = (
    "CloudLab's aggregate adds to a running sliver only a request disjoint from it, so a new "
    "node cannot join the experiment's existing links, and the whole-sliver Update that could "
    "is not among geni-lib's calls"
)


def manifest_nodes(exp: Experiment, nodes: Sequence[str], operation: str) -> list[Node]:
    """The manifest's nodes named ``nodes``; an unknown one is refused, naming it."""
    if not exp.manifest_path.is_file():
        raise TestbedError(
            f"CloudLab: cannot {operation} {', '.join(nodes)} of {exp.name!r}: "
            f"the experiment has no manifest at {exp.manifest_path}"
        )
    manifest = rspec.parse_manifest(exp.manifest_path.read_bytes())
    known = {n.client_id: n for n in manifest.nodes}
    if not nodes:
        raise InputError(f"{operation}: name at least one node of experiment {exp.name!r}")
    if unknown := [n for n in nodes if n not in known]:
        raise InputError(
            f"{operation}: experiment {exp.name!r} has no node {', '.join(map(repr, unknown))}; "
            f"its nodes are {', '.join(known)}"
        )
    chosen = [known[n] for n in dict.fromkeys(nodes)]
    if missing := [n.client_id for n in chosen if not n.sliver_id]:
        raise TestbedError(
            f"CloudLab: cannot {operation} {', '.join(missing)} of {exp.name!r}: the manifest "
            "gives no sliver_id for it, and the aggregate acts on a node only by its sliver URN"
        )
    return chosen


def act(backend: SliceAccess, exp: Experiment, nodes: Sequence[str], operation: str) -> None:
    """Ask the aggregate for ``operation`` on each node, one node a call, so an error names it."""

    action, already = ACTIONS[operation]
    chosen = manifest_nodes(exp, nodes, operation)
    sname = slice_name(exp.name)
    ctx = backend.context()
    for node in chosen:
        with step(backend, operation, [node.client_id], action) as said:
            refusal = _poa(
                backend, ctx, sname, action, node.sliver_id or "", node.client_id, operation
            )
            if refusal is not None:
                if already is None or already not in refusal:
                    raise TestbedError(
                        f"CloudLab {backend.site}: {operation} of node {node.client_id} failed "
                        f"at {action}: the aggregate refused: {refusal}"
                    )
                said.append(f"nothing to do (the aggregate says {refusal!r})")


@contextmanager
def step(
    backend: SliceAccess, operation: str, nodes: Sequence[str], name: str
) -> Iterator[list[str]]:
    """A begin and an end event around one step, the end carrying its duration in seconds.
    Whatever the step appends to the yielded list is said in the end event."""
    where = f"CloudLab {backend.site}: {operation} {', '.join(nodes)}"
    backend.report.begin(f"{where}: {name}", operation=operation, nodes=list(nodes), step=name)
    started = backend.now()
    said: list[str] = []
    yield said
    seconds = round(backend.now() - started, 3)
    backend.report.end(
        f"{where}: {name} {'; '.join(said) or 'done'} ({seconds:.1f} s)",
        operation=operation,
        nodes=list(nodes),
        step=name,
        seconds=seconds,
    )


def _poa(
    backend: SliceAccess,
    ctx: Any,
    sname: str,
    action: str,
    sliver: str,
    node: str,
    operation: str,
) -> str | None:
    """PerformOperationalAction on one sliver; the aggregate's text when it REFUSED, else None.
    Any other error is raised, naming the node and the action."""
    from geni.aggregate.apis import AMAPIv3
    from geni.aggregate.exceptions import AMError

    deadline = backend.now() + backend.ready_timeout
    while True:
        try:
            AMAPIv3.poa(ctx, backend.aggregate.urlv3, sname, action, [sliver])
        except AMError as err:
            code = geni_code(err)
            if code == GENI_REFUSED:
                return str(err)
            # The aggregate answers BUSY while another operation (or the monitor that follows
            # a boot) holds the slice's lock: the same call goes through once it is released.
            if code == GENI_BUSY and backend.now() < deadline:
                backend.report.status(f"{node}: {action}: the aggregate is busy ({err}); again")
                backend.sleep(backend.poll_interval)
                continue
            raise TestbedError(
                f"CloudLab {backend.site}: {operation} of node {node} failed at {action}: {err}"
            ) from err
        return None


def geni_code(err: Exception) -> int | None:
    data = getattr(err, "data", None)
    code = data.get("code", {}) if isinstance(data, dict) else {}
    value = code.get("geni_code") if isinstance(code, dict) else None
    return value if isinstance(value, int) else None


def power_off(backend: SliceAccess, exp: Experiment, nodes: list[str]) -> None:
    act(backend, exp, nodes, "power_off")


def _booted(
    backend: SliceAccess, exp: Experiment, nodes: list[str], operation: str
) -> tuple[list[Node], list[str]]:
    """Ask the portal for ``operation`` on ``nodes`` and wait until their slivers are ready
    again; the nodes (from the manifest) and their names."""
    act(backend, exp, nodes, operation)
    chosen = manifest_nodes(exp, nodes, operation)
    names = [n.client_id for n in chosen]
    with step(backend, operation, names, "booting"):
        backend.wait_slivers_ready(exp, chosen, operation)
    return chosen, names


def power_on(backend: SliceAccess, exp: Experiment, nodes: list[str]) -> None:
    chosen, names = _booted(backend, exp, nodes, "power_on")
    with step(backend, "power_on", names, "ssh"):
        backend.wait_ssh(Topology(nodes=chosen, links=[]))


def reload(backend: SliceAccess, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
    """Fresh disks from the image; same names and addresses. Returns the new manifest, and
    forgets the reloaded nodes' old host keys (said in an event) so the new ones are recorded
    at the next connection."""

    chosen, names = _booted(backend, exp, nodes, "reload")
    with step(backend, "reload", names, "manifest"):
        manifest = backend.fetch_manifest(backend.context(), slice_name(exp.name))
    fresh = [n for n in rspec.parse_manifest(manifest).nodes if n.client_id in set(nodes)]
    with step(backend, "reload", names, "ssh"):
        backend.wait_ssh(Topology(nodes=fresh, links=[]))
    forget_host_keys(backend, exp, [*chosen, *fresh])
    return manifest


def forget_host_keys(backend: SliceAccess, exp: Experiment, nodes: Sequence[Node]) -> None:
    known_hosts = exp.inventory_dir / "known_hosts"
    done: set[str] = set()
    for node in nodes:
        if node.login is None:
            continue
        removed = host_keys.forget(known_hosts, node.login.hostname, node.login.port)
        if removed and node.client_id not in done:
            done.add(node.client_id)
            backend.report.warning(
                f"{node.client_id} was reloaded: its old SSH host key is removed from "
                f"{known_hosts}; the new key is recorded at the next connection"
            )


def refuse(exp: Experiment, nodes: Sequence[str], operation: str, why: str) -> TestbedError:
    return TestbedError(
        f"CloudLab: cannot {operation} {', '.join(nodes) or '(no node named)'} of experiment "
        f"{exp.name!r}: {why}. Use the portal's Modify on the experiment page, then save its "
        f"manifest over {exp.manifest_path} and run `ptc inventory {exp.name}`"
    )


def release(backend: SliceAccess, exp: Experiment, nodes: list[str]) -> bytes:
    manifest_nodes(exp, nodes, "release")  # an unknown node is named as such first
    raise refuse(exp, nodes, "release", RELEASE_REFUSAL)


def allocate(backend: SliceAccess, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
    requested = {n.client_id for n in request.nodes}
    if unknown := [n for n in nodes if n not in requested]:
        raise InputError(
            f"allocate: the request of experiment {exp.name!r} has no node "
            f"{', '.join(map(repr, unknown))}"
        )
    raise refuse(exp, nodes, "allocate", ALLOCATE_REFUSAL)
