"""Experiment lifecycle: profile -> request RSpec -> nodes -> manifest -> inventory, and back down.

The only thing a backend hands back is the manifest; the inventory and everything after it are
built from that manifest alone, so the local and CloudLab paths share all downstream code.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from elastic import atomic
from elastic.errors import PtcError
from elastic.testbed import change as changes
from elastic.testbed import experiment as experiments
from elastic.testbed import inventory, render, rspec
from elastic.testbed.backends.base import Backend
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment

SITES = ("utah", "wisconsin", "clemson", "apt")


def backend_for(exp: Experiment, console: Console | None = None) -> Backend:
    return make_backend(exp.testbed, exp.site, console)


def make_backend(testbed: str, site: str | None, console: Console | None = None) -> Backend:
    if testbed == "local":
        from elastic.testbed.backends.local.backend import LocalBackend

        return LocalBackend(console)
    if testbed == "cloudlab":
        from elastic.testbed.backends.cloudlab import CloudLabBackend

        return CloudLabBackend(site=site or "utah")
    raise PtcError(f"unknown testbed {testbed!r} (known: local, cloudlab)")


def up(
    profile: Path,
    params: Mapping[str, str],
    name: str,
    testbed: str = "local",
    site: str | None = None,
    console: Console | None = None,
) -> Experiment:
    console = console or Console(stderr=True)
    experiments.validate_name(name)
    if experiments.exists(name):
        state = experiments.load(name).state
        raise PtcError(
            f"experiment {name!r} already exists (state: {state}); "
            f"use `ptc down {name}` first or pick another --name"
        )
    if testbed == "cloudlab" and site not in SITES:
        raise PtcError(f"--site must be one of {', '.join(SITES)} (got {site!r})")
    if not profile.is_file():
        raise PtcError(f"profile {str(profile)!r} does not exist")

    backend = make_backend(testbed, site, console)
    backend.preflight()  # credentials and tools, before anything exists that needs undoing
    console.print(f"[bold]render[/] {profile} {' '.join(f'{k}={v}' for k, v in params.items())}")
    request_xml = render.render_profile(profile, params)
    request = rspec.parse_request(request_xml)
    rspec.validate(request)

    exp = Experiment(
        name=name, testbed=testbed, profile=str(profile.resolve()), params=dict(params), site=site
    )
    exp.dir.mkdir(parents=True, exist_ok=False)
    exp.save()
    atomic.write_bytes(exp.request_path, request_xml)
    _keygen(exp)
    try:
        manifest_xml = backend.create(exp, request)
        atomic.write_bytes(exp.manifest_path, manifest_xml)
        write_inventory(exp)
    except BaseException as failure:
        _discard(exp, backend, failure)
        raise
    exp.state = "ready"
    exp.save()
    return exp


def modify(
    name: str, params: Mapping[str, str], console: Console | None = None
) -> tuple[Experiment, Change]:
    """Re-render the experiment's profile with ``params`` over its own; add and remove nodes.

    On failure the experiment keeps its manifest, inventory and parameters, and stays usable."""
    console = console or Console(stderr=True)
    exp = experiments.load(name)
    if exp.state != "ready":
        raise PtcError(f"experiment {name!r} is {exp.state}, not ready: `ptc status {name}`")
    target = replace(exp, params=exp.params | dict(params))
    profile = Path(exp.profile)
    if not profile.is_file():
        raise PtcError(f"experiment {name!r}: its profile {exp.profile!r} no longer exists")
    console.print(
        f"[bold]render[/] {profile} {' '.join(f'{k}={v}' for k, v in target.params.items())}"
    )
    request_xml = render.render_profile(profile, target.params)
    request = rspec.parse_request(request_xml)
    rspec.validate(request)
    change = changes.plan(rspec.parse_manifest(exp.manifest()), request)
    console.print(f"[bold]modify[/] {name}: {change.describe()}")

    backend = backend_for(exp, console)
    backend.preflight()
    exp.state = "modifying"  # if ptc dies here, `ptc status` says so; `ptc down` still works
    exp.save()
    try:
        manifest_xml = backend.modify(target, request, change)
    except BaseException:
        exp.state = "ready"
        exp.save()
        raise
    atomic.write_bytes(exp.request_path, request_xml)
    atomic.write_bytes(exp.manifest_path, manifest_xml)
    target.save()
    write_inventory(target)
    return target, change


def write_inventory(exp: Experiment) -> Path:
    manifest = rspec.parse_manifest(exp.manifest())
    return inventory.build_inventory(manifest, exp.inventory_dir, exp.key_path, exp.testbed)


def down(name: str, console: Console | None = None) -> None:
    exp = experiments.load(name)
    exp.state = "deleting"
    exp.save()
    backend_for(exp, console).delete(exp)
    shutil.rmtree(exp.dir)


def _discard(exp: Experiment, backend: Backend, failure: BaseException) -> None:
    """Release what a failed `up` created; keep the record only if something may be left."""
    try:
        backend.delete(exp)
    except Exception as err:
        exp.state = "failed"
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
