"""`ptc up --local` refuses the portal extensions it cannot provide and ignores the others aloud."""

from __future__ import annotations

import pytest
from testbed_support import RECORDINGS, TEST_PROFILES

from elastic.errors import InputError
from elastic.events import Event, Kind, Reporter, collect
from elastic.profile import rspec
from elastic.profile.render import render_request
from elastic.profile.topology import Topology
from elastic.testbed.backends.local import backend as local_backend
from elastic.testbed.backends.local import features
from elastic.testbed.backends.local.backend import LocalBackend
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment

EXTENSIONS = RECORDINGS / "genilib_portal" / "recorded_portal_extensions_defaults.xml"


def extensions() -> Topology:
    # What the portal line's geni-lib writes for profiles/tests/portal_extensions.py.
    return rspec.parse_request(EXTENSIONS.read_bytes())


def test_each_extension_is_refused_or_ignored_by_name() -> None:
    found = {(f.where, f.feature, f.refused) for f in features.review(extensions())}
    lan = "link 'lan' (nodes head, worker, box)"
    assert found == {
        ("node 'head'", "VNC (startVNC)", True),
        ("node 'box'", "a Docker container (DockerContainer)", True),
        (lan, "shared VLAN 'ptc-shared'", True),
        ("node 'head'", "root keys (installRootKeys)", False),
        ("node 'worker'", "root keys (installRootKeys)", False),
        ("node 'head'", "Ansible role 'web' (bindRole)", False),
        (lan, "jumbo frames (setJumboFrames)", False),
        ("the request", "disableRootKeys", False),
        ("the request", "Ansible role 'web' (addRole)", False),
    }


def test_check_refuses_everything_it_cannot_provide_at_once() -> None:
    with pytest.raises(InputError) as info:
        features.check(extensions())
    msg = str(info.value)
    assert "node 'head': VNC (startVNC) cannot be provided" in msg
    assert "node 'box': a Docker container (DockerContainer) cannot be provided" in msg
    assert "link 'lan' (nodes head, worker, box): shared VLAN 'ptc-shared'" in msg
    assert "root keys" not in msg  # ignored things are no reason to refuse


def test_what_is_ignored_is_reported_as_warnings() -> None:
    t = extensions()
    t.nodes = [n for n in t.nodes if n.client_id != "box"]
    t.node("head").features.remove("vnc")
    t.links[0].features.remove("shared-vlan:ptc-shared")
    events: list[Event] = []
    ignored = features.check(t, Reporter("testbed", collect(events)))
    warnings = [e.message for e in events if e.kind is Kind.WARNING]
    assert warnings == [str(f) for f in ignored]
    assert (
        "node 'worker': root keys (installRootKeys) is ignored on the local testbed: root always "
        "accepts the experiment's key here" in " ".join(warnings)
    )
    assert any("jumbo frames" in w and "MTU of 1500" in w for w in warnings)


def test_a_plain_profile_has_nothing_to_refuse_or_ignore() -> None:
    t = render_request(TEST_PROFILES / "two_lans.py", {}).topology
    assert features.review(t) == []


def _exp() -> Experiment:
    return Experiment("ptfeatures", "local", str(TEST_PROFILES / "portal_extensions.py"))


def test_local_create_refuses_before_building_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the node image was touched")

    monkeypatch.setattr(local_backend.image, "ensure", must_not_run)
    with pytest.raises(InputError, match="node 'box': a Docker container"):
        LocalBackend().create(_exp(), extensions())


def test_local_modify_checks_only_the_added_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    t = extensions()
    # head (with VNC) and the LAN's shared VLAN are already running: only box is new.
    with pytest.raises(InputError) as info:
        LocalBackend().modify(_exp(), t, Change(added=[t.node("box")], removed=[]))
    assert "node 'box'" in str(info.value)
    assert "node 'head'" not in str(info.value) and "shared VLAN" not in str(info.value)
