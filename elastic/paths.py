"""Where ptc keeps its state: experiments, the node-image cache and the repository root."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def home() -> Path:
    """Root of ptc's state (``$PTC_HOME``, else ``$XDG_DATA_HOME/ptc``)."""
    explicit = os.environ.get("PTC_HOME")
    if explicit:
        return Path(explicit)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "ptc"


def experiments_dir() -> Path:
    return home() / "experiments"


def image_cache_dir() -> Path:
    """Built node images outlive experiments, so they sit apart from them (``$PTC_CACHE``)."""
    explicit = os.environ.get("PTC_CACHE")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ptc"
