"""What `ptc up` leaves behind when the testbed fails part-way."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import typer
from testbed_support import StandInBackend
from typer.testing import CliRunner

from elastic import atomic
from elastic.errors import InputError, PtcError
from elastic.events import Event, Kind, collect
from elastic.profile import rspec
from elastic.profile.render import render_profile, render_request, to_bindings
from elastic.profile.topology import Login, Topology
from elastic.testbed import experiment as experiments
from elastic.testbed import lifecycle
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment, State

PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "tests" / "single_node.py"
SLURM_PROFILE = PROFILE.parents[1] / "slurm_cluster.py"


class FailingBackend(StandInBackend):
    """A backend whose create fails; delete fails too when asked to."""

    def __init__(self, delete_fails: bool) -> None:
        self.delete_fails = delete_fails
        self.deleted = False

    def preflight(self) -> None:
        pass

    def claim_name(self, name: str) -> None:
        pass

    def create(self, exp: Experiment, request: Topology) -> bytes:
        raise PtcError("node head: boot failed")

    def modify(self, exp: Experiment, request: Topology, change: Change) -> bytes:
        raise PtcError(f"node {change.added[0].client_id}: boot failed")

    def delete(self, exp: Experiment) -> None:
        self.deleted = True
        if self.delete_fails:
            raise PtcError("testbed unreachable")

    def status(self, exp: Experiment) -> dict[str, str]:
        return {}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PTC_HOME", str(tmp_path))
    return tmp_path


class UnpreparedBackend(FailingBackend):
    """A backend whose host services cannot be prepared (no loop device for the shares, say)."""

    @staticmethod
    def prepare_services(exp: Experiment) -> None:
        raise PtcError("the file server's shares: mount failed")

    def create(self, exp: Experiment, request: Topology) -> bytes:
        raise AssertionError("no node may be made when what they mount is not there")


@pytest.mark.parametrize(
    ("backend_type", "failure"),
    [(FailingBackend, "boot failed"), (UnpreparedBackend, "mount failed")],
    ids=["nodes-fail", "services-cannot-be-prepared"],
)
def test_failed_up_is_cleaned_up_and_forgotten(
    monkeypatch: pytest.MonkeyPatch, backend_type: type[FailingBackend], failure: str
) -> None:
    backend = backend_type(delete_fails=False)
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: backend)
    with pytest.raises(PtcError, match=failure):
        lifecycle.up(PROFILE, {}, "broken")
    assert backend.deleted
    assert not experiments.exists("broken")


def test_failed_cleanup_keeps_the_record_for_ptc_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        lifecycle.backends, "get", lambda *a, **k: FailingBackend(delete_fails=True)
    )
    with pytest.raises(PtcError) as info:
        lifecycle.up(PROFILE, {}, "stuck")
    assert "ptc down stuck" in "".join(getattr(info.value, "__notes__", []))
    assert experiments.load("stuck").state is State.FAILED


def test_existing_name_is_refused_without_touching_it(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = Experiment(name="taken", testbed="local", profile="p", state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    with pytest.raises(PtcError, match="already exists"):
        lifecycle.up(PROFILE, {}, "taken")
    assert experiments.load("taken").state is State.READY


@pytest.mark.parametrize("name", ["Bad", "-x", "a b", "x" * 40, ""])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(PtcError, match="experiment name"):
        experiments.validate_name(name)


class GrowingBackend(FailingBackend):
    """Returns the request as the manifest, each node reachable on a port of its own."""

    def modify(self, exp: Experiment, request: Topology, change: Change) -> bytes:
        for port, node in enumerate(request.nodes, start=2200):
            node.login = Login("127.0.0.1", port, "root")
        return rspec.write_manifest(request)


def running(name: str, compute: int) -> Experiment:
    """A ready experiment of slurm_cluster.py as `ptc up` leaves it on disk."""
    params = {"computeNodeCount": str(compute)}
    exp = Experiment(name, "local", str(SLURM_PROFILE), params, state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    request_xml = render_profile(SLURM_PROFILE, params)
    atomic.write_bytes(exp.request_path, request_xml)
    atomic.write_bytes(exp.manifest_path, GrowingBackend(False).modify(
        exp, rspec.parse_request(request_xml), Change([], [])
    ))  # fmt: skip
    lifecycle.write_inventory(exp)
    return exp


def snapshot(exp: Experiment) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(exp.dir.rglob("*")) if p.is_file()}


def test_modify_grows_manifest_inventory_and_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    running("grow", 1)
    backend = GrowingBackend(delete_fails=False)
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: backend)
    exp, change = lifecycle.modify("grow", {"computeNodeCount": "3"})
    assert [n.client_id for n in change.added] == ["node-1", "node-2"] and not change.removed
    assert experiments.load("grow").params == {"computeNodeCount": "3"}
    assert experiments.load("grow").state is State.READY
    manifest = rspec.parse_manifest(exp.manifest())
    assert [n.client_id for n in manifest.nodes] == ["head", "node-0", "node-1", "node-2"]
    hosts = (exp.inventory_dir / "hosts.yml").read_text()
    assert "node-2:" in hosts and "ansible_port: 2203" in hosts
    request = rspec.parse_request(exp.request_path.read_bytes())
    assert request.parameters["computeNodeCount"] == "3"
    assert manifest.parameters["computeNodeCount"] == "3"


def test_failed_modify_leaves_the_experiment_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = running("stay", 1)
    before = snapshot(exp)
    monkeypatch.setattr(
        lifecycle.backends, "get", lambda *a, **k: FailingBackend(delete_fails=False)
    )
    with pytest.raises(PtcError, match="node node-1: boot failed"):
        lifecycle.modify("stay", {"computeNodeCount": "2"})
    assert snapshot(exp) == before
    assert experiments.load("stay").state is State.READY


def test_bad_parameter_in_modify_is_named_and_changes_nothing() -> None:
    exp = running("badmod", 1)
    before = snapshot(exp)
    with pytest.raises(PtcError, match="computeNodeCount"):
        lifecycle.modify("badmod", {"computeNodeCount": "-1"})
    assert snapshot(exp) == before


def test_modify_of_an_experiment_that_is_not_ready_is_refused() -> None:
    exp = Experiment("busy", "local", str(SLURM_PROFILE), state=State.CREATING)
    exp.dir.mkdir(parents=True)
    exp.save()
    with pytest.raises(PtcError, match="is creating, not ready"):
        lifecycle.modify("busy", {"computeNodeCount": "2"})


class ReplacingBackend(GrowingBackend):
    """Replaces nodes by moving them to new ports, as a fresh container would be."""

    def __init__(self, fails: bool = False) -> None:
        super().__init__(delete_fails=False)
        self.fails = fails
        self.replaced: list[str] = []

    def replace_nodes(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        self.replaced = nodes
        if self.fails:
            raise PtcError(f"node {nodes[0]}: boot failed")
        manifest = rspec.parse_manifest(exp.manifest())
        for node in manifest.nodes:
            if node.client_id in nodes and node.login:
                node.login = Login(node.login.hostname, node.login.port + 100, "root")
        return rspec.write_manifest(manifest)


def test_replace_gives_fresh_nodes_new_logins_and_forgets_their_host_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exp = running("repl", 2)
    backend = ReplacingBackend()
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: backend)
    known_hosts = exp.inventory_dir / "known_hosts"
    known_hosts.write_text(
        "[127.0.0.1]:2200 ssh-ed25519 AAAAold-head\n[127.0.0.1]:2201 ssh-ed25519 AAAAnode0\n"
    )
    lifecycle.replace_nodes("repl", ["head"])
    assert backend.replaced == ["head"]
    assert experiments.load("repl").state is State.READY
    hosts = (exp.inventory_dir / "hosts.yml").read_text()
    assert "ansible_port: 2300" in hosts and "ansible_port: 2201" in hosts
    assert known_hosts.read_text().splitlines() == ["[127.0.0.1]:2201 ssh-ed25519 AAAAnode0"], (
        "the replaced node's old host key is kept, the others' are lost"
    )


def test_replace_names_unknown_nodes_and_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = running("replbad", 1)
    before = snapshot(exp)
    backend = ReplacingBackend()
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: backend)
    with pytest.raises(InputError, match=r"no node 'nodex'.*its nodes are head, node-0"):
        lifecycle.replace_nodes("replbad", ["head", "nodex"])
    assert backend.replaced == [] and snapshot(exp) == before


def test_a_failed_replace_leaves_the_experiment_ready_to_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exp = running("replfail", 1)
    before = snapshot(exp)
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: ReplacingBackend(fails=True))
    with pytest.raises(PtcError, match="node node-0: boot failed"):
        lifecycle.replace_nodes("replfail", ["node-0"])
    assert experiments.load("replfail").state is State.READY
    assert snapshot(exp) == before


# --- parameter warnings, struct parameters and the CLI's parameter options ------------------

PORTAL_PARAMS = PROFILE.parent / "portal_params.py"
SLOW = {"nodes": [{"name": "alpha"}, {"name": "beta"}], "lan": {"bandwidth": 5}}


class ManifestBackend(GrowingBackend):
    """Creates and modifies by returning the request as the manifest."""

    def create(self, exp: Experiment, request: Topology) -> bytes:
        return self.modify(exp, request, Change([], []))


def running_with(name: str, profile: Path, params: dict[str, Any]) -> Experiment:
    """A ready experiment as `ptc up` leaves it, made even if the profile warns."""
    exp = Experiment(name, "local", str(profile), params, state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    request_xml = render_request(profile, params, warnings_fatal=False).xml
    atomic.write_bytes(exp.request_path, request_xml)
    atomic.write_bytes(
        exp.manifest_path,
        ManifestBackend(False).create(exp, rspec.parse_request(request_xml)),
    )
    lifecycle.write_inventory(exp)
    return exp


def test_up_makes_parameter_warnings_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: ManifestBackend(False))
    with pytest.raises(InputError) as info:
        lifecycle.up(PORTAL_PARAMS, SLOW, "warned")
    assert "lan.bandwidth" in str(info.value) and "very slow" in str(info.value)
    assert "fatal here, as when the portal first instantiates" in str(info.value)
    assert not experiments.exists("warned")


def test_modify_reports_warnings_or_refuses_them(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = running_with("slow", PORTAL_PARAMS, SLOW)
    before = snapshot(exp)
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: ManifestBackend(False))
    more = {"nodes": [*SLOW["nodes"], {"name": "gamma"}]}
    with pytest.raises(InputError, match=r"lan\.bandwidth.*very slow"):
        lifecycle.modify("slow", more, warnings_fatal=True)
    assert snapshot(exp) == before

    events: list[Event] = []
    exp, change = lifecycle.modify("slow", more, collect(events), warnings_fatal=False)
    assert [n.client_id for n in change.added] == ["gamma"]
    warnings = [e.message for e in events if e.kind is Kind.WARNING]
    assert warnings == [
        "profile parameter warning: lan.bandwidth: a LAN under 10 Mbit/s is very slow"
    ]
    # the struct the change did not mention is kept
    assert experiments.load("slow").params["lan"] == {"bandwidth": 5}


def _cli() -> typer.Typer:
    from elastic.cli import experiment as experiment_cli

    app = typer.Typer()
    experiment_cli.register(app)
    return app


def test_cli_up_and_modify_take_a_params_file_and_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: ManifestBackend(False))
    runner = CliRunner()
    params = tmp_path / "params.json"
    params.write_text(json.dumps(to_bindings({"nodes": [{"name": "x"}, {"name": "y"}]})))
    args = ["up", str(PORTAL_PARAMS), "--name", "ptfile", "--params-file", str(params)]
    result = runner.invoke(_cli(), args)
    assert result.exit_code == 0, result.output
    manifest = rspec.parse_manifest(experiments.load("ptfile").manifest())
    assert [n.client_id for n in manifest.nodes] == ["x", "y"]

    # one item more, by its member path over the experiment's own list
    result = runner.invoke(_cli(), ["modify", "ptfile", "-p", "nodes[2].name=z"])
    assert result.exit_code == 0, result.output
    manifest = rspec.parse_manifest(experiments.load("ptfile").manifest())
    assert [n.client_id for n in manifest.nodes] == ["x", "y", "z"]

    # a file in the portal's form replaces the list whole: back to one node
    params.write_text(json.dumps(to_bindings({"nodes": [{"name": "x"}]})))
    result = runner.invoke(_cli(), ["modify", "ptfile", "--params-file", str(params)])
    assert result.exit_code == 0, result.output
    manifest = rspec.parse_manifest(experiments.load("ptfile").manifest())
    assert [n.client_id for n in manifest.nodes] == ["x"]


def test_cli_up_refuses_warnings_and_modify_only_with_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: ManifestBackend(False))
    runner = CliRunner()
    result = runner.invoke(
        _cli(), ["up", str(PORTAL_PARAMS), "--name", "ptwarn", "-p", "lan.bandwidth=5"]
    )
    assert isinstance(result.exception, InputError) and "very slow" in str(result.exception)

    running_with("ptslow", PORTAL_PARAMS, SLOW)
    grow = ["modify", "ptslow", "-p", "nodes[2].name=gamma"]
    result = runner.invoke(_cli(), [*grow, "--warnings-fatal"])
    assert isinstance(result.exception, InputError) and "very slow" in str(result.exception)
    result = runner.invoke(_cli(), grow)
    assert result.exit_code == 0, result.output
    assert "lan.bandwidth: a LAN under 10 Mbit/s is very slow" in " ".join(result.stderr.split()), (
        result.stderr
    )


class ImageBackend(FailingBackend):
    """Offers two disk images and records the experiment's choice when asked to create it."""

    capabilities = replace(StandInBackend.capabilities, disk_images=("prepared", "bare"))

    def create(self, exp: Experiment, request: Topology) -> bytes:
        self.chosen = exp.image
        raise PtcError("stop here")


@pytest.mark.parametrize(("asked", "chosen"), [(None, "prepared"), ("bare", "bare")])
def test_the_disk_image_is_the_testbed_s_first_unless_asked(
    monkeypatch: pytest.MonkeyPatch, asked: str | None, chosen: str
) -> None:
    backend = ImageBackend(delete_fails=False)
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: backend)
    with pytest.raises(PtcError, match="stop here"):
        lifecycle.up(PROFILE, {}, "imaged", image=asked)
    assert backend.chosen == chosen


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        (
            ImageBackend(delete_fails=False),
            "--image golden: the local testbed offers prepared or bare",
        ),
        (FailingBackend(delete_fails=False), "--image golden: the local testbed offers no choice"),
    ],
)
def test_an_image_the_testbed_does_not_offer_is_refused_before_anything_exists(
    monkeypatch: pytest.MonkeyPatch, backend: FailingBackend, expected: str
) -> None:
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: backend)
    with pytest.raises(InputError) as info:
        lifecycle.up(PROFILE, {}, "golden", image="golden")
    assert str(info.value).startswith(expected)
    assert not backend.deleted and not experiments.exists("golden")
