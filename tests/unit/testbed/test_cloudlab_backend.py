"""CloudLabBackend against RECONSTRUCTED aggregate responses (CloudLab is unreachable from here).

The real geni-lib aggregate code runs (``geni.aggregate.cloudlab.Utah`` -> AM API v2 ->
``geni.minigcf.amapi2``); only its network call ``_rpcpost`` is replaced by
``FakeAggregateTransport``, which decodes the XML-RPC request geni-lib built and replays the
reconstructed response for that method through XML-RPC marshalling. The geni-lib context is a fake
with the attributes the AM calls read (credential paths, users).
"""

from __future__ import annotations

import io
import json
import xmlrpc.client
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from testbed_support import RECORDINGS, SLURM_PROFILE

from elastic.errors import PtcError
from elastic.profile import genilib_compat, rspec
from elastic.testbed.backends.cloudlab.backend import CloudLabBackend
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment

MANIFEST = (RECORDINGS / "reconstructed_cloudlab_utah_manifest.xml").read_text()
SLICE_URN = "urn:publicid:IDN+utah.cloudlab.us:ptc+slice+ptc-demo"


def reconstructed(name: str) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads((RECORDINGS / f"reconstructed_am_{name}.json").read_text())
    return list(data["responses"])


class FakeAggregateTransport:
    """Replaces geni-lib's HTTPS post: replays reconstructed AM responses per XML-RPC method."""

    def __init__(self, script: dict[str, list[dict[str, Any]]]) -> None:
        self.script = script
        self.calls: list[tuple[str, str, tuple[Any, ...]]] = []

    def __call__(self, url: str, req_data: str, cert: Any, root_bundle: Any) -> Any:
        params, method = xmlrpc.client.loads(req_data)
        self.calls.append((method, url, params))
        queue = self.script.get(method)
        if not queue:
            raise AssertionError(f"no reconstructed response for {method}")
        response = queue.pop(0) if len(queue) > 1 else queue[0]  # the last one repeats
        if response.get("value") == "@manifest":
            response = {**response, "value": MANIFEST}
        wire = xmlrpc.client.dumps((response,), methodresponse=True, allow_none=True)
        return xmlrpc.client.loads(wire)[0][0]

    def methods(self) -> list[str]:
        return [c[0] for c in self.calls]


class FakeFramework:
    def __init__(self, tmp: Path, slices: dict[str, Any]) -> None:
        self.cert = str(tmp / "cert.pem")
        self.key = str(tmp / "key.pem")
        self.slices = slices
        self.created: list[str] = []

    def listSlices(self, context: Any) -> dict[str, Any]:
        return self.slices

    def createSlice(self, context: Any, name: str, exp: Any = None, desc: Any = None) -> None:
        self.created.append(name)


class FakeContext:
    """The parts of a geni-lib context that the AM API v2 calls read."""

    def __init__(self, tmp: Path, slices: dict[str, Any] | None = None) -> None:
        for name in ("slice-cred.xml", "user-cred.xml", "bob.pub"):
            (tmp / name).write_text(f"<fake {name}/>")
        self.cf = FakeFramework(tmp, slices or {})
        self.usercred_path = str(tmp / "user-cred.xml")
        self._users = [SimpleNamespace(name="bob", urn="urn:bob", _keys=[str(tmp / "bob.pub")])]
        self._slice = SimpleNamespace(path=str(tmp / "slice-cred.xml"), urn=SLICE_URN)

    def getSliceInfo(self, sname: str) -> Any:
        return self._slice


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> FakeAggregateTransport:
    genilib_compat.install()
    import geni.minigcf.amapi2 as amapi2

    fake = FakeAggregateTransport(
        {
            "CreateSliver": reconstructed("createsliver"),
            "SliverStatus": reconstructed("sliverstatus_ready"),
            "ListResources": reconstructed("listresources"),
            "DeleteSliver": reconstructed("deletesliver"),
        }
    )
    monkeypatch.setattr(amapi2, "_rpcpost", fake)
    return fake


@pytest.fixture
def exp() -> Experiment:
    e = Experiment(name="ptc-demo", testbed="cloudlab", profile=str(SLURM_PROFILE), site="utah")
    e.dir.mkdir(parents=True)
    e.request_path.write_bytes(
        b'<rspec xmlns="http://www.geni.net/resources/rspec/3" type="request"/>'
    )
    return e


def backend(
    tmp_path: Path, probe: Any = None, clock: FakeClock | None = None, **kw: Any
) -> tuple[CloudLabBackend, FakeContext, io.StringIO]:
    out = io.StringIO()
    clock = clock or FakeClock()
    ctx = FakeContext(tmp_path)
    b = CloudLabBackend(
        "utah",
        on_event=lambda event: out.write(event.describe() + "\n"),
        context=ctx,
        probe=probe or (lambda host, port, timeout: True),
        sleep=clock.sleep,
        clock=clock,
        poll_interval=10,
        **kw,
    )
    return b, ctx, out


def request_topology() -> rspec.Topology:
    return rspec.parse_manifest(MANIFEST.encode())


