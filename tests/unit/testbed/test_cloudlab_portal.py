"""A head powering its own CloudLab nodes through the Portal API (``PortalControl``), against the
FAKE portal of tests/support served on loopback, with an in-memory testbed behind it."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.fake_cloudlab_portal import FakePortal, handler

from elastic.errors import InputError, NodeControlError
from elastic.slurm.provision import PlaybookProvisioner, ProvisionFailed, from_settings
from elastic.testbed.backends.cloudlab.portal import (
    PortalControl,
    PortalCredentialError,
    PortalSettings,
)
from elastic.testbed.backends.local.control.client import ControlError

UUID = "7ce46d72-eecc-11ef-af1a-e4434b2381fc"
EXPERIMENT = {"id": UUID, "name": "pool", "project": "ptc"}
LATER = (dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).isoformat()
EARLIER = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).isoformat()
TOKENS = {
    "scoped": {"scope": "experiment", "scope_value": UUID, "expires_at": LATER},
    "other": {"scope": "experiment", "scope_value": "ptc,someone-else", "expires_at": LATER},
    "global": {"scope": "global", "scope_value": None, "expires_at": LATER},
    "expired": {"scope": "experiment", "scope_value": UUID, "expires_at": EARLIER},
}


class Machines:
    """An in-memory testbed's machines behind the fake portal; ``fail``: a node whose power
    change the testbed refuses."""

    def __init__(self) -> None:
        self.states = {"head": "running", "node-0": "stopped", "node-1": "stopped"}
        self.fail: str | None = None
        self.calls: list[tuple[str, list[str]]] = []

    def nodes(self) -> dict[str, str]:
        return dict(self.states)

    def _set(self, step: str, nodes: list[str], state: str) -> dict[str, Any]:
        self.calls.append((step, nodes))
        if self.fail in nodes:
            raise ControlError(f"{self.fail}: the machine did not start", status=500)
        self.states.update(dict.fromkeys(nodes, state))
        return {}

    def power_on(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        return self._set("power_on", nodes, "running")

    def power_off(self, nodes: list[str], request_id: str) -> dict[str, Any]:
        return self._set("power_off", nodes, "stopped")


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[tuple[FakePortal, str]]:
    fake = FakePortal(
        {"experiment": EXPERIMENT, "tokens": TOKENS}, Machines(), tmp_path / "operations.jsonl"
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(fake))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def control(
    tmp_path: Path, url: str, token: str, experiment: str = UUID, **more: Any
) -> PortalControl:
    path = tmp_path / f"{token}.token"
    path.write_text(token + "\n")
    raw = {"url": url, "token_file": str(path), "experiment": experiment, "poll_interval": 0.05}
    return PortalControl(PortalSettings.from_mapping({**raw, **more}, "node_control"))


def test_a_token_scoped_to_the_experiment_starts_and_stops_its_nodes(
    portal: tuple[FakePortal, str], tmp_path: Path
) -> None:
    fake, url = portal
    ctl = control(tmp_path, url, "scoped", experiment="ptc,pool")
    assert "reaches experiment ptc,pool only" in ctl.check()
    assert ctl.nodes() == {"head": "running", "node-0": "stopped", "node-1": "stopped"}
    assert ctl.power_on(["node-0", "node-1"], "r1") == {
        "nodes": {"node-0": "running", "node-1": "running"}
    }
    assert fake.control.states["node-0"] == "running"
    # a node already where it is asked to be is not asked again
    ctl.power_off(["node-0"], "r2")
    ctl.power_off(["node-0"], "r3")
    logged = [json.loads(line) for line in fake.log.read_text().splitlines()]
    assert [(e["node"], e["operation"]) for e in logged] == [
        ("node-0", "start"),
        ("node-1", "start"),
        ("node-0", "stop"),
    ]
    assert ctl.nodes()["node-0"] == "stopped"


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("global", "has scope 'global': it reaches every experiment, profile and reservation"),
        ("other", "is scoped to experiment 'ptc,someone-else', not this one"),
        ("expired", "was refused (HTTP 401: Token has expired)"),
        ("nonsense", "was refused (HTTP 401: Invalid token): wrong, expired or revoked"),
    ],
)
def test_a_token_that_reaches_too_much_or_nothing_is_refused_naming_its_file(
    portal: tuple[FakePortal, str], tmp_path: Path, token: str, said: str
) -> None:
    fake, url = portal
    ctl = control(tmp_path, url, token)
    with pytest.raises(PortalCredentialError) as err:
        ctl.check()
    assert str(tmp_path / f"{token}.token") in str(err.value)
    assert said in str(err.value)
    # and nothing is done with it
    with pytest.raises(PortalCredentialError):
        ctl.power_on(["node-0"], "r")
    assert fake.control.calls == []


def test_a_global_token_is_taken_only_when_the_deployment_says_so(
    portal: tuple[FakePortal, str], tmp_path: Path
) -> None:
    _, url = portal
    ctl = control(tmp_path, url, "global", allow_broad_token=True)
    assert "allowed by the deployment" in ctl.check()
    ctl.power_on(["node-1"], "r")
    assert ctl.nodes()["node-1"] == "running"


def test_busy_answers_are_asked_again_by_the_provisioner_until_they_pass(
    portal: tuple[FakePortal, str], tmp_path: Path
) -> None:
    fake, url = portal
    fake.busy = 2
    ctl = control(tmp_path, url, "scoped")
    with pytest.raises(NodeControlError) as err:
        ctl.power_on(["node-0"], "r")
    assert err.value.status == 409 and err.value.node == "node-0"
    assert "busy (HTTP 409: Experiment is busy" in str(err.value)
    fake.busy = 2
    prov = PlaybookProvisioner(
        node_operation="power",
        control=ctl,
        lock_file=tmp_path / "lock",
        known_hosts=tmp_path / "known_hosts",
        sleep=lambda s: None,
    )
    prov._bring_up(["node-0"])
    assert fake.busy == 0 and fake.control.states["node-0"] == "running"


def test_busy_for_too_long_fails_the_node_with_the_portal_s_words(
    portal: tuple[FakePortal, str], tmp_path: Path
) -> None:
    fake, url = portal
    fake.busy = 10**6
    clock = iter(range(0, 10**6, 30))
    prov = PlaybookProvisioner(
        node_operation="power",
        control=control(tmp_path, url, "scoped"),
        lock_file=tmp_path / "lock",
        known_hosts=tmp_path / "known_hosts",
        sleep=lambda s: None,
        clock=lambda: float(next(clock)),
    )
    with pytest.raises(ProvisionFailed) as err:
        prov._bring_up(["node-1"])
    assert set(err.value.failures) == {"node-1"}
    assert "Experiment is busy, try again later" in err.value.failures["node-1"]


def test_an_operation_the_testbed_fails_is_reported_for_its_node(
    portal: tuple[FakePortal, str], tmp_path: Path
) -> None:
    fake, url = portal
    fake.control.fail = "node-1"
    ctl = control(tmp_path, url, "scoped")
    with pytest.raises(NodeControlError) as err:
        ctl.power_on(["node-0", "node-1"], "r")
    assert err.value.node == "node-1"
    assert "start of node node-1 failed: the portal reports status failed" in str(err.value)


def test_an_expired_token_fails_the_resume_naming_it_not_a_hang(
    portal: tuple[FakePortal, str], tmp_path: Path
) -> None:
    _, url = portal
    prov = PlaybookProvisioner(
        node_operation="power",
        control=control(tmp_path, url, "expired"),
        lock_file=tmp_path / "lock",
        known_hosts=tmp_path / "known_hosts",
    )
    with pytest.raises(ProvisionFailed) as err:
        prov._bring_up(["node-0"])
    assert "expired.token was refused (HTTP 401: Token has expired)" in err.value.failures["node-0"]


def test_settings_are_checked_naming_the_field(tmp_path: Path) -> None:
    base = {"kind": "cloudlab_portal", "token_file": "/etc/t", "experiment": UUID}
    with pytest.raises(InputError, match=r"node_control: url: 'http://portal\.example:80'"):
        PortalSettings.from_mapping({**base, "url": "http://portal.example:80"}, "node_control")
    with pytest.raises(InputError, match="node_control: experiment: missing"):
        PortalSettings.from_mapping({**base, "experiment": ""}, "node_control")
    with pytest.raises(InputError, match="unknown setting 'tokn'"):
        PortalSettings.from_mapping({**base, "tokn": 1}, "node_control")
    assert PortalSettings.from_mapping(base, "x").url == "https://boss.emulab.net:43794"
    # the controller's geni-get slice_urn, read as the portal's project,name
    urn = "urn:publicid:IDN+emulab.net:ptc-research+slice+pool"
    assert PortalSettings.from_mapping({**base, "experiment": urn}, "x").experiment == (
        "ptc-research,pool"
    )
    with pytest.raises(InputError, match=r"node_control: experiment: 'urn:publicid:IDN\+emulab"):
        PortalSettings.from_mapping(
            {**base, "experiment": "urn:publicid:IDN+emulab.net+slice+pool"}, "node_control"
        )


class Settings:
    def __init__(self, extra: dict[str, Any]) -> None:
        self.extra = extra


def test_the_client_s_settings_choose_the_portal_and_only_what_it_offers() -> None:
    portal = {"kind": "cloudlab_portal", "token_file": "/etc/t", "experiment": UUID}
    prov = from_settings(Settings({"node_operation": "power", "node_control": portal}))
    assert isinstance(prov.control, PortalControl)
    with pytest.raises(InputError, match="'reload' is not offered by the node control in use"):
        from_settings(Settings({"node_operation": "reload", "node_control": portal}))
    with pytest.raises(InputError, match="kind: 'ec2' is not one of testbed, cloudlab_portal"):
        from_settings(Settings({"node_operation": "power", "node_control": {"kind": "ec2"}}))
