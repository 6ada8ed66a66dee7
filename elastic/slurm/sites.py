"""The sites of an elastic pool: each a set of Slurm nodes behind one provider, with a price per
node-hour. One sites file is given at deploy (``ptc deploy NAME -e elastic_sites_file=FILE``);
the controller keeps it, ResumeProgram and SuspendProgram send each node to its site's provider,
slurm.conf gives each node its site as a feature (``sbatch --constraint=SITE``), and the
rebalancing round and the ledger read the same file. A sites file (YAML)::

    sites:
      - name: here             # letters, digits and dashes: also the nodes' Slurm feature
        provider: local        # local (default), cloudlab or ec2
        price: 1.0             # per node-hour, any currency: excess cost is counted in it
        nodes: node-[0-1]      # a Slurm hostlist; no node in two sites
        operation: power       # what a suspend does (default: a local site follows the
                               #   deploy's elastic_node_operation; others their provider's first)
        max_nodes: 2           # at most this many running at once (default: all its nodes)
        desired: 2             # the rebalancing round's target (needed only by the round)
      - name: portal
        provider: cloudlab
        price: 0.5
        nodes: node-[2-3]
        cloudlab: {experiment: "proj,name"}   # the portal settings (elastic.testbed...portal)
      - name: cloud
        provider: ec2
        price: 3.0
        nodes: node-[4-5]
        operation: terminate
        ec2: {region: us-east-1, image_id: ami-0123456789abcdef0, instance_type: c5.large}

What each provider's operations mean:

- ``local`` (the local testbed's machines, through its control service): ``power`` stops and
  starts the machine, ``reload`` also gives it a fresh disk at resume, ``release`` parks it in
  the testbed's free pool (see ``elastic.slurm.provision``);
- ``cloudlab`` (the experiment's own nodes, through CloudLab's Portal API): ``power``;
- ``ec2``: ``terminate`` ends the instance at suspend and launches a new one at resume;
  ``stop`` stops and starts it.

Sites are listed in preference order: with equal deficits, an earlier site gets the new nodes.
Everything is checked before anything uses the file; every error names the file, the site and
the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from elastic.errors import InputError
from elastic.policies import CloudSite
from elastic.sites.ec2.settings import SITE_FIELDS as EC2_SITE_FIELDS
from elastic.sites.ec2.settings import Ec2Settings, check_name, parse_site
from elastic.slurm import hostlist

# The name of the site of the pool's nodes in no site of the file (its pauses, its Slurm
# reservation): no site of the file may take it.
POOL_SITE = "pool"
# Each provider's operations for a suspend and the resume after it, its default first.
PROVIDERS: dict[str, tuple[str, ...]] = {
    "local": ("power", "reload", "release"),
    "cloudlab": ("power",),
    "ec2": ("terminate", "stop"),
}
# Settings a provider takes beside the common fields, under a key named after it.
_CLOUDLAB_FIELDS = frozenset({"url", "experiment", "timeout", "poll_interval"})
_EC2_FIELDS = frozenset({"region", "endpoint_url", "cpus", "memory_mb"} | EC2_SITE_FIELDS) - {
    "price_per_node_hour",
    "max_nodes",
}
_FIELDS = frozenset(
    {"name", "provider", "price", "nodes", "operation", "max_nodes", "desired", *PROVIDERS}
)
_REQUIRED = ("name", "price", "nodes")


@dataclass(frozen=True)
class SiteNodes:
    """One site: its name, price and counts (``site``), its nodes, and who runs them."""

    site: CloudSite
    nodes: tuple[str, ...]
    provider: str = "local"
    operation: str = ""  # "": the client's own node_operation (a local site)
    settings: Mapping[str, Any] = field(default_factory=dict)  # the provider's own

    @property
    def name(self) -> str:
        return self.site.name

    def ec2_settings(self) -> Ec2Settings:
        """An ``ec2`` site's settings as the EC2 provider takes them."""
        if self.provider != "ec2":
            raise InputError(f"site {self.name}: provider {self.provider}, not ec2")
        raw = {k: v for k, v in self.settings.items() if k not in ("cpus", "memory_mb")}
        region, endpoint = raw.pop("region", ""), raw.pop("endpoint_url", None)
        site = parse_site(
            self.name,
            {**raw, "price_per_node_hour": self.site.price, "max_nodes": self.site.capacity},
        )
        return Ec2Settings(region=str(region), sites={self.name: site}, endpoint_url=endpoint)


