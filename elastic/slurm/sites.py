"""The sites of a pool that spans several testbeds or clouds, as Slurm sees them: each site is a
set of Slurm nodes with a price per node-hour and the number of nodes wanted there.

A sites file (YAML)::

    sites:
      - name: cheap            # names are the rebalancing's own: reports and reasons use them
        price: 1.0             # per node-hour, any currency: excess cost is counted in it
        desired: 2             # nodes wanted running on this site
        nodes: node-[0-1]      # a Slurm hostlist
      - name: dear
        price: 2.0
        desired: 0
        nodes: node-[2-3]

Sites are listed in preference order: with equal deficits, an earlier site gets the new nodes.
Every error names the file and the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from elastic.errors import InputError
from elastic.policies import CloudSite

_FIELDS = frozenset({"name", "price", "desired", "nodes"})


@dataclass(frozen=True)
class SiteNodes:
    site: CloudSite
    nodes: tuple[str, ...]


def load_sites(path: Path, expand: Callable[[str], list[str]]) -> tuple[SiteNodes, ...]:
    """``expand`` turns a hostlist into names (``Slurm.expand``)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"sites file {path}: cannot read it ({err.strerror})") from err
    except yaml.YAMLError as err:
        raise InputError(f"sites file {path}: not YAML ({err})") from err
    return parse_sites(data, expand, str(path))


def parse_sites(
    data: Any, expand: Callable[[str], list[str]], source: str = "sites"
) -> tuple[SiteNodes, ...]:
    if not isinstance(data, Mapping) or not isinstance(data.get("sites"), Sequence):
        raise InputError(f"{source}: field sites must be a list of sites")
    found: list[SiteNodes] = []
    owner: dict[str, str] = {}
    for index, raw in enumerate(data["sites"]):
        where = f"{source}: sites[{index}]"
        if not isinstance(raw, Mapping):
            raise InputError(f"{where}: must be a mapping with {', '.join(sorted(_FIELDS))}")
        unknown = sorted(set(raw) - _FIELDS)
        if unknown:
            raise InputError(f"{where}: field {unknown[0]}: not known")
        for key in sorted(_FIELDS):
            if key not in raw:
                raise InputError(f"{where}: field {key} is missing")
        name = raw["name"]
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"{where}: field name must be a non-empty name")
        price = raw["price"]
        if (
            isinstance(price, bool)
            or not isinstance(price, (int, float))
            or not (math.isfinite(price) and price >= 0)
        ):
            raise InputError(f"{where}: field price: {price!r} is not a number >= 0")
        desired = raw["desired"]
        if isinstance(desired, bool) or not isinstance(desired, int) or desired < 0:
            raise InputError(f"{where}: field desired: {desired!r} is not a whole number >= 0")
        hostlist = raw["nodes"]
        if not isinstance(hostlist, str) or not hostlist.strip():
            raise InputError(f"{where}: field nodes must be a Slurm hostlist such as node-[0-1]")
        nodes = tuple(expand(hostlist))
        if desired > len(nodes):
            raise InputError(
                f"{where}: field desired: {desired} is more than its {len(nodes)} nodes"
            )
        for node in nodes:
            if node in owner:
                raise InputError(f"{where}: field nodes: {node} is already in site {owner[node]}")
            owner[node] = name
        found.append(SiteNodes(CloudSite(name, float(price), desired, len(nodes)), nodes))
    if not found:
        raise InputError(f"{source}: field sites: no site")
    names = [s.site.name for s in found]
    if len(set(names)) != len(names):
        raise InputError(f"{source}: field sites: duplicate site names in {names}")
    return tuple(found)
