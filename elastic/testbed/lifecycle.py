"""Experiment lifecycle: profile -> request RSpec -> nodes -> manifest -> inventory, and back down.

The only thing a backend hands back is the manifest; the inventory and everything after it are
built from that manifest alone, so the local and CloudLab paths share all downstream code.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from elastic import atomic
from elastic.errors import InputError, NotFoundError, PtcError
from elastic.events import OnEvent, Reporter
from elastic.profile import render, rspec
from elastic.profile.topology import Login
from elastic.testbed import backends, inventory, membership
from elastic.testbed import change as changes
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.base import Backend
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment, State


def backend_for(exp: Experiment, on_event: OnEvent | None = None) -> Backend:
    return backends.get(exp.testbed, exp.site, on_event)


def start_services(exp: Experiment, on_event: OnEvent | None = None) -> None:
    """Start what the testbed runs on its host for a ready experiment and is not running (after
    a host restart, say): nothing when all runs, or the testbed runs none."""
    if not exp.adopted and exp.state == State.READY:
        backend_for(exp, on_event).start_services(exp)


def up(
    profile: Path,
    params: Mapping[str, str],
    name: str,
    testbed: str = "local",
    site: str | None = None,
    on_event: OnEvent | None = None,
    image: str | None = None,
) -> Experiment:
    """``image``: the disk image kind on a testbed that offers several (``disk_images``)."""
    report = Reporter("up", on_event)
    experiments.validate_name(name)
    if experiments.exists(name):
        state = experiments.load(name).state
        raise InputError(
            f"experiment {name!r} already exists (state: {state}); "
            f"use `ptc down {name}` first or pick another --name"
        )
    if not profile.is_file():
        raise NotFoundError(f"profile {str(profile)!r} does not exist")

    backend = backends.get(testbed, site, on_event)
    offered = backend.capabilities.disk_images
    if image is not None and image not in offered:
        raise InputError(
            f"--image {image}: the {testbed} testbed offers "
            + (" or ".join(offered) if offered else "no choice (the profile's disk image decides)")
        )
    backend.preflight()  # credentials and tools, before anything exists that needs undoing
    backend.claim_name(name)
    report.status(f"render {profile} {' '.join(f'{k}={v}' for k, v in params.items())}")
    rendered = render.render_request(profile, params)
    request_xml, request = rendered.xml, rendered.topology

    # Refused here, before anything exists, when the testbed has too few free machines.
    with backend.reserved(name, [n.client_id for n in request.nodes]):
        exp = Experiment(
            name=name,
            testbed=testbed,
            profile=str(profile.resolve()),
            params=dict(params),
            site=site,
            image=image or (offered[0] if offered else None),
        )
        exp.dir.mkdir(parents=True, exist_ok=False)
        exp.save()
        atomic.write_bytes(exp.request_path, request_xml)
        _keygen(exp)
        try:
            backend.prepare_services(exp)  # before any node mounts what they serve
            manifest_xml = backend.create(exp, request)
            atomic.write_bytes(exp.manifest_path, manifest_xml)
            write_inventory(exp)
        except BaseException as failure:
            _discard(exp, backend, failure)
            raise
    exp.state = State.READY
    exp.save()
    backend.start_services(exp)
    return exp


def modify(
    name: str,
    params: Mapping[str, Any],
    on_event: OnEvent | None = None,
    *,
    warnings_fatal: bool = True,
) -> tuple[Experiment, Change]:
    """Re-render the experiment's profile with ``params`` over its own; add and remove nodes.

    The profile's parameter warnings refuse the change, or with ``warnings_fatal=False`` are
    reported as warning events. On failure the experiment keeps its manifest, inventory and
    parameters, and stays usable."""
    report = Reporter("modify", on_event)
    exp = experiments.load(name)
    if exp.adopted:
        raise InputError(
            f"experiment {name!r} was adopted from a saved manifest, so ptc cannot change its "
            f"nodes: use the portal's Modify, save the new manifest, then "
            f"`ptc adopt {name} --manifest FILE --key KEY --replace`"
        )
    exp.require_ready()
    target = replace(exp, params=render.merge_params(exp.params, params))
    profile = _profile_of(exp)
    report.status(f"render {profile} {' '.join(f'{k}={v}' for k, v in target.params.items())}")
    rendered = render.render_request(profile, target.params, warnings_fatal=warnings_fatal)
    for warning in rendered.warnings:
        report.warning(f"profile parameter warning: {warning}")
    current = rspec.parse_manifest(exp.manifest())
    request_xml = rendered.xml
    request = membership.request(rendered.topology, exp.released, exp.clones, current)
    change = changes.plan(current, request)
    report.status(f"{name}: {change.describe()}")

    backend = backend_for(exp, on_event)
    backend.preflight()
    with backend.reserved(name, [n.client_id for n in change.added]), _modifying(exp):
        manifest_xml = backend.modify(target, request, change)
    atomic.write_bytes(exp.request_path, request_xml)
    atomic.write_bytes(exp.manifest_path, manifest_xml)
    target.save()
    write_inventory(target)
    return target, change


def replace_nodes(name: str, nodes: Sequence[str], on_event: OnEvent | None = None) -> Experiment:
    """Put fresh nodes (empty disks, same names and addresses) in the place of ``nodes``.

    What a testbed's reload does to a failed machine: run `ptc deploy` afterwards to configure
    them. The other nodes are not touched."""
    return replace_nodes_of(experiments.load(name), nodes, on_event)


def replace_nodes_of(
    exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
) -> Experiment:
    """``replace_nodes`` for an experiment already loaded (a node reload goes this way)."""
    report = Reporter("replace", on_event)
    name = exp.name
    if exp.adopted:
        raise InputError(
            f"experiment {name!r} was adopted from a saved manifest: reload the nodes in the "
            f"portal, then `ptc deploy {name}`"
        )
    exp.require_ready()
    if not nodes:
        raise InputError("name the nodes to replace, e.g. `ptc replace NAME head`")
    manifest = rspec.parse_manifest(exp.manifest())
    known = [n.client_id for n in manifest.nodes]
    if unknown := [n for n in nodes if n not in known]:
        raise NotFoundError(
            f"experiment {name!r} has no node {', '.join(map(repr, unknown))}; "
            f"its nodes are {', '.join(known)}"
        )
    old_logins = [n.login for n in manifest.nodes if n.client_id in nodes and n.login]
    profile = _profile_of(exp)
    rendered = render.render_request(profile, exp.params, warnings_fatal=False).topology
    request = membership.request(rendered, exp.released, exp.clones, manifest)
    backend = backend_for(exp, on_event)
    backend.preflight()
    report.status(f"{name}: replacing {', '.join(nodes)}")
    # The replaced nodes keep their machines while they are made again; a missing one needs one.
    with backend.reserved(name, nodes), _modifying(exp, ready_after=True):
        # A fresh node has a new host key: forgotten here on purpose, and said so. A backend
        # that pins keys pins the new ones as it makes the nodes, so the old ones go first.
        pins = backend.capabilities.pins_host_keys
        if pins:
            _forget_host_keys(exp, old_logins)
        manifest_xml = backend.replace_nodes(exp, request, sorted(set(nodes)))
        atomic.write_bytes(exp.manifest_path, manifest_xml)
    fresh = [n.login for n in rspec.parse_manifest(manifest_xml).nodes if n.client_id in nodes]
    if not pins:
        _forget_host_keys(exp, [lg for lg in [*old_logins, *fresh] if lg is not None])
    report.status(
        f"{name}: the host keys of {', '.join(sorted(set(nodes)))} are replaced "
        + ("(pinned from the new nodes)" if pins else "(recorded at the next connection)")
    )
    _forget_facts(exp, nodes)
    write_inventory(exp)
    return exp


def release_nodes_of(
    exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None, *, park: bool = False
) -> Experiment:
    """Take ``nodes`` out of the experiment and give their machines back to the testbed.

    The experiment records them as released (a copied node is simply forgotten), so a later
    `ptc modify` or `ptc replace` does not bring them back. ``park``: an elastic partition
    gives the machines back while the nodes are idle; they stay its nodes (``parked``), which
    it allocates again for a job, and so does a deploy."""
    report = Reporter("release", on_event)
    exp.require_ready()
    manifest = rspec.parse_manifest(exp.manifest())
    known = [n.client_id for n in manifest.nodes]
    if unknown := [n for n in nodes if n not in known]:
        released = [n for n in unknown if n in exp.released]
        raise NotFoundError(
            f"release: experiment {exp.name!r} has no node {', '.join(map(repr, unknown))}"
            + (f" ({', '.join(released)} already released)" if released else "")
            + f"; its nodes are {', '.join(known)}"
        )
    chosen = list(dict.fromkeys(nodes))
    if park and (copies := [n for n in chosen if n in exp.clones]):
        raise InputError(
            f"release: {', '.join(map(repr, copies))} of {exp.name!r} is a copy of another "
            "node, which a release forgets: only a node of the profile can be parked"
        )
    if not set(known) - set(chosen):
        raise InputError(
            f"release: {', '.join(chosen)} {'is' if len(chosen) == 1 else 'are'} the last "
            f"node{'s' * (len(chosen) != 1)} of experiment {exp.name!r}; an experiment keeps at "
            f"least one (`ptc down {exp.name}` gives them all back)"
        )
    old_logins = [n.login for n in manifest.nodes if n.client_id in chosen and n.login]
    backend = backend_for(exp, on_event)
    backend.preflight()
    report.status(f"{exp.name}: releasing {', '.join(chosen)}")
    with _modifying(exp, ready_after=True):
        manifest_xml = backend.release(exp, chosen)
        atomic.write_bytes(exp.manifest_path, manifest_xml)
    _forget_host_keys(exp, old_logins)
    # A profile node is remembered as released; a copy has nothing left to remember.
    profile_nodes = [n for n in chosen if n not in exp.clones and n not in exp.released]
    exp.clones = {c: like for c, like in exp.clones.items() if c not in chosen}
    exp.released = [*exp.released, *profile_nodes]
    if park:
        exp.parked = [*exp.parked, *(n for n in chosen if n not in exp.parked)]
    exp.save()
    write_inventory(exp)
    return exp


def unpark(exp: Experiment, nodes: Sequence[str]) -> Experiment:
    """The parked ``nodes`` stay released but are no longer the partition's to bring back
    (lent to another experiment, their machines are that one's)."""
    if not_parked := [n for n in nodes if n not in exp.parked]:
        raise InputError(f"experiment {exp.name!r} has not parked {', '.join(not_parked)}")
    exp.parked = [n for n in exp.parked if n not in nodes]
    exp.save()
    return exp


def allocate_nodes_of(
    exp: Experiment,
    nodes: Sequence[str],
    like: str | None = None,
    on_event: OnEvent | None = None,
) -> Experiment:
    """Bring ``nodes`` into the experiment from the testbed's free pool, with fresh disks.

    Without ``like`` each is a node of the profile's request that the experiment does not
    hold (one released earlier comes back with its name and addresses); with ``like`` each is
    a new node, a copy of the experiment's node ``like``, recorded so that a later `ptc modify`
    or `ptc replace` keeps it."""
    report = Reporter("allocate", on_event)
    exp.require_ready()
    if not nodes:
        raise InputError(f"allocate: name the nodes to bring into {exp.name!r}")
    chosen = list(dict.fromkeys(nodes))
    manifest = rspec.parse_manifest(exp.manifest())
    present = [n.client_id for n in manifest.nodes]
    if held := [n for n in chosen if n in present]:
        raise InputError(
            f"allocate: experiment {exp.name!r} already holds node "
            f"{', '.join(map(repr, held))}; nothing was allocated"
        )
    rendered = render.render_request(_profile_of(exp), exp.params, warnings_fatal=False).topology
    in_profile = [n.client_id for n in rendered.nodes]
    source = manifest
    if like is None:
        if unknown := [n for n in chosen if n not in in_profile]:
            raise NotFoundError(
                f"allocate: the request of experiment {exp.name!r} has no node "
                f"{', '.join(map(repr, unknown))} (its nodes are {', '.join(in_profile)}); "
                f"`--like NODE` allocates a new node as a copy of NODE"
            )
        target = replace(
            exp,
            released=[r for r in exp.released if r not in chosen],
            parked=[p for p in exp.parked if p not in chosen],
        )
    else:
        if like not in present:
            raise NotFoundError(
                f"allocate: --like {like!r}: experiment {exp.name!r} has no node {like!r}; "
                f"its nodes are {', '.join(present)}"
            )
        if clash := [n for n in chosen if n in in_profile]:
            raise InputError(
                f"allocate: {', '.join(map(repr, clash))} is a node of the profile of "
                f"{exp.name!r}: allocate it without --like"
            )
        source = membership.with_copies(manifest, like, chosen, used=rendered)
        target = replace(exp, clones={**exp.clones, **dict.fromkeys(chosen, like)})
    request = membership.request(rendered, target.released, target.clones, source)
    rspec.validate(request)
    backend = backend_for(exp, on_event)
    backend.preflight()
    report.status(f"{exp.name}: allocating {', '.join(chosen)}")
    # Refused here, before anything is made, when the testbed has too few free machines.
    with backend.reserved(exp.name, chosen), _modifying(exp):
        manifest_xml = backend.allocate(target, request, chosen)
    atomic.write_bytes(exp.manifest_path, manifest_xml)
    target.state = State.READY
    target.save()
    _forget_facts(target, chosen)
    write_inventory(target)
    return target


@contextlib.contextmanager
def _modifying(exp: Experiment, *, ready_after: bool = False) -> Iterator[None]:
    """``exp`` is ``modifying`` on disk while the block changes its nodes: if ptc dies there,
    `ptc status` says so, and `ptc down` still works. A block that fails leaves it ready again;
    one that succeeds, only with ``ready_after`` (else the caller saves the changed record)."""
    exp.state = State.MODIFYING
    exp.save()
    try:
        yield
    except BaseException:
        exp.state = State.READY
        exp.save()
        raise
    if ready_after:
        exp.state = State.READY
        exp.save()


def _profile_of(exp: Experiment) -> Path:
    """The profile the experiment was made from, which a change renders again."""
    profile = Path(exp.profile)
    if not profile.is_file():
        raise NotFoundError(
            f"experiment {exp.name!r}: its profile {exp.profile!r} no longer exists"
        )
    return profile


def _forget_facts(exp: Experiment, nodes: Sequence[str]) -> None:
    """A fresh disk's node has other facts (host keys among them, which the roles pin on the
    head): the cached ones are the old disk's, and "smart" gathering would use them."""
    if not exp.facts_dir.is_dir():
        return
    for node in nodes:
        for cached in exp.facts_dir.glob(f"*{node}"):
            if cached.name == node or cached.name.endswith(f"_{node}"):
                cached.unlink(missing_ok=True)


def _forget_host_keys(exp: Experiment, logins: Sequence[Login]) -> None:
    # A fresh node has new host keys, possibly behind the old port; with a stale entry, ssh
    # would refuse the port forwarding that `ptc config` and `ptc elastic` ride on.
    known_hosts = exp.inventory_dir / "known_hosts"
    if not known_hosts.is_file():
        return
    for login in logins:
        host = login.hostname if login.port == 22 else f"[{login.hostname}]:{login.port}"
        subprocess.run(
            ["ssh-keygen", "-R", host, "-f", str(known_hosts)], capture_output=True, check=False
        )


def adopt(
    name: str,
    manifest_path: Path,
    key: Path,
    *,
    testbed: str = "cloudlab",
    user: str | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    replace_manifest: bool = False,
) -> Experiment:
    """Register nodes made elsewhere (a portal experiment) from their saved manifest.

    Nothing is created or contacted: the manifest is parsed (errors name the element), the
    user's own private ``key`` (the one the portal installed) is linked, not copied, and the
    inventory is built as after `ptc up`. With ``replace_manifest`` an adopted experiment takes
    a new manifest, as after the portal's Modify."""
    experiments.validate_name(name)
    if testbed not in backends.names():
        raise InputError(f"--testbed {testbed!r}: known testbeds are {', '.join(backends.names())}")
    if not manifest_path.is_file():
        raise NotFoundError(f"--manifest {str(manifest_path)!r} does not exist")
    if not key.is_file():
        raise NotFoundError(f"--key {str(key)!r} does not exist (the private key the portal has)")
    manifest_xml = manifest_path.read_bytes()
    topology = rspec.parse_manifest(manifest_xml)
    if not topology.nodes:
        raise InputError(f"--manifest {str(manifest_path)!r} describes no nodes")
    if missing := [n.client_id for n in topology.nodes if n.login is None]:
        raise InputError(
            f"--manifest {str(manifest_path)!r}: no <login> for {', '.join(missing)}; "
            "save the manifest of the running experiment, not the request"
        )
    if experiments.exists(name):
        exp = experiments.load(name)
        if not (replace_manifest and exp.adopted):
            raise InputError(
                f"experiment {name!r} already exists (testbed: {exp.testbed}); "
                + (
                    "--replace applies only to adopted experiments"
                    if replace_manifest
                    else "pass --replace to give an adopted experiment a new manifest"
                )
            )
    else:
        exp = Experiment(name=name, testbed=testbed, profile="", adopted=True)
        exp.dir.mkdir(parents=True, exist_ok=False)
    exp.key_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    exp.key_path.unlink(missing_ok=True)
    exp.key_path.symlink_to(key.resolve())
    atomic.write_bytes(exp.manifest_path, manifest_xml)
    exp.state = State.READY
    exp.save()
    write_inventory(exp, user=user, groups=groups)
    return exp


def write_inventory(
    exp: Experiment,
    *,
    user: str | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> Path:
    """The inventory from the manifest; ``user`` and ``groups`` as in ``build_inventory``."""
    manifest = rspec.parse_manifest(exp.manifest())
    return inventory.build_inventory(
        manifest,
        exp.inventory_dir,
        exp.key_path,
        exp.testbed,
        user=user,
        groups=groups,
        pinned=backends.capabilities(exp.testbed).pins_host_keys and not exp.adopted,
    )


def down(name: str, on_event: OnEvent | None = None) -> None:
    exp = experiments.load(name)
    if exp.adopted:
        Reporter("down", on_event).warning(
            f"{name} was adopted: ptc forgets it, and its nodes keep running until you "
            "terminate the experiment in the portal"
        )
        shutil.rmtree(exp.dir)
        return
    exp.state = State.DELETING
    exp.save()
    backend = backend_for(exp, on_event)
    backend.stop_services(exp)
    backend.delete(exp)
    shutil.rmtree(exp.dir)


def _discard(exp: Experiment, backend: Backend, failure: BaseException) -> None:
    """Release what a failed `up` created; keep the record only if something may be left."""
    try:
        backend.delete(exp)
    except Exception as err:
        exp.state = State.FAILED
        exp.save()
        failure.add_note(f"cleaning up also failed ({err}); retry with `ptc down {exp.name}`")
        return
    shutil.rmtree(exp.dir, ignore_errors=True)


def _keygen(exp: Experiment) -> None:
    exp.key_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            f"ptc-{exp.name}",
            "-f",
            str(exp.key_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise PtcError(f"ssh-keygen failed: {proc.stderr.strip()}")
