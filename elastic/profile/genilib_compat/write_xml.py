"""geni-lib workaround ``write_xml``: ``Request.writeXML`` writes the bytes from ``toXMLString`` to
a text-mode file (or ``sys.stdout``), so ``printRequestRSpec()`` raises TypeError. Replaced by a
version that writes bytes.
"""

from __future__ import annotations

import sys
from typing import Any


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


def install() -> None:
    import geni.rspec.pg as pg

    pg.Request.writeXML = _write_xml_bytes
