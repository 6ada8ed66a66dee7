"""A pool of several sites: each node's resume, suspend and repair go to its site's provider.

The client's provisioner (``provisioner: elastic.slurm.site_dispatch:from_settings``) is one
:class:`~elastic.slurm.provision.PlaybookProvisioner` per site of the sites file the deploy put
on the controller (``sites_file``), each with its site's operation and node control, and the
client's own provisioner (``node_operation``, ``node_control``) for nodes in no site. Without a
sites file it is that one provisioner, as the one site ``pool``.

Every site is asked for its own nodes only, and one site's failure fails only its nodes: the
others' resume goes on, and the failures of all come back together, each node with its reason,
as a single provisioner's would.

A site that answers a resume with no capacity is paused (``elastic.slurm.breaker``): until the
pause is over its nodes fail at once, as no capacity, without the site being asked, and
``held_back`` names them so that the client keeps Slurm from choosing them. The next resume
there after the pause probes the site with one node first: if it works the site is whole
again and the others follow; if not, the site is paused again, twice as long.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic.errors import InputError, PtcError
from elastic.slurm import hostlist
from elastic.slurm.breaker import FIRST_PAUSE_S, MOST_PAUSE_S, Pause, SiteBreaker, SiteState
from elastic.slurm.client import Provisioner, failures_by_node
from elastic.slurm.growth_gate import GrowthGate
from elastic.slurm.provision import (
    PlaybookProvisioner,
    ProvisionFailed,
    control_of,
    provisioner_settings,
)
from elastic.slurm.sites import POOL_SITE, SiteNodes, load_sites

# The site of the nodes in no site of the sites file (all of them without one): its pauses and
# its reservation go by this name, which no site of the file may take.
POOL = POOL_SITE
# The Slurm reservation that holds a paused site's nodes back is named this plus the site.
PAUSED_PREFIX = "ptc-paused-"

# A site's operation as the provisioner carries it out, for providers whose words differ:
# an EC2 instance terminated at suspend is a machine given back, launched anew at resume.
_OPERATION = {("ec2", "terminate"): "release", ("ec2", "stop"): "power"}


@dataclass
class SitesProvisioner:
    """``sites``: each site with its provisioner; ``rest``: the provisioner of nodes in no
    site; ``breaker``: the sites' pauses."""

    sites: Sequence[tuple[SiteNodes, Provisioner]]
    rest: Provisioner
    breaker: SiteBreaker = field(default_factory=lambda: SiteBreaker(None))
    growth: GrowthGate | None = None  # the sites a pool grows onto, chosen by a policy
    repairs: bool = field(init=False)  # whether any site's provisioner can mend a node

    def __post_init__(self) -> None:
        self.repairs = any(p.repairs for _, p in self.sites) or self.rest.repairs

    def _split(self, nodes: Sequence[str]) -> Iterator[tuple[str, Provisioner, list[str]]]:
        """Each provisioner with its share of ``nodes``, in the sites' order, the rest last."""
        left = list(nodes)
        for site, provisioner in self.sites:
            mine = [n for n in left if n in site.nodes]
            left = [n for n in left if n not in site.nodes]
            if mine:
                yield site.name, provisioner, mine
        if left:
            yield POOL, self.rest, left

    def _each(
        self,
        step: str,
        nodes: Sequence[str],
        act: Callable[[Provisioner, list[str]], Any],
        *,
        paused: bool = False,
    ) -> None:
        """``act`` on every site's share; the failures of all, together, after all ran.
        ``paused``: a paused site is not asked (its nodes fail as no capacity), a site that
        answers with no capacity is paused, and one that did the step is whole again."""
        failed: dict[str, str] = {}
        short: set[str] = set()
        for site, provisioner, mine in self._split(nodes):
            where = f"site {site}: " if site != POOL else ""
            state = self.breaker.state(site) if paused else SiteState.CLOSED
            pause = self.breaker.pauses().get(site) if state is SiteState.OPEN else None
            if pause is not None:  # (a pause another process just ended lets the site be asked)
                failed.update(dict.fromkeys(mine, where + _paused(pause)))
                short.update(mine)
                continue
            untried: list[str] = []  # the others, while one node probes the site
            try:
                if state is SiteState.PROBE and len(mine) > 1:
                    untried = mine[1:]
                    act(provisioner, mine[:1])
                    self.breaker.reset(site)
                    state, mine, untried = SiteState.CLOSED, untried, []
                act(provisioner, mine)
            except PtcError as err:
                by_node = failures_by_node(err, mine)
                full = set(getattr(err, "capacity", ())) & set(by_node)
                if paused and full:
                    pause = self.breaker.trip(site, by_node[sorted(full)[0]])
                    full |= set(untried)
                    by_node |= dict.fromkeys(full, _paused(pause))
                else:
                    # not their fault: back powered down, like a site without room
                    by_node |= dict.fromkeys(untried, "not tried: the probe node failed")
                    full |= set(untried)
                failed.update({n: where + why for n, why in by_node.items()})
                short.update(full)
                continue
            if state is SiteState.PROBE:
                self.breaker.reset(site)
        if failed:
            raise ProvisionFailed(step, failed, capacity=short)

    def power_on(self, nodes: Sequence[str]) -> None:
        self._each("power on", nodes, lambda p, mine: p.power_on(mine), paused=True)

    def configure(self, nodes: Sequence[str]) -> None:
        self._each("configure", nodes, lambda p, mine: p.configure(mine))

    def power_off(self, nodes: Sequence[str]) -> None:
        self._each("power off", nodes, lambda p, mine: p.power_off(mine))

    def held_back(
        self,
        nodes: Sequence[str],
        states: Mapping[str, str] | None = None,
        demand: int = 0,
        asked: frozenset[str] = frozenset(),
    ) -> dict[str, list[str]]:
        """Those of ``nodes`` (the pool) that Slurm must not resume now, by the reservation
        that holds them: ``ptc-paused-SITE``, every node of a site paused now (``pool`` for
        those in no site; once a pause is over none is held back, and the next resume there
        probes the site with one node); with a growth policy, ``ptc-gated-SITE``, the free
        nodes of the sites it does not grow onto for the waiting jobs' ``demand`` (nodes),
        from the nodes' Slurm ``states``, but never those of a site a waiting job asks for by
        name (``asked``: the features of their constraints)."""
        held = {
            PAUSED_PREFIX + site: mine
            for site, _, mine in self._split(nodes)
            if self.breaker.state(site) is SiteState.OPEN
        }
        if self.growth is None or not self.sites or states is None:
            return held
        closed = frozenset(name.removeprefix(PAUSED_PREFIX) for name in held)
        return held | self.growth.held_back(
            [s for s, _ in self.sites], states, demand, closed, asked
        )

    @property
    def powers(self) -> bool:
        return any(p.powers for _, p in self.sites) or self.rest.powers

    def running(self, nodes: Sequence[str]) -> list[str]:
        return [n for _, p, mine in self._split(nodes) for n in p.running(mine)]

    def lent(self, nodes: Sequence[str]) -> list[str]:
        return [n for _, p, mine in self._split(nodes) for n in p.lent(mine)]

    def power_off_if(
        self, nodes: Sequence[str], still: Callable[[list[str]], list[str]]
    ) -> list[str]:
        return [n for _, p, mine in self._split(nodes) for n in p.power_off_if(mine, still)]

    def check(self) -> str:
        """Every site's control, checked; the first refusal raises, naming its site."""
        if not self.sites:
            return self.rest.check()
        lines = []
        for site, provisioner in self.sites:
            try:
                said = provisioner.check()
            except PtcError as err:
                raise type(err)(f"site {site.name} ({site.provider}): {err}") from err
            operation = getattr(provisioner, "node_operation", site.operation)
            lines.append(f"site {site.name} ({site.provider}, {operation}): {said}")
        return "\n".join(lines)

    def renew(self, nodes: Sequence[str]) -> bool:
        """Fresh disks where the site's control gives them; True only when every node got one."""
        renewed: list[bool] = []
        self._each("reload", nodes, lambda p, mine: renewed.append(p.renew(mine)))
        return all(renewed)

    def provision(self, nodes: Sequence[str], *, start: bool) -> None:
        self._each("configure", nodes, lambda p, mine: p.provision(mine, start=start))


