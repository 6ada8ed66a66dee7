"""Node-level operations on a running experiment: power off and on, reload, release, allocate.

Each checks the node names against the experiment's manifest (an unknown node is refused,
naming it, before anything changes), asks the experiment's backend, and reports events with
the time of every step. The testbed is the truth of a node's power state: nothing is kept
here. Operations on one experiment run one at a time (a lock file in its directory), since
each rewires the experiment's shared network namespace and records. On the local testbed, the
ones that provision (power on, reload, allocate) also wait for their turn under the testbed's
provisioning limits (the backend's ``provisioned``), in parts no larger than the limits."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable, Iterator, Sequence

from elastic.errors import InputError, NotFoundError
from elastic.events import OnEvent, Reporter
from elastic.profile import rspec
from elastic.testbed import backends, lifecycle, power_hold
from elastic.testbed import experiment as experiments
from elastic.testbed.experiment import Experiment
from elastic.testbed.loans import LoanBook


def power_off(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes stop; their disks are kept. Stopping a stopped node does nothing."""
    chosen = _checked(exp, nodes, "power off")
    with _operation(exp, "power off", "powering off", chosen, on_event):
        power_hold.refuse_if_held(exp, "power off")
        lifecycle.backend_for(exp, on_event).power_off(exp, chosen)


