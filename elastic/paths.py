"""Where ptc keeps its state: experiments, the node-image cache and the repository root.

ptc runs from a checkout of its repository, not from an installed wheel: the repository is also
the IaC content (site.yml, roles/, inventories/, tests/infra, profiles/) that the testbed puts on
every node at /local/repository, where the head runs the playbooks itself. ``REPO_ROOT`` is that
checkout; ``repository()`` checks it is one.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def repository() -> Path:
    """The checkout ptc runs from; an error naming what is missing if this is not one."""
    if not (REPO_ROOT / "site.yml").is_file():
        from elastic.errors import PtcError

        raise PtcError(
            f"{REPO_ROOT} has no site.yml: ptc runs from a checkout of its repository "
            "(the playbooks, roles and profiles live there), not from an installed package"
        )
    return REPO_ROOT


def home() -> Path:
    """Root of ptc's state: ``$PTC_HOME`` when set; else ``state/`` in the checkout ptc runs
    from, so ``make demo`` and ``bin/ptc`` find the same experiments (git ignores it, and the
    nodes that mount the checkout see it empty); else ``$XDG_DATA_HOME/ptc``."""
    explicit = os.environ.get("PTC_HOME")
    if explicit:
        return Path(explicit)
    if (REPO_ROOT / "site.yml").is_file():
        return REPO_ROOT / "state"
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
