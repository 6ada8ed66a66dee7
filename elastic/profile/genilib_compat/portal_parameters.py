"""geni-lib workaround ``portal_parameters``: The parameter API the portal added after 0.9.9.4:
``defineParameter``'s ``multiValue``, ``min``, ``max``, ``itemDefaultValue``,
``multiValueTitle``, ``inputFieldHint`` and ``inputConstraints``; ``defineStructParameter``,
``addParameter`` and ``portal.Parameter`` objects as struct members; the ``{"bindings": {name:
{"value": ...}}}`` parameter file (the old flat ``{name: value}`` one is still read) with errors
reported as the portal line does (a JSON object for a bindings file, a list for a flat one);
struct and list values written into the RSpec as ``data_struct``/``data_list``;
``printRequestRSpec`` checking reported errors first. Written here from the portal line's
behaviour, not copied. Skipped when the installed geni-lib already has
``defineStructParameter``.
"""

from __future__ import annotations

import atexit
import importlib
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from elastic.profile.genilib_compat.boolean_params import parse_bool
from elastic.profile.namespaces import PARAM_PREFIX, PARAMS_NS

#
# The portal line's parameter model, written for ptc: a parameter parses a value (scalar,
# list of values, struct of member parameters, or list of structs) and reports problems as
# portal ParameterErrors naming the parameter path the portal uses ("name", "name.member",
# "name[2].member").


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

    ns = PARAMS_NS
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

    ns = PARAMS_NS
    nsmap: Any = {None: ns}
    ds = etree.SubElement(root, f"{{{ns}}}data_set", nsmap=nsmap)
    for name, p in self.parameters.items():
        if p["hide"] is False:
            _write_parameter_value(ds, p["prefix"] + name, p["value"], False)
    return root


def install() -> None:
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
