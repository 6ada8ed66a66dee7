"""Render a geni-lib profile to a request RSpec by running it the way the CloudLab portal does.

The profile runs in a subprocess (``python -m elastic.profile.portal_runner``) so its global
state (geni-lib's singleton portal context, atexit hooks, ``sys.exit``) cannot leak into ptc,
with the real geni-lib from PyPI plus ``genilib_compat``'s workarounds. Parameters travel the
portal line's way: ``GENILIB_PORTAL_PARAMS_PATH`` holds ``{"bindings": {name: {"value": v}}}``
(struct members and list items wrapped the same way), and parameter errors come back either as
that object annotated with ``errors``/``warnings`` or, from an older geni-lib, as a JSON list;
both are read. The RSpec comes back through ``GENILIB_PORTAL_REQUEST_PATH``. Parameter
warnings (``reportWarning``) are returned; with ``warnings_fatal`` they are errors, as on the
portal's first run (``GENILIB_PORTAL_WARNINGS_ARE_FATAL``). The last run's stdout/stderr is
kept in ``$PTC_HOME/logs/render-<profile>.log`` for debugging.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic import atomic, paths
from elastic.errors import InputError, NotFoundError, PtcError
from elastic.profile import rspec
from elastic.profile.portal_runner import DUMP_ENV, EXIT_SCRIPT_ERROR
from elastic.profile.topology import Topology

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
    multi_value: bool = False
    members: list[ProfileParameter] | None = None  # of a struct parameter


@dataclass(frozen=True)
class ParameterWarning:
    """A warning a profile reported about its parameters (``reportWarning``)."""

    message: str
    params: list[str]

    def __str__(self) -> str:
        return f"{', '.join(self.params) or '(no parameter)'}: {self.message}"


@dataclass(frozen=True)
class RenderRun:
    """Everything one run of a profile produced."""

    status: int
    request: bytes | None
    parameters: list[ProfileParameter]
    stdout: str
    stderr: str
    log_path: Path
    warnings: list[ParameterWarning] = field(default_factory=list)


@dataclass(frozen=True)
class Rendered:
    """A profile's request RSpec, as XML and as a validated topology, and its warnings."""

    xml: bytes
    topology: Topology
    warnings: list[ParameterWarning] = field(default_factory=list)


def render_request(
    profile: Path, params: Mapping[str, Any], *, warnings_fatal: bool = True
) -> Rendered:
    """Run the profile, parse its request RSpec and validate it: the one way in for every caller.

    Parameter warnings are errors (InputError) by default, as when the portal instantiates a
    profile (``ptc up``); with ``warnings_fatal=False`` (``ptc profile render``) they are
    returned in ``Rendered.warnings`` for the caller to show.
    """
    run = run_profile(profile, params, warnings_fatal=warnings_fatal)
    _raise_for(run, profile, params)
    assert run.request is not None  # _raise_for checked it
    topology = rspec.parse_request(run.request)
    rspec.validate(topology)
    return Rendered(run.request, topology, run.warnings)


def render_profile(
    profile: Path, params: Mapping[str, Any], *, warnings_fatal: bool = True
) -> bytes:
    """Return the request RSpec the profile produces for ``params`` (raises PtcError).

    Warnings are fatal by default here: this is what ``ptc up`` uses, and the portal makes
    them fatal when it instantiates a profile.
    """
    run = run_profile(profile, params, warnings_fatal=warnings_fatal)
    _raise_for(run, profile, params)
    assert run.request is not None  # _raise_for checked it
    return run.request


def profile_parameters(profile: Path) -> list[ProfileParameter]:
    """The parameters a profile defines, in definition order (defaults bound, no values)."""
    run = run_profile(profile, {})
    if run.status == EXIT_SCRIPT_ERROR:
        raise _script_error(profile, run)
    return run.parameters


# --- parameter values from the command line and from a file ---------------------------------

_PATH_PART = re.compile(r"([A-Za-z_][\w-]*)|\[(\d+)\]")


def _split_path(path: str, item: str) -> list[str | int]:
    parts: list[str | int] = []
    pos = 0
    while pos < len(path):
        if parts and path[pos] == ".":
            pos += 1
        m = _PATH_PART.match(path, pos)
        if m is None or (m.group(1) is not None and parts and path[pos - 1] != "."):
            raise InputError(
                f"--param {item!r}: {path!r} is not a parameter name or a path such as "
                "name.member or name[0].member"
            )
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not parts or not isinstance(parts[0], str):
        raise InputError(f"--param {item!r} does not start with a parameter name")
    return parts


def _set_path(root: dict[str, Any], parts: list[str | int], value: Any, item: str) -> None:
    node: Any = root
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        shown = _show_path(parts[: i + 1])
        if isinstance(part, int):
            if not isinstance(node, list):
                raise InputError(f"--param {item!r}: {_show_path(parts[:i])} is not a list")
            while len(node) <= part:
                node.append(_UNSET)
            if last:
                if node[part] is not _UNSET:
                    raise InputError(f"--param {item!r}: {shown} is given twice")
                node[part] = value
            elif node[part] is _UNSET:
                node[part] = _PathList() if isinstance(parts[i + 1], int) else _PathDict()
            node = node[part]
            continue
        if not isinstance(node, dict):
            raise InputError(f"--param {item!r}: {_show_path(parts[:i])} is not a struct")
        if last:
            if part in node:
                raise InputError(f"--param {item!r}: {shown} is given twice")
            node[part] = value
        else:
            node = node.setdefault(
                part, _PathList() if isinstance(parts[i + 1], int) else _PathDict()
            )


