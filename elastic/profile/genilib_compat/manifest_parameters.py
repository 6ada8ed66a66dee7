"""geni-lib workaround ``manifest_parameters``: ``ManifestParameter`` reads a ``value=`` attribute,
but manifests carry the value as the element text of ``<data_item
name="emulab.net.parameter.X">``; and binding looks the full prefixed name up under the bare
parameter name. Both are fixed so parameters bound from a manifest come out as recorded instead
of silently as the defaults.
"""

from __future__ import annotations

from typing import Any


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


def install() -> None:
    import geni.portal as portal
    import geni.rspec.pgmanifest as pgmanifest

    pgmanifest.ManifestParameter._fromdom = classmethod(_manifest_parameter_fromdom)
    portal.Context._bindParametersManifest = _bind_parameters_manifest