def load_sites(
    path: Path, expand: Callable[[str], list[str]], *, need_desired: bool = False
) -> tuple[SiteNodes, ...]:
    """``expand`` turns a hostlist into names (``Slurm.expand``, or ``hostlist.expand``)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"sites file {path}: cannot read it ({err.strerror})") from err
    except yaml.YAMLError as err:
        raise InputError(f"sites file {path}: not YAML ({err})") from err
    return parse_sites(data, expand, f"sites file {path}", need_desired=need_desired)


def parse_sites(
    data: Any,
    expand: Callable[[str], list[str]],
    source: str = "sites",
    *,
    need_desired: bool = False,
) -> tuple[SiteNodes, ...]:
    """The sites of ``data`` (a parsed sites file). ``need_desired``: every site must say how
    many nodes it wants (the rebalancing round's target)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("sites"), Sequence):
        raise InputError(f"{source}: field sites must be a list of sites")
    found: list[SiteNodes] = []
    owner: dict[str, str] = {}
    for index, raw in enumerate(data["sites"]):
        where = f"{source}: sites[{index}]"
        if isinstance(raw, Mapping) and isinstance(raw.get("name"), str) and raw["name"]:
            where += f" ({raw['name']})"
        site = _site(raw, where, expand, need_desired)
        for node in site.nodes:
            if node in owner:
                raise InputError(f"{where}: field nodes: {node} is already in site {owner[node]}")
            owner[node] = site.name
        found.append(site)
    if not found:
        raise InputError(f"{source}: field sites: no site")
    names = [s.name for s in found]
    if len(set(names)) != len(names):
        raise InputError(f"{source}: field sites: duplicate site names in {names}")
    return tuple(found)


def _site(
    raw: Any, where: str, expand: Callable[[str], list[str]], need_desired: bool
) -> SiteNodes:
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: must be a mapping with {', '.join(_REQUIRED)}")
    unknown = sorted(set(map(str, raw)) - _FIELDS)
    if unknown:
        raise InputError(f"{where}: field {unknown[0]}: not known (known: {sorted(_FIELDS)})")
    for key in (*_REQUIRED, *(("desired",) if need_desired else ())):
        if key not in raw:
            raise InputError(f"{where}: field {key} is missing")
    name = check_name(raw["name"], f"{where}: field name")
    if name == POOL_SITE:
        raise InputError(f"{where}: field name: {POOL_SITE!r} names the nodes in no site")
    provider = raw.get("provider", "local")
    if provider not in PROVIDERS:
        raise InputError(
            f"{where}: field provider: {provider!r} is not one of {', '.join(PROVIDERS)}"
        )
    price = raw["price"]
    if (
        isinstance(price, bool)
        or not isinstance(price, (int, float))
        or not (math.isfinite(price) and price >= 0)
    ):
        raise InputError(f"{where}: field price: {price!r} is not a number >= 0")
    hostlist = raw["nodes"]
    if not isinstance(hostlist, str) or not hostlist.strip():
        raise InputError(f"{where}: field nodes must be a Slurm hostlist such as node-[0-1]")
    try:
        nodes = tuple(expand(hostlist))
    except InputError as err:
        raise InputError(f"{where}: field nodes: {err}") from err
    if not nodes:
        raise InputError(f"{where}: field nodes: {hostlist!r} names no node")
    max_nodes = _count(raw.get("max_nodes", len(nodes)), f"{where}: field max_nodes")
    if not 1 <= max_nodes <= len(nodes):
        raise InputError(
            f"{where}: field max_nodes: {max_nodes} is not between 1 and its {len(nodes)} nodes"
        )
    desired = _count(raw.get("desired", 0), f"{where}: field desired")
    if desired > max_nodes:
        raise InputError(f"{where}: field desired: {desired} is more than max_nodes {max_nodes}")
    operations = PROVIDERS[provider]
    # a local site follows the client's own node_operation unless it says otherwise
    operation = raw.get("operation", "" if provider == "local" else operations[0])
    if operation and operation not in operations:
        raise InputError(
            f"{where}: field operation: {operation!r}: provider {provider} offers "
            f"{', '.join(operations)}"
        )
    for other in PROVIDERS:
        if other != provider and other in raw:
            raise InputError(
                f"{where}: field {other}: settings for provider {other}, not {provider}"
            )
    settings = raw.get(provider, {}) or {}
    if not isinstance(settings, Mapping):
        raise InputError(f"{where}: field {provider}: must be a mapping of settings")
    site = SiteNodes(
        CloudSite(name, float(price), desired, max_nodes),
        nodes,
        provider,
        str(operation),
        dict(settings),
    )
    _check_settings(site, where)
    return site


def _check_settings(site: SiteNodes, where: str) -> None:
    known = {"local": frozenset(), "cloudlab": _CLOUDLAB_FIELDS, "ec2": _EC2_FIELDS}[site.provider]
    if unknown := sorted(set(map(str, site.settings)) - known):
        raise InputError(
            f"{where}: field {site.provider}.{unknown[0]}: not known"
            + (f" (known: {', '.join(sorted(known))})" if known else "")
        )
    if site.provider != "ec2":
        return
    for key in ("region", "image_id", "instance_type"):
        if key not in site.settings:
            raise InputError(f"{where}: field ec2.{key} is missing")
    for key in ("cpus", "memory_mb"):
        if key in site.settings:
            _count(site.settings[key], f"{where}: field ec2.{key}", least=1)
    try:
        site.ec2_settings()
    except InputError as err:
        # the EC2 settings name a field as sites.NAME.FIELD (a site's) or FIELD (the region's)
        raise InputError(
            f"{where}: field ec2.{str(err).removeprefix(f'sites.{site.name}.')}"
        ) from err


def _count(value: Any, where: str, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InputError(f"{where}: {value!r} is not a whole number >= {least}")
    return value


def site_of(sites: Sequence[SiteNodes]) -> dict[str, SiteNodes]:
    """Each node's site."""
    return {node: site for site in sites for node in site.nodes}


def features(sites: Sequence[SiteNodes]) -> dict[str, list[str]]:
    """Each node's Slurm features from its site (slurm.conf's ``Features=``)."""
    return {node: [site.name] for site in sites for node in site.nodes}


def cloud_nodes(sites: Sequence[SiteNodes]) -> list[dict[str, Any]]:
    """The nodes of the sites whose machines the provider makes (not the experiment's own), as
    slurm.conf and the manager's pool list them: name, site, CPUs and memory (0: not said)."""
    return [
        {
            "name": node,
            "site": site.name,
            "cpus": int(site.settings.get("cpus", 0)),
            "memory_mb": int(site.settings.get("memory_mb", 0)),
        }
        for site in sites
        if site.provider not in OWN_NODES
        for node in site.nodes
    ]


def check_same_providers(
    deployed: Sequence[SiteNodes], proposed: Sequence[SiteNodes], source: str
) -> None:
    """A sites file given to the rebalancing round may change prices, counts and which nodes
    a site of one provider holds; who runs a node is the deploy's: a site's provider,
    operation and provider settings, and each node's provider, stay as deployed."""
    before = {s.name: s for s in deployed}
    provider_of = {n: s.provider for s in deployed for n in s.nodes}
    for index, site in enumerate(proposed):
        where = f"{source}: sites[{index}] ({site.name})"
        old = before.get(site.name)
        if old is None and site.provider != "local":
            raise InputError(
                f"{where}: field provider: a new {site.provider} site needs a deploy "
                "(ptc deploy NAME -e elastic_sites_file=FILE)"
            )
        if old is not None:
            for name in ("provider", "operation", "settings"):
                if getattr(site, name) != getattr(old, name):
                    shown = site.provider if name == "settings" else name
                    raise InputError(
                        f"{where}: field {shown}: differs from the deployed site's; "
                        "a deploy changes it"
                    )
        if moved := [n for n in site.nodes if provider_of.get(n, "local") != site.provider]:
            raise InputError(
                f"{where}: field nodes: {moved[0]} is a {provider_of[moved[0]]} node as deployed"
            )


# The providers whose sites are made of the experiment's own nodes (the others' are the
# provider's instances, named in the sites file only).
OWN_NODES = frozenset({"local", "cloudlab"})
# The providers the controller's ResumeProgram and SuspendProgram reach.
HOOKED = frozenset({"local", "cloudlab", "ec2"})
# What an ec2 site must name before a deploy sends Slurm's hooks to it: only an endpoint that
# was tested (the emulated region) is reached; AWS itself has not been.
EC2_NEEDS = ("endpoint_url", "region", "image_id")
# The deploy's variable naming the AWS shared-credentials file the controller gets.
EC2_CREDENTIALS_VARIABLE = "elastic_ec2_credentials_src"


def check_for_deploy(
    path: Path, compute_nodes: Sequence[str], ec2_credentials: str | Path | None = None
) -> tuple[SiteNodes, ...]:
    """The sites file ``path`` (``elastic_sites_file``) read and checked on the machine that
    deploys (no scontrol there: hostlists are expanded by ``hostlist``), before anything
    changes: every node of a site made of the experiment's own nodes
    is one of its ``compute_nodes``; an ec2 site needs ``ec2_credentials``
    (``elastic_ec2_credentials_src``, a file on this machine) and its endpoint, region and
    image."""
    sites = load_sites(path, hostlist.expand)
    known = set(compute_nodes)
    for index, site in enumerate(sites):
        where = f"sites file {path}: sites[{index}] ({site.name})"
        if site.provider not in HOOKED:
            raise InputError(
                f"{where}: field provider: Slurm's hooks cannot reach {site.provider} yet (they "
                f"reach {', '.join(sorted(HOOKED))})"
            )
        if site.provider == "ec2":
            _check_ec2_for_deploy(site, where, ec2_credentials)
        if site.provider in OWN_NODES and (stray := [n for n in site.nodes if n not in known]):
            raise InputError(
                f"sites file {path}: sites[{index}] ({site.name}): field nodes: {stray[0]} is "
                f"not a compute node of the experiment (it has {', '.join(compute_nodes)})"
            )
    return sites


def _check_ec2_for_deploy(site: SiteNodes, where: str, credentials: str | Path | None) -> None:
    for key in EC2_NEEDS:
        if not site.settings.get(key):
            raise InputError(
                f"{where}: field ec2.{key} is missing: Slurm's hooks reach an ec2 site only "
                f"with its {', '.join(EC2_NEEDS)}"
            )
    if not credentials:
        raise InputError(
            f"{where}: provider ec2: no AWS credentials given; name a shared-credentials file "
            f"with -e {EC2_CREDENTIALS_VARIABLE}=FILE"
        )
    source = Path(str(credentials)).expanduser()
    if not source.is_file():
        raise InputError(
            f"{where}: provider ec2: {EC2_CREDENTIALS_VARIABLE}: {source} is not a file"
        )
