"""CloudLab node operations against a FAKE aggregate (fake_cloudlab_am.FakeCloudLabAggregate).

The real geni-lib code runs (``AMAPIv3.poa`` -> ``geni.minigcf.amapi3``, and the AM API v2
status and manifest calls); only its network post is replaced by the fake, which answers as
ProtoGENI's AM v3 server is written to. Nothing leaves this process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import xmlrpc.client
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_cloudlab_am import REFUSED, FakeCloudLabAggregate
from test_cloudlab_backend import MANIFEST, SLICE_URN, FakeClock, FakeContext
from testbed_support import SLURM_PROFILE

from elastic.errors import InputError, PtcError, TestbedError
from elastic.events import Event, Kind, collect
from elastic.profile import genilib_compat, rspec
from elastic.testbed.backends.cloudlab import host_keys
from elastic.testbed.backends.cloudlab.backend import CloudLabBackend
from elastic.testbed.experiment import Experiment

SLIVER = {
    "head": "urn:publicid:IDN+utah.cloudlab.us+sliver+1808166",
    "node-0": "urn:publicid:IDN+utah.cloudlab.us+sliver+1808167",
    "node-1": "urn:publicid:IDN+utah.cloudlab.us+sliver+1808168",
}
AM3_URL = "https://boss.utah.cloudlab.us:12369/protogeni/xmlrpc/am/3.0"


class V3Context(FakeContext):
    """The fake geni-lib context, with the slice credential's type and version AM v3 sends."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self._slice = SimpleNamespace(
            path=str(tmp / "slice-cred.xml"), urn=SLICE_URN, type="geni_sfa", version=3
        )


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCloudLabAggregate:
    genilib_compat.install()
    import geni.minigcf.amapi2 as amapi2
    import geni.minigcf.amapi3 as amapi3

    am = FakeCloudLabAggregate(MANIFEST, SLICE_URN, b"<fake slice-cred.xml/>")
    monkeypatch.setattr(amapi2, "_rpcpost", am)
    monkeypatch.setattr(amapi3, "_rpcpost", am)
    return am


@pytest.fixture
def exp() -> Experiment:
    e = Experiment(name="ptc-demo", testbed="cloudlab", profile=str(SLURM_PROFILE), site="utah")
    e.dir.mkdir(parents=True)
    e.manifest_path.write_text(MANIFEST)
    return e


def make_backend(
    tmp_path: Path, probe: Any = None, **kw: Any
) -> tuple[CloudLabBackend, io.StringIO, list[tuple[str, int]]]:
    out = io.StringIO()
    clock = FakeClock()
    probed: list[tuple[str, int]] = []

    def default_probe(host: str, port: int, timeout: float) -> bool:
        probed.append((host, port))
        return True

    b = CloudLabBackend(
        "utah",
        on_event=lambda event: out.write(event.describe() + "\n"),
        context=V3Context(tmp_path),
        probe=probe or default_probe,
        sleep=clock.sleep,
        clock=clock,
        poll_interval=10,
        **kw,
    )
    return b, out, probed


def request_topology() -> rspec.Topology:
    return rspec.parse_manifest(MANIFEST.encode())


# --- supported: the right action, on the right sliver URN, with the slice credential -------