def _show_path(parts: list[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class _PathDict(dict[str, Any]):
    """A struct built member by member (``lan.bandwidth=5``): merged into an older value."""


class _PathList(list[Any]):
    """A list built item by item (``nodes[1].name=b``): merged into an older value."""


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


def _check_filled(value: Any, path: str) -> None:
    if isinstance(value, list):
        for i, v in enumerate(value):
            if v is _UNSET:
                raise InputError(
                    f"--param: {path}[{i}] is missing (list items are given from [0] on, "
                    "without gaps)"
                )
            _check_filled(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_filled(v, f"{path}.{k}")


def parse_param_args(
    values: list[str] | None, base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``--param`` arguments as parameter values, over ``base`` (a parameters file's).

    ``NAME=VALUE`` gives a string (the profile converts it); ``NAME:=JSON`` gives a JSON value
    (a list for a multi-value parameter, an object for a struct); a path such as
    ``lan.bandwidth=100`` or ``nodes[1].name=b`` sets one member of a struct or item of a list.
    List items are given from ``[0]`` on without gaps, unless ``base`` has the items skipped.
    """
    params: dict[str, Any] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        is_json = key.endswith(":")
        key = key[:-1].strip() if is_json else key.strip()
        if not sep or not key:
            raise InputError(f"--param {item!r} is not of the form NAME=VALUE or NAME:=JSON")
        parsed: Any = value
        if is_json:
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as err:
                raise InputError(f"--param {item!r}: {value!r} is not JSON: {err}") from err
        _set_path(params, _split_path(key, item), parsed, item)
    merged = merge_params(base or {}, params)
    for name, value in merged.items():
        _check_filled(value, name)
    return merged


def load_params_file(path: Path) -> dict[str, Any]:
    """A parameters file: the portal's JSON form ``{"bindings": {name: {"value": v}}}``, or a
    plain ``{name: value}`` object."""
    from elastic.profile.genilib_compat import read_params_file

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise NotFoundError(f"--params-file {str(path)!r} does not exist") from err
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"--params-file {str(path)!r} is not a JSON file: {err}") from err
    try:
        values, _ = read_params_file(data)
    except ValueError as err:
        raise InputError(f"--params-file {str(path)!r}: {err}") from err
    return values


def merge_params(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` on top of ``base``: the values of a parameters file, or a running
    experiment's, under those of ``--param``.

    A value given whole (``NAME=VALUE``, ``NAME:=JSON``, a file's) replaces the old one; a
    struct or list given member by member (``lan.bandwidth=5``, ``nodes[1].name=b``) changes
    only those members of the old value.
    """
    out = dict(base)
    for name, value in overrides.items():
        out[name] = _merge(out.get(name), value)
    return out


def _merge(old: Any, value: Any) -> Any:
    if isinstance(value, _PathDict) and isinstance(old, Mapping):
        merged = _PathDict(old)
        for key, member in value.items():
            merged[key] = _merge(old.get(key), member)
        return merged
    if isinstance(value, _PathList) and isinstance(old, list):
        items = _PathList(old)
        for i, item in enumerate(value):
            if i >= len(items):
                items.append(item)
            elif item is not _UNSET:  # an item --param skipped keeps the old one
                items[i] = _merge(items[i], item)
        return items
    return value


def to_bindings(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameter values in the portal line's file form, every value wrapped as ``{"value": v}``."""

    def wrap(value: Any) -> dict[str, Any]:
        if isinstance(value, Mapping):
            return {"value": {str(k): wrap(v) for k, v in value.items()}}
        if isinstance(value, list | tuple):
            return {"value": [wrap(v) for v in value]}
        return {"value": value}

    return {"bindings": {name: wrap(value) for name, value in params.items()}}


def run_profile(
    profile: Path, params: Mapping[str, Any], *, warnings_fatal: bool = False
) -> RenderRun:
    """Run the profile once in portal mode; does not interpret the outcome."""
    profile = Path(profile)
    if not profile.is_file():
        raise NotFoundError(f"profile {str(profile)!r} does not exist or is not a file")
    with tempfile.TemporaryDirectory(prefix="ptc-render-") as tmp:
        tmpdir = Path(tmp)
        params_path = tmpdir / "params.json"
        request_path = tmpdir / "request.xml"
        dump_path = tmpdir / "parameters.json"
        params_path.write_text(json.dumps(to_bindings(params)))
        env = dict(os.environ)
        env.pop("GENILIB_PORTAL_WARNINGS_ARE_FATAL", None)
        if warnings_fatal:
            env["GENILIB_PORTAL_WARNINGS_ARE_FATAL"] = "1"
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
                [sys.executable, "-m", "elastic.profile.portal_runner", str(profile.resolve())],
                cwd=tmpdir,
                env=env,
                capture_output=True,
                encoding="utf-8",
                errors="replace",  # a profile may print bytes that are not UTF-8
                timeout=RENDER_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise PtcError(
                f"profile {profile.name!r} did not finish within {RENDER_TIMEOUT_S} s"
            ) from err
        request = request_path.read_bytes() if request_path.is_file() else None
        parameters, warnings = _read_dump(dump_path)
    log_path = paths.home() / "logs" / f"render-{profile.stem}.log"
    atomic.write_text(
        log_path,
        f"# profile: {profile.resolve()}\n# params: {json.dumps(dict(params))}\n"
        f"# exit status: {proc.returncode}\n--- stdout ---\n{proc.stdout}\n"
        f"--- stderr ---\n{proc.stderr}\n",
    )
    return RenderRun(
        proc.returncode, request, parameters, proc.stdout, proc.stderr, log_path, warnings
    )


def _parameter(d: dict[str, Any]) -> ProfileParameter:
    members = d.get("members")
    return ProfileParameter(
        name=d["name"],
        type=d["type"],
        default=d["default"],
        description=d.get("description") or "",
        legal_values=d.get("legal_values"),
        advanced=bool(d.get("advanced")),
        multi_value=bool(d.get("multi_value")),
        members=[_parameter(m) for m in members] if members is not None else None,
    )


def _read_dump(path: Path) -> tuple[list[ProfileParameter], list[ParameterWarning]]:
    if not path.is_file():
        return [], []
    data = json.loads(path.read_text())
    parameters = [_parameter(d) for d in data.get("parameters", [])]
    warnings = [
        ParameterWarning(str(w.get("message", "")), [str(p) for p in w.get("params") or []])
        for w in data.get("warnings", [])
    ]
    return parameters, warnings


def _raise_for(run: RenderRun, profile: Path, params: Mapping[str, Any]) -> None:
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


def _portal_error(profile: Path, run: RenderRun, params: Mapping[str, Any]) -> PtcError:
    errors = _portal_errors(run.stderr)
    if errors is None:
        return _script_error(profile, run)
    lines = []
    for err in errors:
        names = [str(n) for n in err.get("params") or []] or ["?"]
        shown = ", ".join(f"{n}={params[n]!r}" if n in params else n for n in names)
        kind = "warning" if err.get("errorType") == "ParameterWarning" else "error"
        lines.append(f"  {shown}: {err.get('message', '(no message)')} ({kind})")
    message = (
        f"profile {profile.name!r} rejected its parameters "
        f"({run.status - _PORTAL_ERROR_BASE} error(s)):\n" + "\n".join(lines)
    )
    if errors and all(e.get("errorType") == "ParameterWarning" for e in errors):
        message += (
            "\nparameter warnings are fatal here, as when the portal first instantiates a "
            "profile; change the parameters (`ptc profile check` shows the warnings without "
            "failing)"
        )
    return InputError(message)


def _portal_errors(stderr: str) -> list[dict[str, Any]] | None:
    """What verifyParameters() wrote, in either protocol, as a list of error records.

    geni-lib 0.9.9.4 writes a JSON list of errors; the portal line answers a bindings file with
    the bindings object annotated with ``errors`` and ``warnings`` (each a map from an index to
    a message), and marks the bindings they concern. Either may follow other output.
    """
    decoder = json.JSONDecoder()
    for pos, char in enumerate(stderr):
        if char not in "[{":
            continue
        try:
            value, _ = decoder.raw_decode(stderr[pos:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return value
        if isinstance(value, dict) and ("errors" in value or "warnings" in value):
            return _errors_from_object(value)
    return None


def _errors_from_object(obj: dict[str, Any]) -> list[dict[str, Any]]:
    marked: dict[str, list[str]] = {}

    def walk(bindings: Any, path: str) -> None:
        if isinstance(bindings, dict):
            for key, entry in bindings.items():
                here = f"{path}.{key}" if path else str(key)
                if isinstance(entry, dict):
                    for index in (entry.get("errors") or []) + (entry.get("warnings") or []):
                        marked.setdefault(str(index), []).append(here)
                    walk(entry.get("value"), here)
        elif isinstance(bindings, list):
            for i, entry in enumerate(bindings):
                here = f"{path}[{i}]"
                if isinstance(entry, dict):
                    for index in (entry.get("errors") or []) + (entry.get("warnings") or []):
                        marked.setdefault(str(index), []).append(here)
                    walk(entry.get("value"), here)

    walk(obj.get("bindings"), "")
    out = []
    for key, kind in (("errors", "ParameterError"), ("warnings", "ParameterWarning")):
        for index, rec in sorted((obj.get(key) or {}).items(), key=lambda kv: int(kv[0])):
            rec = rec if isinstance(rec, dict) else {"message": str(rec)}
            out.append(
                {
                    "errorType": rec.get("errorType", kind),
                    "message": rec.get("message", "(no message)"),
                    "params": rec.get("params") or marked.get(str(index), []),
                }
            )
    return out
