"""``--since``: the start of a ledger's period, as epoch seconds.

Three forms: epoch seconds (``1796035110``), an ISO 8601 date or date and time (``2026-11-30``,
``2026-11-30T10:00``, ``2026-11-30T10:00:00Z``; without a zone it is UTC, as the nodes keep
it), or a time ago (``90s``, ``45m``, ``2h``, ``3d``). Anything else, or a time after now, is an
InputError naming ``--since``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from elastic.errors import InputError

_AGO = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[smhd])$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
FORMS = (
    "epoch seconds, an ISO date or date and time (2026-11-30T10:00Z), or a time ago (45m, 2h, 3d)"
)


def parse_since(text: str, now: float) -> float:
    """``text`` as epoch seconds, no later than ``now``."""
    value = text.strip()
    when = _parse(value, now)
    if when is None:
        raise InputError(f"--since {text!r}: not a time; give {FORMS}")
    if when > now:
        raise InputError(f"--since {text!r}: is after now; the ledger covers the past")
    return when


def _parse(value: str, now: float) -> float | None:
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    if m := _AGO.match(value):
        return now - float(m["n"]) * _UNIT_S[m["unit"]]
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def iso(t: float) -> str:
    """``t`` as sacct's ``-S``/``-E`` read it on a node that keeps UTC."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S")
