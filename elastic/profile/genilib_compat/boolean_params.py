"""geni-lib workaround ``boolean_params``: BOOLEAN parameters are coerced with ``bool(value)``, so
the string ``"False"`` (from the command line or a JSON of strings) becomes True. Replaced by
the portal line's reading (``parse_bool``): ``"False"``/``"false"`` are False,
``"True"``/``"true"`` True, and any other value is ``bool(value)``, so ``"0"``, ``"no"`` and
``"off"`` are True, as on the portal.
"""

from __future__ import annotations


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


def install() -> None:
    import geni.portal as portal

    portal.ParameterType.argparsemap[portal.ParameterType.BOOLEAN] = parse_bool
