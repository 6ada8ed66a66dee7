"""Run-time workarounds for geni-lib 0.9.9.4's Python 3 defects: the ONE place they live.

geni-lib 0.9.9.4 as published on PyPI is broken on Python 3: ``import geni.portal`` fails on its
Python 2 print statements, and the defects below follow once it imports. The CloudLab portal
runs its own, fixed copy, so a profile script must stay untouched; we therefore patch geni-lib
*at import/run time* instead of forking or vendoring it. Each workaround is independent, lives
in the module of its name in this package, and is named so a test can switch one off and show
its defect come back:

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
    command line or a JSON of strings) becomes True. Replaced by the portal line's reading
    (``parse_bool``): ``"False"``/``"false"`` are False, ``"True"``/``"true"`` True, and any
    other value is ``bool(value)``, so ``"0"``, ``"no"`` and ``"off"`` are True, as on the portal.
``manifest_parameters``
    ``ManifestParameter`` reads a ``value=`` attribute, but manifests carry the value as the
    element text of ``<data_item name="emulab.net.parameter.X">``; and binding looks the full
    prefixed name up under the bare parameter name. Both are fixed so parameters bound from a
    manifest come out as recorded instead of silently as the defaults.
``portal_parameters``
    The parameter API the portal added after 0.9.9.4: ``defineParameter``'s ``multiValue``,
    ``min``, ``max``, ``itemDefaultValue``, ``multiValueTitle``, ``inputFieldHint`` and
    ``inputConstraints``; ``defineStructParameter``, ``addParameter`` and ``portal.Parameter``
    objects as struct members; the ``{"bindings": {name: {"value": ...}}}`` parameter file
    (the old flat ``{name: value}`` one is still read) with errors reported as the portal
    line does (a JSON object for a bindings file, a list for a flat one); struct and list
    values written into the RSpec as ``data_struct``/``data_list``; ``printRequestRSpec``
    checking reported errors first. Written here from the portal line's behaviour, not
    copied. Skipped when the installed geni-lib already has ``defineStructParameter``.
``portal_extensions``
    RSpec extensions of the portal line that 0.9.9.4 lacks, writing the same elements:
    ``Node.installRootKeys``, ``Request.disableRootKeys``, ``Request.initVNC``,
    ``Node.startVNC``, ``Link.createSharedVlan``, ``Link.setJumboFrames``,
    ``Request.DockerContainer``, and ``geni.rspec.emulab.ansible`` (``Role``,
    ``RoleBinding``, ``Override``, ``Request.addRole``, ``Node.bindRole``,
    ``addOverride``). Each is added only where geni-lib does not define it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from elastic.errors import PtcError
from elastic.profile.genilib_compat import (
    boolean_params,
    manifest_parameters,
    portal_extensions,
    portal_parameters,
    print_statements,
    six,
    write_xml,
)
from elastic.profile.genilib_compat.boolean_params import parse_bool
from elastic.profile.genilib_compat.portal_parameters import read_params_file
from elastic.profile.genilib_compat.print_statements import fix_portal_source
from elastic.profile.genilib_compat.six import check_six

__all__ = [
    "WORKAROUNDS",
    "check_six",
    "fix_portal_source",
    "install",
    "parse_bool",
    "read_params_file",
]

WORKAROUNDS = (
    "print_statements",
    "six",
    "write_xml",
    "boolean_params",
    "manifest_parameters",
    "portal_parameters",
    "portal_extensions",
)

_INSTALLERS: dict[str, Callable[[], None]] = {
    "print_statements": print_statements.install,
    "six": six.check_six,
    "write_xml": write_xml.install,
    "boolean_params": boolean_params.install,
    "manifest_parameters": manifest_parameters.install,
    "portal_parameters": portal_parameters.install,
    "portal_extensions": portal_extensions.install,
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
