"""Run one geni-lib profile script the way the CloudLab portal does, with geni-lib's defects fixed.

Usage (normally only through ``elastic.profile.render``)::

    GENILIB_PORTAL_MODE=1 GENILIB_PORTAL_PARAMS_PATH=params.json \\
    GENILIB_PORTAL_REQUEST_PATH=request.xml python -m elastic.profile.portal_runner PROFILE

The script itself runs unchanged as ``__main__`` (geni-lib's tour reads its docstring from
there). Exit status follows the portal's contract: 0 on success, 100+N with a JSON list on
stderr for N parameter errors, 1 with a traceback for a broken script.

Parameters come in the portal line's form, ``{"bindings": {name: {"value": ...}}}`` (the old
flat ``{name: value}`` is read too); a bindings file gets its errors back as the portal line
reports them, a JSON object ``{"bindings": ..., "errors": {...}, "warnings": {...}}``.
``GENILIB_PORTAL_WARNINGS_ARE_FATAL=1`` makes parameter warnings errors, as on the portal's
first run of a profile.

``PTC_PARAMS_DUMP_PATH``, when set, receives ``{"parameters": [...], "warnings": [...]}``: the
parameter definitions the script made (name, type, default, description, legal values,
members of a struct) and the parameter warnings it reported, written even when binding
fails, so callers can list parameters, name the known ones and show warnings that the portal
protocol itself does not print. geni-lib's own ``GENILIB_PORTAL_DUMPPARAMS_PATH`` cannot be
used: it json-dumps non-serialisable objects.

A profile that prints bytes that are not UTF-8 is no error: they reach ptc replaced.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from typing import Any

from elastic.profile import genilib_compat

DUMP_ENV = "PTC_PARAMS_DUMP_PATH"
EXIT_SCRIPT_ERROR = 1
EXIT_USAGE = 64


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def _describe(p: Any) -> dict[str, Any]:
    legal = getattr(p, "legalValues", None)
    members = getattr(p, "parameters", None)
    return {
        "name": p.name,
        "type": p.type,
        "default": _jsonable(p.defaultValue),
        "description": getattr(p, "description", "") or "",
        "legal_values": _jsonable([v[0] if isinstance(v, tuple) else v for v in legal])
        if legal
        else None,
        "advanced": bool(getattr(p, "advanced", False))
        or getattr(p, "groupId", None) == "advanced",
        "prefix": getattr(p, "prefix", ""),
        "multi_value": bool(getattr(p, "multiValue", False)),
        "members": [_describe(members[n]) for n in p.parameterOrder]
        if isinstance(members, dict)
        else None,
    }


def _warning(w: Any) -> dict[str, Any]:
    return {
        "message": getattr(w, "message", None) or str(w),
        "params": [str(n) for n in getattr(w, "params", None) or []],
    }


def _dump_parameters(path: str) -> None:
    import geni.portal as portal

    ctx = portal.context
    out = {
        "parameters": [_describe(ctx._parameters[name]) for name in ctx._parameterOrder],
        "warnings": [_warning(w) for w in ctx._parameterWarnings],
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2)


def _print_script_traceback(ex: BaseException) -> None:
    """The traceback from the profile's frames on: runner and runpy frames are noise."""
    te = traceback.TracebackException.from_exception(ex)
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if f.filename != __file__ and not f.filename.startswith("<frozen")]
    )
    print("".join(te.format()), end="", file=sys.stderr)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m elastic.profile.portal_runner PROFILE", file=sys.stderr)
        return EXIT_USAGE
    profile = argv[0]
    genilib_compat.install()
    dump_path = os.environ.get(DUMP_ENV)
    # geni-lib's JSON errors and a profile's own prints must not die on odd characters.
    sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    sys.stderr.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    status = 0
    try:
        # The profile sees itself as the main program, exactly as under the portal.
        sys.argv = [profile]
        runpy.run_path(profile, run_name="__main__")
    except SystemExit as ex:
        # verifyParameters() exits 100+N after writing the JSON list to stderr.
        code = ex.code
        status = code if isinstance(code, int) else (0 if code is None else EXIT_SCRIPT_ERROR)
        if not isinstance(code, int) and code is not None:
            print(code, file=sys.stderr)
    except BaseException as ex:
        _print_script_traceback(ex)
        status = EXIT_SCRIPT_ERROR
    if dump_path and "geni.portal" in sys.modules:
        _dump_parameters(dump_path)
    sys.stderr.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
