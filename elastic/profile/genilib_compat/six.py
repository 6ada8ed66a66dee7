"""geni-lib workaround ``six``: geni-lib imports ``six`` without declaring it. ptc declares it in
pyproject.toml; the workaround here is a check that turns a missing ``six`` into a clear
PtcError instead of a bare ImportError deep inside geni-lib.
"""

from __future__ import annotations

import importlib

from elastic.errors import PtcError


def check_six() -> None:
    """geni-lib needs ``six`` but does not declare it: fail with a message that says so."""
    try:
        importlib.import_module("six")
    except ImportError as err:
        raise PtcError(
            "geni-lib 0.9.9.4 needs the Python package 'six', which it does not declare: "
            "install it into ptc's environment (pip install six)"
        ) from err