def power_on(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes start from their kept disks, wired as before, and answer over SSH on return.
    Starting a running node does nothing."""
    chosen = _checked(exp, nodes, "power on")

    def run(part: list[str]) -> None:
        with _operation(exp, "power on", "powering on", part, on_event):
            lifecycle.backend_for(exp, on_event).power_on(exp, part)

    _provisioned(exp, "power on", chosen, on_event, run)


def reload(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """The nodes get fresh disks from the image, same names and addresses; their new host keys
    are pinned on return."""
    chosen = _checked(exp, nodes, "reload")

    # `ptc replace` is exactly this: new disks in the same places, the manifest, host keys
    # and inventory rewritten.
    def run(part: list[str]) -> None:
        with _operation(exp, "reload", "reloading", part, on_event):
            lifecycle.replace_nodes_of(experiments.load(exp.name), part, on_event)

    _provisioned(exp, "reload", chosen, on_event, run)


def release(
    exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None, *, park: bool = False
) -> None:
    """The nodes leave the experiment and their machines go back to the testbed's free pool;
    the manifest, the remaining nodes' /etc/hosts, the inventory and known_hosts say so.
    ``park``: an elastic partition's idle nodes, which it (or a deploy) allocates back."""
    _usable(exp, "release")
    if not nodes:
        raise InputError(f"release: name the nodes of {exp.name!r}")
    chosen = list(dict.fromkeys(nodes))
    with _operation(exp, "release", "releasing", chosen, on_event):
        power_hold.refuse_if_held(exp, "release")  # a deploy or verify needs every node
        lifecycle.release_nodes_of(experiments.load(exp.name), chosen, on_event, park=park)


def unpark(exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None) -> None:
    """Parked nodes become plainly released: their machines are no longer the partition's to
    take back (another experiment takes them). Nothing on the testbed changes."""
    _usable(exp, "unpark")
    chosen = list(dict.fromkeys(nodes))
    with _operation(exp, "unpark", "unparking", chosen, on_event):
        lifecycle.unpark(experiments.load(exp.name), chosen)


def allocate(
    exp: Experiment, nodes: Sequence[str], like: str | None = None, on_event: OnEvent | None = None
) -> None:
    """Nodes from the testbed's free pool join the experiment with fresh disks: nodes of its
    profile it does not hold (a released one comes back with its name and addresses), or with
    ``like`` new nodes copied from that node of the experiment, on its LANs at free addresses.
    Their host keys are pinned; every node's /etc/hosts, the manifest and inventory name them."""
    _usable(exp, "allocate")
    if not nodes:
        raise InputError(f"allocate: name the nodes to bring into {exp.name!r}")
    chosen = list(dict.fromkeys(nodes))

    def run(part: list[str]) -> None:
        with _operation(exp, "allocate", "allocating", part, on_event):
            lifecycle.allocate_nodes_of(experiments.load(exp.name), part, like, on_event)

    _provisioned(exp, "allocate", chosen, on_event, run)


def states(exp: Experiment) -> dict[str, str]:
    """node client_id -> "running" | "stopped" | "parked" | "lent" | "missing" (or the testbed's
    own word); a released node is "missing", one an elastic partition parked "parked", one whose
    machine is lent to another experiment (a loan in the state ``lent``) "lent"."""
    if exp.adopted:
        raise InputError(f"experiment {exp.name!r} was adopted: the portal shows its nodes' state")
    found = lifecycle.backend_for(exp).power_states(exp)
    lent = {n for n, loan in LoanBook(exp.loans_path).all().items() if loan.state == "lent"}
    gone = {n: _gone_word(exp, n, lent) for n in exp.released}
    return found | {n: state for n, state in gone.items() if n not in found}


def _gone_word(exp: Experiment, node: str, lent: set[str]) -> str:
    if node in exp.parked:
        return "parked"
    return "lent" if node in lent else "missing"


def _provisioned(
    exp: Experiment,
    action: str,
    nodes: list[str],
    on_event: OnEvent | None,
    run: Callable[[list[str]], None],
) -> None:
    """``run`` on the nodes part by part, each part in its turn under the testbed's
    provisioning limits (waiting, before the experiment's lock, for a slot); a testbed whose
    limits are its own (a remote one) runs them at once."""
    backends.backend_class(exp.testbed).provisioned(exp.name, action, nodes, on_event, run)


def _checked(exp: Experiment, nodes: Sequence[str], operation: str) -> list[str]:
    """The nodes once each, in the order given; refused before anything changes if one is
    not the experiment's, or the experiment cannot take node operations."""
    _usable(exp, operation)
    if not nodes:
        raise InputError(f"{operation}: name the nodes of {exp.name!r}")
    known = [n.client_id for n in rspec.parse_manifest(exp.manifest()).nodes]
    if unknown := [n for n in nodes if n not in known]:
        raise NotFoundError(
            f"{operation}: experiment {exp.name!r} has no node "
            f"{', '.join(map(repr, dict.fromkeys(unknown)))}; its nodes are {', '.join(known)}"
        )
    return list(dict.fromkeys(nodes))


@contextlib.contextmanager
def _operation(
    exp: Experiment, operation: str, doing: str, nodes: list[str], on_event: OnEvent | None
) -> Iterator[None]:
    """One node operation: reported begin to end with its time (topic: the operation's name
    with a dash), under the experiment's node-operation lock."""
    report = Reporter(operation.replace(" ", "-"), on_event)
    started = time.monotonic()
    report.begin(f"{exp.name}: {doing} {', '.join(nodes)}", total=len(nodes))
    with _one_at_a_time(exp, operation):
        yield
    _end(report, started, nodes)


@contextlib.contextmanager
def _one_at_a_time(exp: Experiment, operation: str) -> Iterator[None]:
    """Hold the experiment's node-operation lock; then check again that it is ready (a
    reload, a modify or a `ptc down` may have run while this waited)."""
    with _settled(exp):
        if not experiments.exists(exp.name):
            raise InputError(f"{operation}: experiment {exp.name!r} no longer exists")
        _usable(experiments.load(exp.name), operation)
        yield


@contextlib.contextmanager
def _settled(exp: Experiment) -> Iterator[None]:
    """The experiment's node-operation lock: no other operation is half-way meanwhile."""
    with (exp.dir / "nodeops.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _usable(exp: Experiment, operation: str) -> None:
    if exp.adopted:
        raise InputError(
            f"{operation}: experiment {exp.name!r} was adopted from a saved manifest, so ptc "
            "cannot act on its nodes: use the portal"
        )
    exp.require_ready(f"{operation}: ")


def _end(report: Reporter, started: float, nodes: list[str]) -> None:
    seconds = time.monotonic() - started
    report.end(f"{', '.join(nodes)} in {seconds:.1f}s", nodes=nodes, seconds=seconds)


@contextlib.contextmanager
def held(exp: Experiment, what: str) -> Iterator[dict[str, str]]:
    """Hold the experiment's power for the ``with`` block (nothing is powered off or released
    under it) and yield its nodes' states (``states``) as the hold keeps them: a power off
    that checked for holds before this one was written is waited for first."""
    with power_hold.hold(exp, what):
        with _settled(exp):
            found = states(exp)
        yield found


@contextlib.contextmanager
def awake(exp: Experiment, what: str, on_event: OnEvent | None = None) -> Iterator[list[str]]:
    """The experiment's nodes up for the ``with`` block (a deploy or a verify needs to reach
    them): powered-off nodes are powered on, parked ones allocated back (with fresh disks),
    and none is powered off or released until the block ends. Yields the nodes it brought up;
    they stay up afterwards (an elastic partition powers off or parks its free pool again by
    itself). Only where a cluster powers its own nodes off (``sleeping_nodes``)."""
    if exp.adopted or not backends.capabilities(exp.testbed).sleeping_nodes:
        yield []
        return
    # A power off or release that checked for holds before this one was written may still be
    # stopping a node: ``held`` waits for the operation in flight, so the states it reads are
    # the ones the hold now protects (later operations see the hold and are refused).
    with held(exp, what) as found:
        stopped = sorted(n for n, state in found.items() if state == "stopped")
        parked = sorted(n for n, state in found.items() if state == "parked")
        if parked:
            allocate(experiments.load(exp.name), parked, on_event=on_event)
        if stopped:
            power_on(experiments.load(exp.name), stopped, on_event)
        yield [*parked, *stopped]
