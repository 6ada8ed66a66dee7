"""Atomic writes: state on disk is either the old version or the new one, never half of each."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    write_bytes(path, text.encode(), mode)


def write_json(path: Path, obj: Any, mode: int = 0o644) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n", mode)
