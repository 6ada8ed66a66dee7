"""A pool of several sites: each node goes to its site's provisioner, one site's failure fails
only its nodes, and the client's settings with a sites file build one provisioner per site."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from elastic.errors import InputError
from elastic.slurm import hostlist
from elastic.slurm.provision import PlaybookProvisioner, ProvisionFailed
from elastic.slurm.site_dispatch import SitesProvisioner, from_settings
from elastic.slurm.sites import parse_sites
from elastic.testbed.backends.cloudlab.portal import PortalControl
from elastic.testbed.backends.local.control.client import ControlClient


@dataclass
class Recorder:
    """A provisioner that records what it was asked, and fails the nodes in ``broken``."""

    name: str
    calls: list[tuple[str, str, list[str]]]
    broken: frozenset[str] = frozenset()
    repairs: bool = True
    powers: bool = True
    node_operation: str = "power"
    full: bool = False  # the site has no room: every operation fails as no capacity

    def _do(self, step: str, nodes: Sequence[str]) -> None:
        self.calls.append((self.name, step, list(nodes)))
        if bad := [n for n in nodes if n in self.broken]:
            raise ProvisionFailed(step, dict.fromkeys(bad, f"{self.name} refused"))
        if self.full:
            raise ProvisionFailed(step, dict.fromkeys(nodes, "0 free"), capacity=nodes)

    def power_on(self, nodes: Sequence[str]) -> None:
        self._do("power on", nodes)

    def configure(self, nodes: Sequence[str]) -> None:
        self._do("configure", nodes)

    def power_off(self, nodes: Sequence[str]) -> None:
        self._do("power off", nodes)

    def running(self, nodes: Sequence[str]) -> list[str]:
        return [n for n in nodes if n.endswith("0")]

    def lent(self, nodes: Sequence[str]) -> list[str]:
        return []

    def power_off_if(
        self, nodes: Sequence[str], still: Callable[[list[str]], list[str]]
    ) -> list[str]:
        chosen = still(list(nodes))
        self._do("power off", chosen)
        return chosen

    def check(self) -> str:
        return f"{self.name} ok"

    def renew(self, nodes: Sequence[str]) -> bool:
        self._do("reload", nodes)
        return self.name != "portal"

    def provision(self, nodes: Sequence[str], *, start: bool) -> None:
        self._do("provision", nodes)


ALL = ["node-0", "node-1", "node-2", "node-3", "node-9"]  # the pool, node-9 in no site
SITES = parse_sites(
    {
        "sites": [
            {"name": "here", "price": 1, "nodes": "node-[0-1]"},
            {"name": "portal", "provider": "cloudlab", "price": 2, "nodes": "node-[2-3]"},
        ]
    },
    hostlist.expand,
)


def pool(
    calls: list[tuple[str, str, list[str]]], broken: frozenset[str] = frozenset()
) -> SitesProvisioner:
    here, portal = SITES
    return SitesProvisioner(
        ((here, Recorder("here", calls, broken)), (portal, Recorder("portal", calls, broken))),
        Recorder("rest", calls, broken),
    )


def test_each_node_goes_to_its_site_and_the_rest_to_the_default() -> None:
    calls: list[tuple[str, str, list[str]]] = []
    sites = pool(calls)
    sites.power_on(["node-3", "node-0", "node-9", "node-1"])
    assert calls == [
        ("here", "power on", ["node-0", "node-1"]),
        ("portal", "power on", ["node-3"]),
        ("rest", "power on", ["node-9"]),
    ]
    assert sites.running(["node-0", "node-2", "node-10"]) == ["node-0", "node-10"]
    assert sites.check() == (
        "site here (local, power): here ok\nsite portal (cloudlab, power): portal ok"
    )


def test_one_site_failing_fails_its_nodes_only_after_every_site_was_asked() -> None:
    calls: list[tuple[str, str, list[str]]] = []
    sites = pool(calls, broken=frozenset({"node-1"}))
    with pytest.raises(ProvisionFailed) as caught:
        sites.configure(["node-1", "node-0", "node-2"])
    assert caught.value.failures == {"node-1": "site here: here refused"}
    assert [c[0] for c in calls] == ["here", "portal"]  # the portal's node was still configured


def test_renew_is_true_only_when_every_site_gave_fresh_disks() -> None:
    calls: list[tuple[str, str, list[str]]] = []
    assert pool(calls).renew(["node-0"]) is True
    assert pool(calls).renew(["node-0", "node-2"]) is False


def write_sites(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sites.yml"
    path.write_text(text)
    return path


def settings(**extra: object) -> SimpleNamespace:
    return SimpleNamespace(extra={"node_operation": "power", **extra})


def test_from_settings_builds_one_provisioner_per_site_with_its_operation(tmp_path: Path) -> None:
    path = write_sites(
        tmp_path,
        "sites:\n"
        "  - {name: cheap, price: 1, nodes: 'node-[0-1]'}\n"
        "  - {name: fresh, price: 2, nodes: 'node-[2-3]', operation: reload}\n"
        "  - {name: portal, provider: cloudlab, price: 3, nodes: node-4,\n"
        "     cloudlab: {experiment: 'proj,exp'}}\n",
    )
    token = tmp_path / "portal.token"
    built = from_settings(
        settings(
            sites_file=str(path),
            node_control={
                "kind": "cloudlab_portal",
                "token_file": str(token),
                "experiment": "proj,other",
                "url": "http://127.0.0.1:9",
            },
        )
    )
    assert isinstance(built, SitesProvisioner)
    by_name = {site.name: p for site, p in built.sites}
    assert isinstance(by_name["cheap"], PlaybookProvisioner)
    assert isinstance(by_name["fresh"], PlaybookProvisioner)
    assert isinstance(by_name["portal"], PlaybookProvisioner)
    assert by_name["cheap"].node_operation == "power"
    assert by_name["fresh"].node_operation == "reload"
    assert isinstance(by_name["cheap"].control, ControlClient)
    portal = by_name["portal"].control
    assert isinstance(portal, PortalControl)
    assert portal.settings.experiment == "proj,exp"  # the site's, not the client's default
    assert portal.settings.token_file == token


def test_without_a_sites_file_it_is_the_client_s_own_provisioner_as_one_site() -> None:
    built = from_settings(settings())
    assert isinstance(built, SitesProvisioner) and built.sites == ()
    assert isinstance(built.rest, PlaybookProvisioner)


def test_a_cloudlab_site_without_a_portal_token_is_refused_naming_the_site(
    tmp_path: Path,
) -> None:
    path = write_sites(
        tmp_path, "sites:\n  - {name: portal, provider: cloudlab, price: 1, nodes: node-0}\n"
    )
    with pytest.raises(
        InputError, match=r"sites file .*: portal: provider cloudlab: .* no portal token"
    ):
        from_settings(settings(sites_file=str(path)))


def test_a_missing_sites_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"sites_file .*missing"):
        from_settings(settings(sites_file=str(tmp_path / "none.yml")))


def test_a_site_without_room_is_paused_not_asked_then_probed_with_one_node(
    tmp_path: Path,
) -> None:
    from elastic.slurm.breaker import SiteBreaker

    now = [1000.0]
    calls: list[tuple[str, str, list[str]]] = []
    here, portal = SITES
    full = Recorder("portal", calls, full=True)
    sites = SitesProvisioner(
        ((here, Recorder("here", calls)), (portal, full)),
        Recorder("rest", calls),
        SiteBreaker(tmp_path / "pauses.json", first=60, most=600, clock=lambda: now[0]),
    )
    with pytest.raises(ProvisionFailed) as caught:
        sites.power_on(["node-0", "node-2"])
    assert caught.value.capacity == {"node-2"} and "node-0" not in caught.value.failures
    assert caught.value.failures["node-2"].startswith("site portal: no capacity, site paused")
    assert sites.held_back(ALL) == {"ptc-paused-portal": ["node-2", "node-3"]}
    asked = len(calls)
    with pytest.raises(ProvisionFailed) as again:
        sites.power_on(["node-3"])  # paused: failed at once, the site not asked
    assert again.value.capacity == {"node-3"} and len(calls) == asked
    now[0] += 60
    assert sites.held_back(ALL) == {}  # the pause is over: the next resume probes the site
    del calls[:]
    with pytest.raises(ProvisionFailed) as probed:
        sites.power_on(["node-2", "node-3"])  # the probe fails: paused twice as long
    assert calls == [("portal", "power on", ["node-2"])]  # one node tried, not both
    assert probed.value.capacity == {"node-2", "node-3"}
    assert sites.breaker.pauses()["portal"].backoff == 120
    assert sites.held_back(ALL) == {"ptc-paused-portal": ["node-2", "node-3"]}
    now[0] += 120
    full.full = False
    del calls[:]
    sites.power_on(["node-2", "node-3"])  # the probe works: whole again, the other follows
    assert calls == [("portal", "power on", ["node-2"]), ("portal", "power on", ["node-3"])]
    assert sites.held_back(ALL) == {} and sites.breaker.pauses() == {}
    sites.power_off(["node-2"])  # other steps never pause a site


def test_without_a_sites_file_the_whole_pool_is_one_site_paused_all_the_same(
    tmp_path: Path,
) -> None:
    from elastic.slurm.breaker import SiteBreaker

    calls: list[tuple[str, str, list[str]]] = []
    rest = Recorder("rest", calls, full=True)
    sites = SitesProvisioner((), rest, SiteBreaker(tmp_path / "p.json"))
    with pytest.raises(ProvisionFailed) as caught:
        sites.power_on(["node-1"])
    assert caught.value.capacity == {"node-1"}
    assert caught.value.failures["node-1"].startswith("no capacity, site paused until")
    assert sites.held_back(ALL) == {"ptc-paused-pool": ALL}


def test_no_site_of_the_file_may_take_the_pool_s_name() -> None:
    with pytest.raises(InputError, match=r"field name: 'pool' names the nodes in no site"):
        parse_sites({"sites": [{"name": "pool", "price": 1, "nodes": "n-0"}]}, hostlist.expand)


def test_with_a_growth_policy_the_sites_not_grown_onto_are_held_back_too(
    tmp_path: Path,
) -> None:
    from elastic.slurm.breaker import SiteBreaker
    from elastic.slurm.growth_gate import GrowthGate

    calls: list[tuple[str, str, list[str]]] = []
    here, portal = SITES  # here costs 1, portal 2
    sites = SitesProvisioner(
        ((here, Recorder("here", calls)), (portal, Recorder("portal", calls))),
        Recorder("rest", calls),
        SiteBreaker(None),
        GrowthGate("cheapest"),
    )
    rest = dict.fromkeys(ALL, "idle~")
    assert sites.held_back(ALL, rest, 1) == {"ptc-gated-portal": ["node-2", "node-3"]}
    assert sites.held_back(ALL) == {}  # no states: nothing to steer by
    sites.breaker.trip("here", "0 free")
    assert sites.held_back(ALL, rest, 1) == {"ptc-paused-here": ["node-0", "node-1"]}


def test_a_probe_failing_otherwise_leaves_the_others_untried_and_not_at_fault(
    tmp_path: Path,
) -> None:
    from elastic.slurm.breaker import SiteBreaker

    now = [1000.0]
    calls: list[tuple[str, str, list[str]]] = []
    here, portal = SITES
    broken = Recorder("portal", calls, broken=frozenset({"node-2"}))
    sites = SitesProvisioner(
        ((here, Recorder("here", calls)), (portal, broken)),
        Recorder("rest", calls),
        SiteBreaker(None, first=60, most=600, clock=lambda: now[0]),
    )
    sites.breaker.trip("portal", "0 free")
    now[0] += 60  # the pause is over: node-2 probes, and fails for a reason of its own
    with pytest.raises(ProvisionFailed) as caught:
        sites.power_on(["node-2", "node-3"])
    assert calls == [("portal", "power on", ["node-2"])]
    assert caught.value.failures["node-2"] == "site portal: portal refused"
    assert caught.value.failures["node-3"].endswith("not tried: the probe node failed")
    assert caught.value.capacity == {"node-3"}  # back powered down, not counted against it
    assert sites.breaker.pauses()["portal"].backoff == 60  # not a capacity answer: no new pause