def test_reconstructed_create_returns_manifest_after_polling(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    probed: list[tuple[str, int]] = []

    def probe(host: str, port: int, timeout: float) -> bool:
        probed.append((host, port))
        return True

    b, ctx, out = backend(tmp_path, probe)
    manifest = b.create(exp, request_topology())

    assert transport.methods() == [
        "CreateSliver",
        "SliverStatus",
        "SliverStatus",
        "SliverStatus",
        "ListResources",
    ]
    _, url, params = transport.calls[0]
    assert url == "https://boss.utah.cloudlab.us:12369/protogeni/xmlrpc/am/2.0"
    assert params[0] == SLICE_URN
    assert params[2].startswith("<rspec")  # the request RSpec file's content
    assert ctx.cf.created == ["ptc-demo"]
    t = rspec.parse_manifest(manifest)
    assert [n.client_id for n in t.nodes] == ["head", "node-0", "node-1"]
    assert t.node("head").login is not None
    assert t.node("head").login.username == "bob"  # the context user's login moved first
    assert sorted(probed) == [
        ("ms1012.utah.cloudlab.us", 22),
        ("ms1039.utah.cloudlab.us", 22),
        ("ms1041.utah.cloudlab.us", 22),
    ]
    assert "3/3 resources ready" in out.getvalue()


def test_existing_slice_is_reused(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    b, ctx, _ = backend(tmp_path)
    ctx.cf.slices = {SLICE_URN: {}}
    b.create(exp, request_topology())
    assert ctx.cf.created == []


def test_reconstructed_failed_status_is_a_clear_error_and_cleans_up(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    transport.script["SliverStatus"] = reconstructed("sliverstatus_failed")
    b, _, _ = backend(tmp_path)
    with pytest.raises(PtcError) as info:
        b.create(exp, request_topology())
    msg = str(info.value)
    assert "sliver 'ptc-demo' failed" in msg
    assert "image load failed" in msg
    assert transport.methods()[-1] == "DeleteSliver"


def test_reconstructed_stuck_status_times_out_and_cleans_up(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    transport.script["SliverStatus"] = reconstructed("sliverstatus_stuck")
    b, _, _ = backend(tmp_path, ready_timeout=60)
    with pytest.raises(PtcError, match=r"not ready after 60s \(last status: changing, 0/3"):
        b.create(exp, request_topology())
    assert transport.methods().count("SliverStatus") == 7  # t = 0, 10, ... 60
    assert transport.methods()[-1] == "DeleteSliver"


def test_reconstructed_createsliver_refusal_names_the_reason(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    transport.script["CreateSliver"] = reconstructed("createsliver_insufficient_nodes")
    b, _, _ = backend(tmp_path)
    with pytest.raises(PtcError, match="Insufficient nodes of type m510"):
        b.create(exp, request_topology())
    assert "SliverStatus" not in transport.methods()


def test_ssh_timeout_names_the_silent_nodes(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    b, _, _ = backend(
        tmp_path, probe=lambda host, port, timeout: host.startswith("ms1041"), ssh_timeout=30
    )
    with pytest.raises(PtcError) as info:
        b.create(exp, request_topology())
    msg = str(info.value)
    assert "node-0 (ms1012.utah.cloudlab.us:22)" in msg
    assert "head" not in msg.split("on ", 1)[1]
    assert transport.methods()[-1] == "DeleteSliver"


def test_reconstructed_delete_and_delete_twice(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    b, _, _ = backend(tmp_path)
    b.delete(exp)
    assert transport.calls[-1][0] == "DeleteSliver"
    assert transport.calls[-1][2][0] == SLICE_URN
    transport.script["DeleteSliver"] = reconstructed("deletesliver_searchfailed")
    b.delete(exp)  # already gone: no error


def test_modify_is_refused_without_touching_the_sliver(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    b, _, _ = backend(tmp_path)
    topology = request_topology()
    grown = Change(added=[replace(topology.nodes[-1], client_id="node-9")], removed=[])
    with pytest.raises(PtcError) as info:
        b.modify(exp, topology, grown)
    message = str(info.value)
    assert "cannot add node-9 there" in message and "portal's Modify" in message
    assert str(exp.manifest_path) in message and "ptc inventory ptc-demo" in message
    assert transport.calls == []


def test_status_maps_slivers_to_nodes(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    exp.manifest_path.write_text(MANIFEST)
    transport.script["SliverStatus"] = reconstructed("sliverstatus_failed")[1:]
    b, _, _ = backend(tmp_path)
    assert b.status(exp) == {"head": "ready", "node-0": "failed", "node-1": "ready"}


def test_status_of_a_missing_sliver(
    tmp_path: Path, transport: FakeAggregateTransport, exp: Experiment
) -> None:
    exp.manifest_path.write_text(MANIFEST)
    transport.script["SliverStatus"] = reconstructed("deletesliver_searchfailed")
    b, _, _ = backend(tmp_path)
    assert b.status(exp) == {"head": "missing", "node-0": "missing", "node-1": "missing"}


def test_unknown_site() -> None:
    with pytest.raises(PtcError, match="--site must be one of utah, wisconsin, clemson, apt"):
        CloudLabBackend("mars")


def test_missing_context_explains_build_context(tmp_path: Path, exp: Experiment) -> None:
    b = CloudLabBackend("wisconsin", context_path=tmp_path / "nope.json")
    with pytest.raises(PtcError, match="build-context"):
        b.delete(exp)


def test_long_experiment_name_is_refused(tmp_path: Path) -> None:
    e = Experiment(name="a" * 25, testbed="cloudlab", profile="p", site="utah")
    b, _, _ = backend(tmp_path)
    with pytest.raises(PtcError, match="at most 19"):
        b.delete(e)
