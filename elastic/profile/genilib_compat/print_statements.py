"""geni-lib workaround ``print_statements``: ``geni/portal.py`` still contains Python 2 ``print``
statements (and one ``raw_input``), so ``import geni.portal`` raises SyntaxError. A meta-path
finder rewrites exactly those statements in the module's source before compiling it; the file on
disk is untouched.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

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


def install() -> None:
    if not any(isinstance(f, PortalSourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, PortalSourceFinder())
