"""The public traces tests need, from wherever this checkout has them, or a skip that says how.

In order: the copies shipped in tests/data/traces (small ones whose licence allows it), a data
directory beside the checkout (``../shared/data/traces``, where a project machine keeps them),
then ptc's trace cache (`ptc sim fetch NAME`). A user's clone has at least the first; without the
others a test that needs a larger trace skips and names the command that fetches it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.sim.traces import public

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tests" / "data" / "traces"
BESIDE = REPO.parent / "shared" / "data" / "traces"


def trace_file(name: str) -> Path:
    """The trace ``name`` (a key of elastic.sim.traces.public.TRACES); skips the test without it."""
    try:
        return public.locate(name, SHIPPED, BESIDE)
    except public.TraceMissing as missing:
        pytest.skip(str(missing))


def missing(name: str) -> str:
    """Why the trace ``name`` is not here ("" when it is), for a module-level skip mark: a
    fixture's skip would come after session fixtures, such as a shared cluster, were made."""
    try:
        public.locate(name, SHIPPED, BESIDE)
    except public.TraceMissing as why:
        return str(why)
    return ""
