"""Gathering a ledger's inputs from a live cluster, from the workstation.

- The runs: ``sacct`` on the Slurm controller, over the one SSH seam (:mod:`elastic.remote`),
  with the node lists expanded by ``scontrol show hostnames`` there, in one call.
- The pool's history: the manager's whole event log (``GET /v1/events``, a page at a time),
  through :func:`elastic.manager.workstation.open_manager`; the holds before the period tell who
  held each node when it began.
- The sites: the file given, else the head's current sites file (the rebalancing round's,
  ``elastic.node_paths.SITES_FILE``), read with :func:`elastic.slurm.sites.parse_sites`; with
  neither, the pool is the one site ``local``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from elastic import node_paths
from elastic.errors import InputError, PtcError
from elastic.ledger import period, pool, runs
from elastic.ledger.records import LOCAL, Ledger, Site, build
from elastic.manager.workstation import controller, open_manager
from elastic.remote import ssh
from elastic.slurm.sites import parse_sites

PAGE = 1000  # events per request
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Cluster:
    """Where an experiment's Slurm controller and managers are reached from."""

    inventory: Path
    ssh_config: Path


def expand_hostlists(cluster: Cluster, head: str, hostlists: Sequence[str]) -> dict[str, list[str]]:
    """Each Slurm hostlist -> its node names, by ``scontrol show hostnames`` on ``head``."""
    wanted = sorted({h for h in hostlists if h and h != "None assigned"})
    if not wanted:
        return {}
    script = "; ".join(
        f"printf '%s\\t' {shlex.quote(h)}; scontrol show hostnames {shlex.quote(h)} | "
        "tr '\\n' ' '; echo"
        for h in wanted
    )
    out = ssh.run(cluster.ssh_config, head, script, timeout=TIMEOUT_S)
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        hostlist, sep, names = line.partition("\t")
        if sep:
            found[hostlist] = names.split()
    missing = [h for h in wanted if not found.get(h)]
    if missing:
        raise PtcError(f"{head}: scontrol could not expand {', '.join(missing)}")
    return found


def events(cluster: Cluster) -> list[dict[str, Any]]:
    """The manager's whole event log, oldest first, read with the observer's token (it only
    reads)."""
    log: list[dict[str, Any]] = []
    with open_manager(cluster.inventory, cluster.ssh_config, observer=True) as manager:
        while True:
            page = manager.events(len(log), PAGE)
            log += page
            if len(page) < PAGE:
                return log


def sites(cluster: Cluster, head: str, sites_file: Path | None) -> dict[str, Site]:
    """Node -> its site, from ``sites_file`` or the head's current sites file ({} for none)."""
    if sites_file is not None:
        try:
            text, source = sites_file.read_text(encoding="utf-8"), f"--sites {sites_file}"
        except OSError as err:
            raise InputError(f"--sites {sites_file}: cannot read it ({err.strerror})") from err
    else:
        found = ssh.execute(
            cluster.ssh_config, head, f"cat {node_paths.SITES_FILE}", timeout=TIMEOUT_S
        )
        if found.returncode != 0:
            return {}
        text, source = found.text, f"{head}:{node_paths.SITES_FILE}"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputError(f"{source}: not YAML ({err})") from err
    parsed = parse_sites(
        data, lambda hostlist: expand_hostlists(cluster, head, [hostlist])[hostlist], source
    )
    return {node: Site(s.site.name, s.site.price) for s in parsed for node in s.nodes}


def collect(
    experiment: str,
    cluster: Cluster,
    since: float,
    until: float,
    *,
    sites_file: Path | None = None,
    local_price: float = 0.0,
    borrowers: Mapping[str, str] | None = None,
    round_hours: bool = False,
) -> Ledger:
    """The ledger of ``experiment`` from ``since`` to ``until`` (epoch s), read live."""
    if local_price < 0:
        raise InputError(f"--price {local_price}: must be a number >= 0")
    head = controller(cluster.inventory, "to read its accounting from")
    text = ssh.run(
        cluster.ssh_config,
        head,
        runs.command(period.iso(since), period.iso(until)),
        timeout=TIMEOUT_S,
    )
    found = runs.parse_runs(text)
    expand = expand_hostlists(cluster, head, [r.nodelist for r in found])
    history = pool.fold(events(cluster))
    return build(
        experiment,
        since,
        until,
        found,
        history,
        sites=sites(cluster, head, sites_file),
        local=Site(LOCAL, local_price),
        expand=expand,
        borrowers=borrowers,
        round_hours=round_hours,
    )