def test_power_off_stops_each_named_sliver_with_the_slice_credential(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    b, out, _ = make_backend(tmp_path)
    b.power_off(exp, ["node-0", "node-1"])

    assert fake.actions() == [
        ("geni_stop", [SLIVER["node-0"]]),
        ("geni_stop", [SLIVER["node-1"]]),
    ]
    _, url, params = fake.calls[0]
    assert url == AM3_URL
    cred = params[1][0]
    assert cred["geni_type"] == "geni_sfa" and cred["geni_version"] == 3
    assert isinstance(cred["geni_value"], xmlrpc.client.Binary)
    assert cred["geni_value"].data == b"<fake slice-cred.xml/>"
    assert fake.state[SLIVER["node-0"]] == "stopped"
    assert fake.state[SLIVER["head"]] == "started"  # an unnamed node is not touched
    assert "power_off node-0: geni_stop done" in out.getvalue()


def test_power_on_starts_waits_until_ready_and_for_ssh(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.state[SLIVER["node-1"]] = "stopped"
    b, out, probed = make_backend(tmp_path)
    b.power_on(exp, ["node-1"])

    assert fake.actions() == [("geni_start", [SLIVER["node-1"]])]
    # started, then polled while the fake reports it booting, then ready
    assert fake.methods() == ["PerformOperationalAction", "SliverStatus", "SliverStatus"]
    assert fake.state[SLIVER["node-1"]] == "started"
    assert probed == [("ms1039.utah.cloudlab.us", 22)]
    assert "power_on: 1/1 nodes ready" in out.getvalue()


def test_each_step_reports_begin_and_end_with_its_duration(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.state[SLIVER["node-1"]] = "stopped"
    events: list[Event] = []
    b = CloudLabBackend(
        "utah",
        on_event=collect(events),
        context=V3Context(tmp_path),
        probe=lambda host, port, timeout: True,
        sleep=FakeClock().sleep,
        poll_interval=10,
    )
    b.power_on(exp, ["node-1"])
    ends = [e for e in events if e.kind == Kind.END]
    assert [e.data["step"] for e in ends] == ["geni_start", "booting", "ssh"]
    assert all(e.data["nodes"] == ["node-1"] for e in ends)
    assert all(isinstance(e.data["seconds"], float) for e in ends)
    begins = [e.data["step"] for e in events if e.kind == Kind.BEGIN]
    assert begins == ["geni_start", "booting", "ssh"]


def test_power_on_of_a_running_node_does_nothing(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    b, out, _ = make_backend(tmp_path)
    b.power_on(exp, ["node-0"])  # running: the aggregate refuses geni_start, which means done
    assert fake.actions() == [("geni_start", [SLIVER["node-0"]])]
    assert fake.state[SLIVER["node-0"]] == "started"
    assert "power_on node-0: geni_start nothing to do" in out.getvalue()


def test_power_off_twice_is_fine(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    b, out, _ = make_backend(tmp_path)
    b.power_off(exp, ["node-0"])
    b.power_off(exp, ["node-0"])
    assert fake.state[SLIVER["node-0"]] == "stopped"
    assert "nothing to do" in out.getvalue()


def test_reload_reloads_returns_the_manifest_and_forgets_the_old_host_key(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    known_hosts = exp.inventory_dir / "known_hosts"
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    known_hosts.write_text(
        "ms1041.utah.cloudlab.us ssh-ed25519 AAAAheadkey\n"
        "ms1012.utah.cloudlab.us ssh-ed25519 AAAAoldkey\n"
        f"{hashed('ms1012.utah.cloudlab.us')} ecdsa-sha2-nistp256 AAAAoldhashed\n"
    )
    b, out, probed = make_backend(tmp_path)
    manifest = b.reload(exp, request_topology(), ["node-0"])

    assert fake.actions() == [("geni_reload", [SLIVER["node-0"]])]
    assert fake.reloads == [SLIVER["node-0"]]
    assert fake.methods()[-1] == "ListResources"
    t = rspec.parse_manifest(manifest)
    assert [n.client_id for n in t.nodes] == ["head", "node-0", "node-1"]
    assert t.node("head").login is not None and t.node("head").login.username == "bob"
    assert probed == [("ms1012.utah.cloudlab.us", 22)]
    # the reloaded node's old keys (plain and hashed) are gone; the others' stay
    assert known_hosts.read_text() == "ms1041.utah.cloudlab.us ssh-ed25519 AAAAheadkey\n"
    assert "node-0 was reloaded: its old SSH host key is removed" in out.getvalue()


def test_replace_nodes_is_the_aggregates_reload(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    b, _, _ = make_backend(tmp_path)
    b.replace_nodes(exp, request_topology(), ["node-1"])
    assert fake.actions() == [("geni_reload", [SLIVER["node-1"]])]


# --- refused before any call -----------------------------------------------------------------


def test_release_is_refused_before_any_call(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    b, _, _ = make_backend(tmp_path)
    with pytest.raises(TestbedError) as info:
        b.release(exp, ["node-1"])
    message = str(info.value)
    assert "cannot release node-1" in message
    assert "Must pass only slice URN" in message and "portal's Modify" in message
    assert fake.calls == []


def test_allocate_is_refused_before_any_call(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    b, _, _ = make_backend(tmp_path)
    with pytest.raises(TestbedError) as info:
        b.allocate(exp, request_topology(), ["node-1"])
    message = str(info.value)
    assert "cannot allocate node-1" in message and "disjoint" in message
    assert fake.calls == []


@pytest.mark.parametrize("operation", ["power_off", "power_on", "reload", "release"])
def test_an_unknown_node_is_refused_naming_it_before_any_call(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment, operation: str
) -> None:
    b, _, _ = make_backend(tmp_path)
    args: list[Any] = [exp, ["node-0", "node-7"]]
    if operation == "reload":
        args.insert(1, request_topology())
    with pytest.raises(InputError, match=rf"{operation}: .*no node 'node-7'"):
        getattr(b, operation)(*args)
    assert fake.calls == []


def test_allocate_of_a_node_the_request_lacks_is_named(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    b, _, _ = make_backend(tmp_path)
    with pytest.raises(InputError, match="no node 'node-9'"):
        b.allocate(exp, request_topology(), ["node-9"])
    assert fake.calls == []


# --- aggregate errors name the node and the step ---------------------------------------------


def test_a_refused_reload_names_the_node_and_the_action(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.state[SLIVER["node-1"]] = "new"  # neither started nor stopped: reload is refused
    b, _, _ = make_backend(tmp_path)
    with pytest.raises(TestbedError) as info:
        b.reload(exp, request_topology(), ["node-1"])
    message = str(info.value)
    assert "reload of node node-1 failed at geni_reload" in message
    assert "Sliver is not started or stopped (yet)" in message
    assert fake.reloads == []


def test_a_wrong_credential_is_forbidden_naming_the_node(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.slice_credential = b"<another slice's credential/>"
    b, _, _ = make_backend(tmp_path)
    with pytest.raises(TestbedError) as info:
        b.power_off(exp, ["node-0"])
    message = str(info.value)
    assert "power_off of node node-0 failed at geni_stop" in message
    assert "Credential does not match the URN" in message
    assert fake.state[SLIVER["node-0"]] == "started"


def test_a_busy_slice_is_asked_again_until_it_answers(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.busy_answers = 2
    b, out, _ = make_backend(tmp_path)
    b.power_off(exp, ["node-0"])
    assert fake.actions() == [("geni_stop", [SLIVER["node-0"]])] * 3
    assert fake.state[SLIVER["node-0"]] == "stopped"
    assert out.getvalue().count("the aggregate is busy") == 2


def test_a_slice_busy_past_the_timeout_is_an_error_naming_the_node(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.busy_answers = 100
    b, _, _ = make_backend(tmp_path, ready_timeout=30)
    with pytest.raises(TestbedError, match=r"power_off of node node-0 failed at geni_stop: .*busy"):
        b.power_off(exp, ["node-0"])
    assert len(fake.actions()) == 4  # t = 0, 10, 20, 30
    assert fake.state[SLIVER["node-0"]] == "started"


def test_a_sliver_the_aggregate_does_not_know_is_named(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    del fake.state[SLIVER["node-0"]]  # the manifest we kept is older than the sliver
    b, _, _ = make_backend(tmp_path)
    with pytest.raises(TestbedError, match=r"power_on of node node-0 .*Nothing here by that name"):
        b.power_on(exp, ["node-0"])


def test_a_node_that_fails_to_boot_is_named(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.failing[SLIVER["node-0"]] = "image load failed"
    b, _, _ = make_backend(tmp_path)
    with pytest.raises(TestbedError) as info:
        b.reload(exp, request_topology(), ["node-0"])
    message = str(info.value)
    assert "reload of node node-0 failed while booting: node-0: image load failed" in message


def test_a_node_that_stays_booting_times_out_naming_it(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.boot_polls = 100
    fake.state[SLIVER["node-1"]] = "stopped"
    b, _, _ = make_backend(tmp_path, ready_timeout=30)
    with pytest.raises(TestbedError, match=r"power_on of node node-1: not ready after 30s"):
        b.power_on(exp, ["node-1"])
    assert fake.methods().count("SliverStatus") == 4  # t = 0, 10, 20, 30


def test_ssh_silence_after_power_on_names_the_node(
    tmp_path: Path, fake: FakeCloudLabAggregate, exp: Experiment
) -> None:
    fake.state[SLIVER["node-0"]] = "stopped"
    b, _, _ = make_backend(tmp_path, probe=lambda h, p, t: False, ssh_timeout=20)
    with pytest.raises(PtcError, match=r"node-0 \(ms1012.utah.cloudlab.us:22\)"):
        b.power_on(exp, ["node-0"])


# --- the fake answers the unsupported forms as the aggregate does ----------------------------


def test_the_fake_refuses_an_unknown_action_and_a_per_sliver_delete(
    tmp_path: Path, fake: FakeCloudLabAggregate
) -> None:
    import geni.minigcf.amapi3 as amapi3

    ctx = V3Context(tmp_path)
    sinfo = ctx.getSliceInfo("ptc-demo")
    res = amapi3.poa(AM3_URL, False, "c", "k", [sinfo], [SLIVER["head"]], "geni_suspend")
    assert res["code"]["geni_code"] == REFUSED and res["output"] == "Invalid operational action"
    res = amapi3.delete(AM3_URL, False, "c", "k", [sinfo], [SLIVER["node-0"]])
    assert res["code"]["geni_code"] == REFUSED and res["output"] == "Must pass only slice URN"
    assert set(fake.state.values()) == {"started"}


# --- the host-key helper ---------------------------------------------------------------------


def hashed(host: str, salt: bytes = b"0123456789abcdefghij") -> str:
    digest = hmac.new(salt, host.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def test_forget_keeps_other_hosts_ports_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(
        "# comment\n"
        "[ms1012.utah.cloudlab.us]:2222 ssh-ed25519 AAAAotherport\n"
        "ms1012.utah.cloudlab.us,10.10.1.2 ssh-rsa AAAAlisted\n"
        "ms10120.utah.cloudlab.us ssh-ed25519 AAAAsimilarname\n"
    )
    assert host_keys.forget(path, "ms1012.utah.cloudlab.us", 22) == 1
    assert path.read_text() == (
        "# comment\n"
        "[ms1012.utah.cloudlab.us]:2222 ssh-ed25519 AAAAotherport\n"
        "ms10120.utah.cloudlab.us ssh-ed25519 AAAAsimilarname\n"
    )
    assert host_keys.forget(path, "ms1012.utah.cloudlab.us", 22) == 0
    assert host_keys.forget(tmp_path / "absent", "x", 22) == 0
