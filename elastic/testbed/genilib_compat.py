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

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from elastic.errors import PtcError

WORKAROUNDS = (
    "print_statements",
    "six",
    "write_xml",
    "boolean_params",
    "manifest_parameters",
    "portal_parameters",
    "portal_extensions",
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


def parse_bool(value: object) -> bool:
    """What a BOOLEAN parameter value means, read exactly as the portal's geni-lib reads it.

    Only the strings ``False``/``false`` and ``True``/``true`` are words; every other value
    is ``bool(value)``: the empty string is False, and ``"0"``, ``"no"``, ``"off"`` are True.
    """
    if isinstance(value, str):
        if value in ("False", "false"):
            return False
        if value in ("True", "true"):
            return True
    return bool(value)


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


# --- portal_parameters ---------------------------------------------------------------------
#
# The portal line's parameter model, written for ptc: a parameter parses a value (scalar,
# list of values, struct of member parameters, or list of structs) and reports problems as
# portal ParameterErrors naming the parameter path the portal uses ("name", "name.member",
# "name[2].member").

PARAM_PREFIX = "emulab.net.parameter."


class DictNamespace(dict[str, Any]):
    """Bound parameters: a dict whose keys are also attributes (``params.lan.bandwidth``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as err:
            raise AttributeError(name) from err

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        del self[name]


class _BadValue(Exception):
    """A value a parameter cannot take; ``path`` is the portal's name for where it sits."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


def _legal_list(values: Any) -> list[Any] | None:
    if not values:
        return None
    return [v[0] if isinstance(v, tuple) else v for v in values]


def _json_value(value: Any, path: str, want: type, what: str) -> Any:
    if value is None or value == "":
        return want()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as err:
            raise _BadValue(f"'{path}' is not a JSON {what}: {err}", path) from err
    if not isinstance(value, want):
        raise _BadValue(f"'{path}' must be a {what}, not {value!r}", path)
    return value


class PortalParameter:
    """``portal.Parameter`` as the portal line defines it (usable as a struct member)."""

    multiValue = False
    UNSET = (-1, -2, -1)  # 0.9.9.4's command-line binding looks for it

    def __init__(
        self,
        name: str,
        description: str,
        type: str,
        defaultValue: Any,
        legalValues: Any = None,
        longDescription: str | None = None,
        inputFieldHint: str | None = None,
        groupId: str | None = None,
        hide: bool = False,
        prefix: str = PARAM_PREFIX,
        inputConstraints: Any = None,
    ) -> None:
        self.name = name
        self.description = description
        self.type = type
        self.longDescription = longDescription
        self.inputFieldHint = inputFieldHint
        self.inputConstraints = inputConstraints
        self.groupId = groupId
        self.hide = hide
        self.prefix = prefix
        self._legalValues = legalValues or None
        if isinstance(defaultValue, tuple):
            defaultValue = defaultValue[0]
        self.value: Any = None
        self.is_set = False
        self._defaultValue = self._checked_default(defaultValue)

    # 0.9.9.4 code and older profiles read parameters like dicts.
    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __contains__(self, key: str) -> bool:
        return hasattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    @property
    def advanced(self) -> bool:
        return self.groupId == "advanced"

    @property
    def defaultValue(self) -> Any:
        return self._defaultValue

    @property
    def legalValues(self) -> list[Any] | None:
        return _legal_list(self._legalValues)

    def _checked_default(self, default: Any) -> Any:
        portal = importlib.import_module("geni.portal")
        try:
            return self.parse_item(default, self.name)
        except _BadValue as err:
            raise portal.IllegalParameterDefaultError(default, self) from err

    def parse_item(self, value: Any, path: str) -> Any:
        """One value of this parameter's own type (what a list holds, for a multi-value one)."""
        portal = importlib.import_module("geni.portal")
        if value is None:
            raise _BadValue(f"no value for parameter '{path}'", path)
        convert = portal.ParameterType.argparsemap.get(self.type, str)
        try:
            parsed = convert(value)
        except (TypeError, ValueError) as err:
            raise _BadValue(
                f"Could not coerce '{value}' to '{self.type}' for parameter '{path}': {err}", path
            ) from err
        legal = self.legalValues
        if legal is not None and parsed not in legal:
            shown = ", ".join(str(v) for v in legal)
            raise _BadValue(
                f"Illegal value '{value}' for parameter '{path}'; legal values: {shown}", path
            )
        return parsed

    def parse(self, value: Any, path: str) -> Any:
        return self.parse_item(value, path)

    def paramdef(self) -> dict[str, Any]:
        """What ptc lists about the parameter (``ptc profile params``)."""
        return {
            "name": self.name,
            "type": self.type,
            "default": self.defaultValue,
            "description": self.description,
            "legal_values": self.legalValues,
            "advanced": self.advanced,
            "prefix": self.prefix,
            "multi_value": self.multiValue,
        }


class _MultiMixin:
    """A list of values of the parameter's type, ``min``..``max`` long."""

    multiValue = True
    name: str
    min: int | None
    max: int | None
    multiValueTitle: str | None
    itemDefaultValue: Any

    def _setup_multi(
        self,
        min: int | None,
        max: int | None,
        itemDefaultValue: Any,
        multiValueTitle: str | None,
    ) -> None:
        self.min = min
        self.max = max
        self.multiValueTitle = multiValueTitle
        self.itemDefaultValue = (
            None if itemDefaultValue is None else self.parse_item(itemDefaultValue, self.name)
        )

    if TYPE_CHECKING:

        def parse_item(self, value: Any, path: str) -> Any: ...

    def _multi_default(self, default: Any) -> list[Any]:
        portal = importlib.import_module("geni.portal")
        if default is None or default == []:
            if self.min and self.itemDefaultValue is None:
                raise portal.PortalError(
                    f"multi-value parameter '{self.name}' has min={self.min} but neither a "
                    "default value nor an itemDefaultValue"
                )
            return [self.itemDefaultValue] * (self.min or 0)
        if not isinstance(default, list):
            raise portal.PortalError(
                f"multi-value parameter '{self.name}': default {default!r} is not a list"
            )
        try:
            self.parse(default, self.name)
        except _BadValue as err:
            raise portal.PortalError(f"bad default for '{self.name}': {err.message}") from err
        return default  # kept as given, as the portal line does: binding parses it

    def parse(self, value: Any, path: str) -> list[Any]:
        items = _json_value(value, path, list, "list")
        count = len(items)
        if self.min is not None and count < self.min:
            raise _BadValue(f"'{path}' needs at least {self.min} value(s), got {count}", path)
        if self.max is not None and count > self.max:
            raise _BadValue(f"'{path}' takes at most {self.max} value(s), got {count}", path)
        return [self.parse_item(item, f"{path}[{i}]") for i, item in enumerate(items)]


class MultiParameter(_MultiMixin, PortalParameter):
    def __init__(
        self,
        name: str,
        description: str,
        type: str,
        defaultValue: Any,
        legalValues: Any = None,
        min: int | None = None,
        max: int | None = None,
        itemDefaultValue: Any = None,
        multiValueTitle: str | None = None,
        **kw: Any,
    ) -> None:
        self._pending_default = defaultValue
        self.min, self.max = min, max
        PortalParameter.__init__(self, name, description, type, None, legalValues, **kw)
        self._setup_multi(min, max, itemDefaultValue, multiValueTitle)
        self._defaultValue = self._multi_default(self._pending_default)

    def _checked_default(self, default: Any) -> Any:
        return None  # set by __init__ once the list settings are known


class StructParameter(PortalParameter):
    """A parameter made of member parameters; its value is a dict of member values."""

    def __init__(
        self,
        name: str,
        description: str,
        defaultValue: Any = None,
        members: Any = (),
        prefix: str = PARAM_PREFIX,
        **kw: Any,
    ) -> None:
        portal = importlib.import_module("geni.portal")
        self.parameters: dict[str, PortalParameter] = {}
        self.parameterOrder: list[str] = []
        for member in members:
            self.addParameter(member)
        super().__init__(
            name, description, portal.ParameterType.STRUCT, defaultValue, prefix=prefix, **kw
        )

    def addParameter(self, member: PortalParameter) -> None:
        self.parameterOrder.append(member.name)
        self.parameters[member.name] = member

    @property
    def defaultValue(self) -> Any:
        if self._defaultValue is not None:
            return self._defaultValue
        return DictNamespace({n: self.parameters[n].defaultValue for n in self.parameterOrder})

    @property
    def legalValues(self) -> list[Any] | None:
        return None

    def _checked_default(self, default: Any) -> Any:
        if default is None:
            return None
        return PortalParameter._checked_default(self, default)

    def parse_item(self, value: Any, path: str) -> Any:
        given = _json_value(value, path, dict, "struct (JSON object)")
        unknown = sorted(set(given) - set(self.parameters))
        if unknown:
            members = ", ".join(self.parameterOrder)
            raise _BadValue(
                f"'{path}' has no member {', '.join(map(repr, unknown))}; its members are: "
                f"{members}",
                f"{path}.{unknown[0]}",
            )
        # Member order as the portal line binds it: given members sorted, then the rest sorted.
        out = DictNamespace()
        for member in sorted(given) + sorted(set(self.parameters) - set(given)):
            p = self.parameters[member]
            out[member] = p.parse(given.get(member, p.defaultValue), f"{path}.{member}")
        return out

    def paramdef(self) -> dict[str, Any]:
        d = super().paramdef()
        d["members"] = [self.parameters[n].paramdef() for n in self.parameterOrder]
        return d


class MultiStructParameter(_MultiMixin, StructParameter):
    def __init__(
        self,
        name: str,
        description: str,
        defaultValue: Any = None,
        members: Any = (),
        min: int | None = None,
        max: int | None = None,
        itemDefaultValue: Any = None,
        multiValueTitle: str | None = None,
        **kw: Any,
    ) -> None:
        self.min, self.max = min, max
        StructParameter.__init__(self, name, description, None, members, **kw)
        if itemDefaultValue is None:
            itemDefaultValue = {}
        self._setup_multi(min, max, itemDefaultValue, multiValueTitle)
        self._defaultValue = self._multi_default(defaultValue)


def _define_parameter(
    self: Any,
    name: str,
    description: str,
    typ: str,
    defaultValue: Any,
    legalValues: Any = None,
    longDescription: str | None = None,
    inputFieldHint: str | None = None,
    inputConstraints: Any = None,
    advanced: bool = False,
    groupId: str | None = None,
    hide: bool = False,
    multiValue: bool = False,
    min: int | None = None,
    max: int | None = None,
    itemDefaultValue: Any = None,
    multiValueTitle: str | None = None,
    prefix: str = PARAM_PREFIX,
) -> PortalParameter:
    common: dict[str, Any] = {
        "longDescription": longDescription,
        "inputFieldHint": inputFieldHint,
        "inputConstraints": inputConstraints,
        "groupId": "advanced" if advanced and groupId is None else groupId,
        "hide": hide,
        "prefix": prefix,
    }
    p: PortalParameter
    if multiValue:
        p = MultiParameter(
            name,
            description,
            typ,
            defaultValue,
            legalValues,
            min=min,
            max=max,
            itemDefaultValue=itemDefaultValue,
            multiValueTitle=multiValueTitle,
            **common,
        )
    else:
        p = PortalParameter(name, description, typ, defaultValue, legalValues, **common)
    self.addParameter(p)
    return p


def _define_struct_parameter(
    self: Any,
    name: str,
    description: str,
    defaultValue: Any = None,
    longDescription: str | None = None,
    advanced: bool = False,
    hide: bool = False,
    members: Any = (),
    multiValue: bool = False,
    min: int | None = None,
    max: int | None = None,
    itemDefaultValue: Any = None,
    multiValueTitle: str | None = None,
    inputConstraints: Any = None,
    prefix: str = PARAM_PREFIX,
) -> PortalParameter:
    common: dict[str, Any] = {
        "longDescription": longDescription,
        "groupId": "advanced" if advanced else None,
        "hide": hide,
        "inputConstraints": inputConstraints,
        "prefix": prefix,
    }
    p: PortalParameter
    if multiValue:
        p = MultiStructParameter(
            name,
            description,
            defaultValue,
            members,
            min=min,
            max=max,
            itemDefaultValue=itemDefaultValue,
            multiValueTitle=multiValueTitle,
            **common,
        )
    else:
        p = StructParameter(name, description, defaultValue, members, **common)
    self.addParameter(p)
    return p


def _add_parameter(self: Any, parameter: PortalParameter) -> None:
    if parameter.name in self._parameters:
        raise importlib.import_module("geni.portal").PortalError(
            f"parameter '{parameter.name}' is defined twice"
        )
    self._parameterOrder.append(parameter.name)
    self._parameters[parameter.name] = parameter
    if len(self._parameters) == 1:
        atexit.register(self._checkBind)


def _flatten_bindings(value: Any) -> Any:
    """The portal's bindings carry each value as ``{"value": ...}``, nested for structs."""
    if isinstance(value, dict):
        if "value" in value:
            return _flatten_bindings(value["value"])
        return {k: _flatten_bindings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_flatten_bindings(v) for v in value]
    return value


def read_params_file(data: Any) -> tuple[dict[str, Any], bool]:
    """Parameter values from a params file in either protocol; True when it was bindings."""
    if not isinstance(data, dict):
        raise ValueError("the parameters file must hold a JSON object")
    if "bindings" in data and isinstance(data["bindings"], dict):
        return _flatten_bindings(data["bindings"]), True
    return dict(data), False


def _bind_parameters_env(self: Any) -> Any:
    values: dict[str, Any] = {}
    self._envParams = {}
    self._envBindings = False
    if self._readParamsPath:
        with open(self._readParamsPath, encoding="utf-8") as fh:
            raw = json.load(fh)
        values, self._envBindings = read_params_file(raw)
        self._envParams = raw
    return self._bindParametersDict(values)


def _bind_parameters_dict(self: Any, values: dict[str, Any]) -> Any:
    portal = importlib.import_module("geni.portal")
    namespace = DictNamespace()
    for name in self._parameterOrder:
        p = self._parameters[name]
        raw = values.get(name, p.defaultValue)
        try:
            value = p.parse(raw, name)
        except _BadValue as err:
            self.reportError(portal.ParameterError(err.message, [err.path]))
            continue
        p.value = value
        namespace[name] = value
    self.verifyParameters()
    self._bindingDone = True
    return namespace


def _error_record(err: Any) -> dict[str, Any]:
    return {
        "errorType": type(err).__name__,
        "message": getattr(err, "message", str(err)),
        "params": list(getattr(err, "params", None) or []),
        "fixedValues": dict(getattr(err, "fixedValues", None) or {}),
    }


def _binding_for(bindings: Any, path: str) -> dict[str, Any] | None:
    """The bindings entry for a parameter path such as ``nodes[1].type``, if it exists."""
    node: Any = {"value": bindings}
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        inner = node.get("value") if isinstance(node, dict) else None
        key: Any = int(part[1:-1]) if part.startswith("[") else part
        try:
            node = inner[key]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return None
        if not isinstance(node, dict):
            return None
    return node if isinstance(node, dict) else None


def _verify_parameters(self: Any) -> int:
    errors = list(self._parameterErrors)
    warnings_ = list(self._parameterWarnings)
    fatal_warnings = self._parameterWarningsAreFatal
    if not errors and (not warnings_ or not fatal_warnings):
        return 0
    if getattr(self, "_envBindings", False):
        # The portal line's answer to a bindings file: the same object, annotated.
        out = self._envParams
        index = 1
        for key, items in (("errors", errors), ("warnings", warnings_)):
            if items:
                out[key] = {}
            for err in items:
                rec = _error_record(err)
                for path in rec["params"]:
                    entry = _binding_for(out.get("bindings", {}), str(path))
                    if entry is not None:
                        entry.setdefault(key, []).append(str(index))
                for path, fixed in rec["fixedValues"].items():
                    entry = _binding_for(out.get("bindings", {}), str(path))
                    if entry is not None:
                        entry["fixedValue"] = fixed
                out[key][str(index)] = rec
                index += 1
        json.dump(out, sys.stderr, default=str)
    else:
        json.dump([_error_record(e) for e in errors + warnings_], sys.stderr, default=str)
    sys.stderr.flush()
    count = len(errors) + (len(warnings_) if fatal_warnings else 0)
    sys.exit(100 + count)


def _write_parameter_value(parent: Any, name: str | None, value: Any, member: bool) -> None:
    from lxml import etree

    ns = "http://www.protogeni.net/resources/rspec/ext/profile-parameters/1"
    nsmap: Any = {None: ns}
    if isinstance(value, list):
        el = etree.SubElement(parent, f"{{{ns}}}data_list", nsmap=nsmap)
        if name:
            el.set("name", name)
        for item in value:
            _write_parameter_value(el, None, item, True)
    elif isinstance(value, dict):
        el = etree.SubElement(parent, f"{{{ns}}}data_struct", nsmap=nsmap)
        if name:
            el.set("name", name)
        for key, item in value.items():
            _write_parameter_value(el, key, item, True)
    else:
        tag = "data_member_item" if member else "data_item"
        el = etree.SubElement(parent, f"{{{ns}}}{tag}", nsmap=nsmap)
        if name:
            el.set("name", name)
        el.text = str(value)


def _parameter_data_write(self: Any, root: Any) -> Any:
    from lxml import etree

    ns = "http://www.protogeni.net/resources/rspec/ext/profile-parameters/1"
    nsmap: Any = {None: ns}
    ds = etree.SubElement(root, f"{{{ns}}}data_set", nsmap=nsmap)
    for name, p in self.parameters.items():
        if p["hide"] is False:
            _write_parameter_value(ds, p["prefix"] + name, p["value"], False)
    return root


def _install_portal_parameters() -> None:
    import geni.portal as portal
    import geni.rspec.igext as igext

    if hasattr(portal.Context, "defineStructParameter"):
        return  # a geni-lib of the portal line: it has all of this itself
    portal.ParameterType.STRUCT = "struct"
    portal.DictNamespace = DictNamespace
    portal.Parameter = PortalParameter
    portal.MultiParameter = MultiParameter
    portal.StructParameter = StructParameter
    portal.MultiStructParameter = MultiStructParameter
    portal.parseBool = parse_bool
    portal.MissingParameterMemberError = type(
        "MissingParameterMemberError", (portal.PortalError,), {}
    )
    portal.IllegalParameterValueError = type(
        "IllegalParameterValueError", (portal.PortalError,), {}
    )
    _param_error_init = portal.ParameterError.__init__

    def param_error_init(self: Any, message: str, paramList: Any, fixedValues: Any = None) -> None:
        _param_error_init(self, message, paramList or [])
        self.fixedValues = fixedValues or {}

    portal.ParameterError.__init__ = param_error_init
    ctx = portal.Context
    ctx.defineParameter = _define_parameter
    ctx.defineStructParameter = _define_struct_parameter
    ctx.addParameter = _add_parameter
    ctx._bindParametersEnv = _bind_parameters_env
    ctx._bindParametersDict = _bind_parameters_dict
    ctx.verifyParameters = _verify_parameters
    _print = ctx.printRequestRSpec

    def print_request(self: Any, rspec: Any = None) -> Any:
        self.verifyParameters()  # the portal line reports pending errors before printing
        return _print(self, rspec)

    ctx.printRequestRSpec = print_request
    igext.ParameterData._write = _parameter_data_write


# --- portal_extensions ---------------------------------------------------------------------
#
# RSpec extensions of the portal line, each writing the element the portal's geni-lib writes
# (checked against recordings in tests/unit/testbed/recordings/). Registered through
# geni-lib's own EXTENSIONS lists, so they appear as methods of Request, Node and Link.

EMULAB_NS = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
SHARED_VLAN_NS = "http://www.geni.net/resources/rspec/ext/shared-vlan/1"
ANSIBLE_NS = "http://www.protogeni.net/resources/rspec/ext/ansible/1"


def _sub(parent: Any, ns: str, tag: str, **attrs: str) -> Any:
    from lxml import etree

    el = etree.SubElement(parent, f"{{{ns}}}{tag}")
    for key, value in attrs.items():
        el.set(key, value)
    return el


def _tf(flag: object) -> str:
    return "true" if flag else "false"


class installRootKeys:
    """Node: which of root's ssh keys (private, public) the testbed installs on the node."""

    def __init__(self, private: bool = True, public: bool = True) -> None:
        self._private = private
        self._public = public

    def _write(self, root: Any) -> Any:
        _sub(root, EMULAB_NS, "rootkey", private=_tf(self._private), public=_tf(self._public))
        return root


class disableRootKeys:
    """Request: install no root ssh keys on any node."""

    __ONCEONLY__ = True

    def _write(self, root: Any) -> Any:
        _sub(root, EMULAB_NS, "disablerootkey")
        return root


class initVNC:
    """Request: the VNC password resource the portal's web consoles need."""

    __ONCEONLY__ = True
    __WANTPARENT__ = True

    def __init__(self) -> None:
        import geni.rspec.igext as igext

        self.password = igext.Password("vncpasswd")

    @property
    def _parent(self) -> Any:
        return self.request

    @_parent.setter
    def _parent(self, request: Any) -> None:
        self.request = request
        request.addResource(self.password)

    def _write(self, root: Any) -> Any:
        return root


STARTVNC_COMMAND = (
    "(cd /var/tmp &&         (test -e /var/tmp/novnc-setup ||          git clone "
    "https://gitlab.flux.utah.edu/emulab/novnc-setup.git) &&         "
    "/bin/bash /var/tmp/novnc-setup/startvnc.sh)"
)


class startVNC:
    """Node: run a VNC server (an execute service plus <emulab:x11vnc/>), and initVNC once."""

    __ONCEONLY__ = True
    __WANTPARENT__ = True

    def __init__(self, nostart: bool = False) -> None:
        self.nostart = nostart

    @property
    def _parent(self) -> Any:
        return self.node

    @_parent.setter
    def _parent(self, node: Any) -> None:
        import geni.rspec.pg as pg

        self.node = node
        if not self.nostart:
            node.addService(pg.Execute(shell="sh", command=STARTVNC_COMMAND))
        request = getattr(node, "_parent", None) or _current_request()
        if request is not None:
            with contextlib.suppress(pg.DuplicateExtensionError):
                request.initVNC()

    def _write(self, root: Any) -> Any:
        _sub(root, EMULAB_NS, "x11vnc")
        return root


def _current_request() -> Any:
    portal = sys.modules.get("geni.portal")
    return getattr(getattr(portal, "context", None), "_request", None)


class createSharedVlan:
    """Link: make this link's VLAN a shared VLAN other experiments can join."""

    __ONCEONLY__ = True

    def __init__(self, name: str) -> None:
        self._name = name

    def _write(self, root: Any) -> Any:
        _sub(root, SHARED_VLAN_NS, "create_shared_vlan", name=self._name)
        return root


class setJumboFrames:
    """Link: 9000-byte MTU on the link."""

    __ONCEONLY__ = True

    def _write(self, root: Any) -> Any:
        _sub(root, EMULAB_NS, "jumboframes", enabled="true")
        return root


def _docker_container_class() -> type:
    import geni.rspec.pg as pg

    class DockerContainer(pg.Node):  # type: ignore[misc]
        """A Docker container node (sliver type emulab-docker)."""

        def __init__(
            self, client_id: str, component_id: str | None = None, exclusive: bool = False
        ) -> None:
            super().__init__(
                client_id, "emulab-docker", component_id=component_id, exclusive=exclusive
            )
            self.cores: int | None = None
            self.ram: int | None = None
            self.docker_ptype: str | None = None
            self.docker_extimage: str | None = None
            self.docker_dockerfile: str | None = None
            self.docker_tbaugmentation: str | None = None
            self.docker_tbaugmentation_update = False
            self.docker_ssh_style: str | None = None
            self.docker_exec_shell: str | None = None
            self.docker_entrypoint: str | None = None
            self.docker_cmd: str | None = None
            self.docker_env: str | None = None
            self.docker_privileged = False

        def _write(self, root: Any) -> Any:
            nd = super()._write(root)
            st = nd.find("{http://www.geni.net/resources/rspec/3}sliver_type")
            wanted = (
                self.cores,
                self.ram,
                self.docker_extimage,
                self.docker_tbaugmentation,
                self.docker_tbaugmentation_update,
                self.docker_ssh_style,
                self.docker_cmd,
                self.docker_env,
                self.docker_entrypoint,
                self.docker_privileged,
            )
            if any(wanted):
                attrs: dict[str, str] = {}
                for attr, value in (
                    ("cores", self.cores),
                    ("ram", self.ram),
                    ("extimage", self.docker_extimage),
                    ("dockerfile", self.docker_dockerfile),
                ):
                    if value:
                        attrs[attr] = str(value)
                if self.docker_tbaugmentation is not None:
                    attrs["tbaugmentation"] = str(self.docker_tbaugmentation)
                attrs["tbaugmentation_update"] = "1" if self.docker_tbaugmentation_update else "0"
                for attr, value in (
                    ("ssh_style", self.docker_ssh_style),
                    ("exec_shell", self.docker_exec_shell),
                    ("entrypoint", self.docker_entrypoint),
                    ("cmd", self.docker_cmd),
                    ("env", self.docker_env),
                ):
                    if value is not None:
                        attrs[attr] = str(value)
                attrs["privileged"] = str(self.docker_privileged)
                _sub(st, EMULAB_NS, "docker", **attrs)
            if self.docker_ptype is not None:
                _sub(st, EMULAB_NS, "docker_ptype", name=self.docker_ptype)
            return nd

    return DockerContainer


def _ansible_module() -> ModuleType:
    """``geni.rspec.emulab.ansible`` as the portal line has it: roles, bindings, overrides."""
    import geni.rspec.pg as pg

    mod = ModuleType("geni.rspec.emulab.ansible", "Ansible roles and overrides (ptc compat).")

    class Role(pg.Resource):  # type: ignore[misc]
        def __init__(
            self,
            name: str,
            path: str | None = None,
            source: str | None = None,
            source_type: str | None = None,
            group: str | None = None,
            auto: bool = True,
            playbooks: Any = None,
        ) -> None:
            super().__init__()
            self.name, self.path, self.source = name, path, source
            self.source_type, self.group, self.auto = source_type, group, auto
            self.playbooks = list(playbooks or [])

        def _write(self, root: Any) -> Any:
            el = _sub(
                root,
                ANSIBLE_NS,
                "role",
                name=self.name,
                path=self.path or "",
                source=self.source or "",
                source_type=self.source_type or "",
                group=self.group or "",
                auto=str(self.auto),
            )
            for playbook in self.playbooks:
                playbook._write(el)
            super()._write(el)
            return el

    class RoleBinding:
        def __init__(self, role: str) -> None:
            self.role = role

        def _write(self, root: Any) -> Any:
            return _sub(root, ANSIBLE_NS, "role_binding", role=self.role)

    class Override(pg.Resource):  # type: ignore[misc]
        def __init__(
            self,
            name: str,
            value: str | None = None,
            source: str | None = None,
            source_name: str | None = None,
            on_empty: bool = True,
        ) -> None:
            super().__init__()
            self.name, self.value, self.source = name, value, source
            self.source_name, self.on_empty = source_name, on_empty

        def _write(self, root: Any) -> Any:
            el = _sub(
                root,
                ANSIBLE_NS,
                "override",
                name=self.name,
                source=self.source or "",
                source_name=self.source_name or "",
                on_empty=str(self.on_empty),
            )
            if self.value is not None:
                el.text = self.value
            super()._write(el)
            return el

    def _adder(attr: str) -> type:
        class Adder:
            def __init__(self, item: Any) -> None:
                setattr(self, attr, item)

            def _write(self, root: Any) -> Any:
                getattr(self, attr)._write(root)
                return root

        return Adder

    addRole, bindRole, addOverride = _adder("_role"), _adder("_binding"), _adder("_override")
    for name, obj in {
        "Role": Role,
        "RoleBinding": RoleBinding,
        "Override": Override,
        "addRole": addRole,
        "bindRole": bindRole,
        "addOverride": addOverride,
        "ANSIBLE_NAMESPACE": ANSIBLE_NS,
    }.items():
        setattr(mod, name, obj)
    pg.Request.EXTENSIONS.append(("addRole", addRole))
    pg.Request.EXTENSIONS.append(("addOverride", addOverride))
    pg.Node.EXTENSIONS.append(("bindRole", bindRole))
    pg.Node.EXTENSIONS.append(("addOverride", addOverride))
    return mod


def _register(owner: Any, name: str, ext: Any) -> None:
    if not any(existing == name for existing, _ in owner.EXTENSIONS):
        owner.EXTENSIONS.append((name, ext))


def _install_portal_extensions() -> None:
    import geni.rspec.emulab as emulab
    import geni.rspec.emulab.emuext as emuext
    import geni.rspec.igext as igext
    import geni.rspec.pg as pg

    for owner, name, ext in (
        (pg.Node, "installRootKeys", installRootKeys),
        (pg.Request, "disableRootKeys", disableRootKeys),
        (pg.Request, "initVNC", initVNC),
        (pg.Node, "startVNC", startVNC),
        (pg.Link, "createSharedVlan", createSharedVlan),
        (pg.Link, "setJumboFrames", setJumboFrames),
    ):
        if not hasattr(emuext, name):
            setattr(emuext, name, ext)
            setattr(emulab, name, ext)
            _register(owner, name, ext)
    if not hasattr(igext, "DockerContainer"):
        docker = _docker_container_class()
        igext.DockerContainer = docker
        emulab.DockerContainer = docker
        _register(pg.Request, "DockerContainer", docker)
    name = "geni.rspec.emulab.ansible"
    if name not in sys.modules and importlib.util.find_spec(name) is None:
        mod = _ansible_module()
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[mod.__name__] = mod
        emulab.ansible = mod


# --- entry point ---------------------------------------------------------------------------

_INSTALLERS: dict[str, Callable[[], None]] = {
    "print_statements": _install_print_statements,
    "six": check_six,
    "write_xml": _install_write_xml,
    "boolean_params": _install_boolean_params,
    "manifest_parameters": _install_manifest_parameters,
    "portal_parameters": _install_portal_parameters,
    "portal_extensions": _install_portal_extensions,
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