def from_settings(settings: Any) -> Provisioner:
    """The client's provisioner: with ``sites_file`` in its settings, one per site of that
    file and the settings' own for the nodes in none; else the settings' own.
    ``site_pause: {file, first, most}``: where the sites' pauses are kept, and how long;
    ``growth_policy``: ``cheapest`` or ``mycluster`` (``elastic.slurm.growth_gate``), or
    none (Slurm's own choice)."""
    extra: dict[str, Any] = dict(getattr(settings, "extra", {}) or {})
    raw_path = extra.pop("sites_file", None)
    breaker = _breaker(extra.pop("site_pause", None) or {})
    growth_policy = str(extra.pop("growth_policy", "") or "")
    own = provisioner_settings(extra)
    rest = PlaybookProvisioner(**own)
    if not raw_path:
        return SitesProvisioner((), rest, breaker)  # one site, the pool: paused all the same
    path = Path(str(raw_path))
    if not path.is_file():
        # the deploy writes it before the client starts; a missing one is a broken install
        raise InputError(f"provisioner: sites_file {path}: missing")
    sites = load_sites(path, hostlist.expand)
    built = []
    for site in sites:
        operation = _OPERATION.get((site.provider, site.operation), site.operation)
        operation = operation or own["node_operation"]
        control = control_of(site, extra, f"sites file {path}: {site.name}")
        fields = {**own, "node_operation": operation, "control": control}
        try:
            built.append((site, PlaybookProvisioner(**fields)))
        except InputError as err:
            raise InputError(f"sites file {path}: site {site.name}: {err}") from err
    try:
        growth = GrowthGate(growth_policy) if growth_policy else None
    except InputError as err:
        raise InputError(f"provisioner: growth_policy: {err}") from err
    return SitesProvisioner(tuple(built), rest, breaker, growth)


def _breaker(raw: Any) -> SiteBreaker:
    """The sites' pauses from ``site_pause: {file, first, most}`` (seconds)."""
    if not isinstance(raw, dict) or set(raw) - {"file", "first", "most"}:
        raise InputError("provisioner: site_pause: expected a mapping of file, first and most")
    try:
        return SiteBreaker(
            Path(raw["file"]) if raw.get("file") else None,
            first=float(raw.get("first", FIRST_PAUSE_S)),
            most=float(raw.get("most", MOST_PAUSE_S)),
        )
    except (TypeError, ValueError) as err:
        raise InputError(f"provisioner: site_pause: {err}") from err


def _paused(pause: Pause) -> str:
    until = time.strftime("%H:%M:%S", time.localtime(pause.until))
    return f"no capacity, site paused until {until} ({pause.reason})"[:240]
