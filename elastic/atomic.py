"""Atomic writes: state on disk is either the old version or the new one, never half of each."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def replacing(path: Path, mode: int = 0o644) -> Iterator[Path]:
    """A temporary file beside ``path`` for a writer that wants a file name (Parquet writers);
    it replaces ``path`` only if the block finishes, and is removed otherwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    with replacing(path, mode) as tmp:
        tmp.write_bytes(data)


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    write_bytes(path, text.encode(), mode)


def write_json(path: Path, obj: Any, mode: int = 0o644) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n", mode)
