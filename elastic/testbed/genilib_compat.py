"""Run-time workarounds for geni-lib 0.9.9.4's Python 3 defects: the ONE place they live.

geni-lib 0.9.9.4 as published on PyPI is broken on Python 3 (see
``/work/shared/notes/machine-facts.md``). The CloudLab portal runs its own, fixed copy, so a
profile script must stay untouched; we therefore patch geni-lib *at import/run time* instead of
forking or vendoring it. Each workaround is independent and named so a test can switch one off
and show its defect come back:

``print_statements``
    ``geni/portal.py`` still contains Python 2 ``print`` statements (and one ``raw_input``),
    so ``import geni.portal`` raises SyntaxError. A meta-path finder rewrites exactly those
    statements in the module's source before compiling it; the file on disk is untouched.
``six``
    geni-lib imports ``six`` without declaring it. ptc declares it in pyproject.toml; the
    workaround here is a check that turns a missing ``six`` into a clear PtcError instead of a
    bare ImportError deep inside geni-lib.
``write_xml``
    ``Request.writeXML`` writes the bytes from ``toXMLString`` to a text-mode file (or
    ``sys.stdout``), so ``printRequestRSpec()`` raises TypeError. Replaced by a version that
    writes bytes.
``boolean_params``
    BOOLEAN parameters are coerced with ``bool(value)``, so the string ``"False"`` (from the
    command line or a JSON of strings) becomes True. Replaced by a real boolean parser.
``manifest_parameters``
    ``ManifestParameter`` reads a ``value=`` attribute, but manifests carry the value as the
    element text of ``<data_item name="emulab.net.parameter.X">``; and binding looks the full
    prefixed name up under the bare parameter name. Both are fixed so parameters bound from a
    manifest come out as recorded instead of silently as the defaults.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import Any

from elastic.errors import PtcError

WORKAROUNDS = (
    "print_statements",
    "six",
    "write_xml",
    "boolean_params",
    "manifest_parameters",
)

# --- print_statements ----------------------------------------------------------------------

_PORTAL_MODULE = "geni.portal"
# A Python 2 print statement: `print` followed by something that is not an opening parenthesis
# or an assignment/attribute. Only applied to geni/portal.py, whose four such lines are known.
_PRINT_STMT = re.compile(r"^(?P<indent>[ \t]*)print[ \t]+(?P<args>[^(=.\s].*?)[ \t]*$", re.M)
_RAW_INPUT = re.compile(r"\braw_input\(")


def fix_portal_source(source: str) -> str:
    """Rewrite geni/portal.py's Python 2 statements into Python 3 calls (pure, testable)."""
    fixed = _PRINT_STMT.sub(lambda m: f"{m['indent']}print({m['args']})", source)
    return _RAW_INPUT.sub("input(", fixed)


class _PortalSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles geni/portal.py from its fixed source instead of the file as shipped."""

    def source_to_code(  # type: ignore[override]
        self, data: bytes, path: str, *, _optimize: int = -1
    ) -> Any:
        text = importlib.util.decode_source(data)
        try:
            return compile(text, path, "exec", dont_inherit=True, optimize=_optimize)
        except SyntaxError:
            # Only when the shipped source is broken: a fixed geni-lib is compiled as is.
            return compile(fix_portal_source(text), path, "exec", dont_inherit=True)

    def get_code(self, fullname: str) -> Any:
        # Bypass the bytecode cache: a cached .pyc of the *unfixed* file cannot exist (it never
        # compiled), but one written by us must not be trusted by an unpatched interpreter.
        source = self.get_data(self.get_filename(fullname))
        return self.source_to_code(source, self.get_filename(fullname))


class PortalSourceFinder(importlib.abc.MetaPathFinder):
    """Meta-path finder that hands ``geni.portal`` to ``_PortalSourceLoader``."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _PORTAL_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            return spec
        loader = _PortalSourceLoader(fullname, spec.origin)
        return importlib.util.spec_from_file_location(fullname, spec.origin, loader=loader)


def _install_print_statements() -> None:
    if not any(isinstance(f, PortalSourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, PortalSourceFinder())


# --- six -----------------------------------------------------------------------------------


def check_six() -> None:
    """geni-lib needs ``six`` but does not declare it: fail with a message that says so."""
    try:
        importlib.import_module("six")
    except ImportError as err:
        raise PtcError(
            "geni-lib 0.9.9.4 needs the Python package 'six', which it does not declare: "
            "install it into ptc's environment (pip install six)"
        ) from err


# --- write_xml -----------------------------------------------------------------------------


def _write_xml_bytes(self: Any, path: str | None) -> None:
    """``Request.writeXML`` that writes the serialised (bytes) RSpec to a binary stream."""
    buf = self.toXMLString(True)
    if isinstance(buf, str):
        buf = buf.encode("utf-8")
    if path is None:
        sys.stdout.buffer.write(buf)
        sys.stdout.flush()
    else:
        with open(path, "wb") as fh:
            fh.write(buf)


def _install_write_xml() -> None:
    import geni.rspec.pg as pg

    pg.Request.writeXML = _write_xml_bytes


# --- boolean_params ------------------------------------------------------------------------

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


def parse_bool(value: object) -> bool:
    """What a BOOLEAN parameter value means; rejects anything else (the portal reports it)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _install_boolean_params() -> None:
    import geni.portal as portal

    portal.ParameterType.argparsemap[portal.ParameterType.BOOLEAN] = parse_bool


# --- manifest_parameters -------------------------------------------------------------------


def _manifest_parameter_fromdom(cls: Any, elem: Any) -> Any:
    # The value is the element's text; keep reading `value=` when an aggregate ever sends it.
    value = elem.get("value")
    if value is None:
        value = elem.text if elem.text is not None else ""
    return cls(elem.get("name"), value)


def _bind_parameters_manifest(self: Any, manifest: Any) -> Any:
    # Manifest names carry the parameter's prefix ("emulab.net.parameter.X"); binding wants X.
    by_full_name = {p["prefix"] + name: name for name, p in self._parameters.items()}
    pdict = {}
    for mp in manifest.parameters:
        pdict[by_full_name.get(mp.name, mp.name)] = mp.value
    return self._bindParametersDict(pdict)


def _install_manifest_parameters() -> None:
    import geni.portal as portal
    import geni.rspec.pgmanifest as pgmanifest

    pgmanifest.ManifestParameter._fromdom = classmethod(_manifest_parameter_fromdom)
    portal.Context._bindParametersManifest = _bind_parameters_manifest


# --- entry point ---------------------------------------------------------------------------

_INSTALLERS: dict[str, Callable[[], None]] = {
    "print_statements": _install_print_statements,
    "six": check_six,
    "write_xml": _install_write_xml,
    "boolean_params": _install_boolean_params,
    "manifest_parameters": _install_manifest_parameters,
}


def install(skip: Iterable[str] = ()) -> None:
    """Apply every workaround except those named in ``skip`` (tests use it to show a defect).

    Order matters: the finder must be in place before anything imports ``geni.portal``.
    """
    skipped = set(skip)
    unknown = skipped - set(WORKAROUNDS)
    if unknown:
        raise PtcError(
            f"unknown geni-lib workaround(s) {sorted(unknown)} (known: {', '.join(WORKAROUNDS)})"
        )
    for name in WORKAROUNDS:
        if name not in skipped:
            _INSTALLERS[name]()
