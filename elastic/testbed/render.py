"""Render a geni-lib profile to a request RSpec by running it the way the CloudLab portal does.

The profile runs in a subprocess (``python -m elastic.testbed.portal_runner``) so its global
state (geni-lib's singleton portal context, atexit hooks, ``sys.exit``) cannot leak into ptc,
with the real geni-lib from PyPI plus ``genilib_compat``'s workarounds. Parameters travel the
portal's way: ``GENILIB_PORTAL_PARAMS_PATH`` (JSON of values), the RSpec comes back through
``GENILIB_PORTAL_REQUEST_PATH``. The last run's stdout/stderr is kept in
``$PTC_HOME/logs/render-<profile>.log`` for debugging.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic import atomic, paths
from elastic.errors import InputError, NotFoundError, PtcError
from elastic.testbed import rspec
from elastic.testbed.portal_runner import DUMP_ENV, EXIT_SCRIPT_ERROR
from elastic.testbed.topology import Topology

RENDER_TIMEOUT_S = 120
_PORTAL_ERROR_BASE = 100
_TAIL_LINES = 15


@dataclass(frozen=True)
class ProfileParameter:
    name: str
    type: str
    default: Any
    description: str
    legal_values: list[Any] | None = None
    advanced: bool = False


@dataclass(frozen=True)
class RenderRun:
    """Everything one run of a profile produced."""

    status: int
    request: bytes | None
    parameters: list[ProfileParameter]
    stdout: str
    stderr: str
    log_path: Path


@dataclass(frozen=True)
class Rendered:
    """A profile's request RSpec, as XML and as a validated topology."""

    xml: bytes
    topology: Topology


def render_request(profile: Path, params: Mapping[str, str]) -> Rendered:
    """Run the profile, parse its request RSpec and validate it: the one way in for every caller."""
    xml = render_profile(profile, params)
    topology = rspec.parse_request(xml)
    rspec.validate(topology)
    return Rendered(xml, topology)


def render_profile(profile: Path, params: Mapping[str, str]) -> bytes:
    """Return the request RSpec the profile produces for ``params`` (raises PtcError)."""
    run = run_profile(profile, params)
    _raise_for(run, profile, params)
    assert run.request is not None  # _raise_for checked it
    return run.request


def profile_parameters(profile: Path) -> list[ProfileParameter]:
    """The parameters a profile defines, in definition order (defaults bound, no values)."""
    run = run_profile(profile, {})
    if run.status == EXIT_SCRIPT_ERROR:
        raise _script_error(profile, run)
    return run.parameters


def run_profile(profile: Path, params: Mapping[str, str]) -> RenderRun:
    """Run the profile once in portal mode; does not interpret the outcome."""
    profile = Path(profile)
    if not profile.is_file():
        raise NotFoundError(f"profile {str(profile)!r} does not exist or is not a file")
    with tempfile.TemporaryDirectory(prefix="ptc-render-") as tmp:
        tmpdir = Path(tmp)
        params_path = tmpdir / "params.json"
        request_path = tmpdir / "request.xml"
        dump_path = tmpdir / "parameters.json"
        params_path.write_text(json.dumps(dict(params)))
        env = dict(os.environ)
        env.update(
            {
                "GENILIB_PORTAL_MODE": "1",
                "GENILIB_PORTAL_PARAMS_PATH": str(params_path),
                "GENILIB_PORTAL_REQUEST_PATH": str(request_path),
                DUMP_ENV: str(dump_path),
                # The runner must import this checkout's `elastic` even without an install.
                "PYTHONPATH": os.pathsep.join(
                    p for p in (str(paths.REPO_ROOT), env.get("PYTHONPATH", "")) if p
                ),
            }
        )
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "elastic.testbed.portal_runner", str(profile.resolve())],
                cwd=tmpdir,
                env=env,
                capture_output=True,
                text=True,
                timeout=RENDER_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise PtcError(
                f"profile {profile.name!r} did not finish within {RENDER_TIMEOUT_S} s"
            ) from err
        request = request_path.read_bytes() if request_path.is_file() else None
        parameters = _read_parameters(dump_path)
    log_path = paths.home() / "logs" / f"render-{profile.stem}.log"
    atomic.write_text(
        log_path,
        f"# profile: {profile.resolve()}\n# params: {json.dumps(dict(params))}\n"
        f"# exit status: {proc.returncode}\n--- stdout ---\n{proc.stdout}\n"
        f"--- stderr ---\n{proc.stderr}\n",
    )
    return RenderRun(proc.returncode, request, parameters, proc.stdout, proc.stderr, log_path)


def _read_parameters(path: Path) -> list[ProfileParameter]:
    if not path.is_file():
        return []
    return [
        ProfileParameter(
            name=d["name"],
            type=d["type"],
            default=d["default"],
            description=d.get("description") or "",
            legal_values=d.get("legal_values"),
            advanced=bool(d.get("advanced")),
        )
        for d in json.loads(path.read_text())
    ]


def _raise_for(run: RenderRun, profile: Path, params: Mapping[str, str]) -> None:
    if run.status == EXIT_SCRIPT_ERROR or (run.status != 0 and run.status < _PORTAL_ERROR_BASE):
        raise _script_error(profile, run)
    known = [p.name for p in run.parameters]
    unknown = sorted(set(params) - set(known))
    if unknown:
        listing = ", ".join(known) if known else "(it defines none)"
        raise InputError(
            f"profile {profile.name!r} has no parameter {', '.join(map(repr, unknown))}; "
            f"its parameters are: {listing}"
        )
    if run.status >= _PORTAL_ERROR_BASE:
        raise _portal_error(profile, run, params)
    if not run.request:
        raise InputError(
            f"profile {profile.name!r} finished without writing a request RSpec "
            "(does it call portal.context.printRequestRSpec()?); "
            f"output kept in {run.log_path}"
        )


def _script_error(profile: Path, run: RenderRun) -> PtcError:
    tail = "\n".join(run.stderr.strip().splitlines()[-_TAIL_LINES:]) or "(no output)"
    # A profile that crashes is bad input too: the profile is the user's file.
    return InputError(
        f"profile {profile.name!r} failed (exit status {run.status}):\n{tail}\n"
        f"full output kept in {run.log_path}"
    )


def _portal_error(profile: Path, run: RenderRun, params: Mapping[str, str]) -> PtcError:
    errors = _portal_errors(run.stderr)
    if errors is None:
        return _script_error(profile, run)
    lines = []
    for err in errors:
        names = [str(n) for n in err.get("params") or []] or ["?"]
        shown = ", ".join(f"{n}={params[n]!r}" if n in params else n for n in names)
        kind = "warning" if err.get("errorType") == "ParameterWarning" else "error"
        lines.append(f"  {shown}: {err.get('message', '(no message)')} ({kind})")
    return InputError(
        f"profile {profile.name!r} rejected its parameters "
        f"({run.status - _PORTAL_ERROR_BASE} error(s)):\n" + "\n".join(lines)
    )


def _portal_errors(stderr: str) -> list[dict[str, Any]] | None:
    """The JSON list verifyParameters() wrote; it may follow warnings on earlier lines."""
    start = stderr.find("[")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(stderr[start:])
        except json.JSONDecodeError:
            start = stderr.find("[", start + 1)
            continue
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return value
        start = stderr.find("[", start + 1)
    return None
