"""The local testbed's size and books: settings, counting, reservations, refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testbed_support import StandInBackend
from typer.testing import CliRunner

from elastic import atomic
from elastic.errors import InputError, PtcError
from elastic.profile import rspec
from elastic.profile.render import render_profile
from elastic.profile.topology import Login, Topology
from elastic.testbed import experiment as experiments
from elastic.testbed import lifecycle
from elastic.testbed.backends.local import capacity, podman
from elastic.testbed.backends.local.capacity import Machine, NoMachines
from elastic.testbed.change import Change
from elastic.testbed.experiment import Experiment, State

REAL_LISTING = capacity.listing  # the conftest swaps it for an empty one in every test
PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "slurm_cluster.py"

# `podman ps -a --format json` as podman 4.3 prints it (trimmed to the fields read).
LISTING = json.dumps(
    [
        {
            "Names": ["ptc-alpha-head"],
            "Labels": {"io.ptc.experiment": "alpha", "io.ptc.node": "head", "io.ptc.testbed": "t"},
            "State": "running",
        },
        {
            "Names": ["ptc-alpha-node-0"],
            "Labels": {"io.ptc.experiment": "alpha", "io.ptc.node": "node-0"},
            "State": "exited",
        },
        {
            "Names": ["ptc-beta-head"],
            "Labels": {"io.ptc.experiment": "beta", "io.ptc.node": "head"},
            "State": "running",
        },
    ]
)


@pytest.fixture
def books(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Machine]:
    """A testbed of 4 machines whose podman listing is this list (the test edits it)."""
    monkeypatch.setenv(capacity.ENV, str(tmp_path / "tb"))
    capacity.set_machines(4)
    machines = capacity.parse_listing(LISTING)
    monkeypatch.setattr(capacity, "listing", lambda testbed: list(machines))
    return machines


# -- settings ---------------------------------------------------------------------------------


def test_default_size_comes_from_memory_and_cpus() -> None:
    assert capacity.default_machines("MemTotal:       24684092 kB\n", cpus=2) == 16
    assert capacity.default_machines("MemTotal:       24684092 kB\n", cpus=1) == 8
    assert capacity.default_machines("MemTotal:        2097152 kB\n", cpus=8) == 2
    with pytest.raises(PtcError, match="MemTotal"):
        capacity.default_machines("MemFree: 1 kB\n", cpus=2)


def test_without_settings_the_default_is_used(tmp_path: Path) -> None:
    size = capacity.settings()
    assert (size.machines, size.from_file) == (capacity.default_machines(), False)
    assert not (tmp_path / "testbed").exists()  # reading creates nothing


def test_set_writes_the_settings_file(tmp_path: Path) -> None:
    capacity.set_machines(5)
    assert json.loads((tmp_path / "testbed" / "settings.json").read_text()) == {"machines": 5}
    assert capacity.settings() == capacity.Settings(5, from_file=True)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"machines": "many"}', "'machines'"),
        ('{"machines": 0}', "'machines'"),
        ('{"machines": true}', "'machines'"),
        ("{}", "'machines' is missing"),
        ('{"machines": 3, "cpus": 2}', "'cpus'"),
        ("[3]", "expected an object"),
        ('{"machines": 3', "not JSON"),
    ],
)
def test_a_bad_settings_file_is_an_error_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "testbed" / "settings.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(InputError, match=field) as info:
        capacity.settings()
    assert str(path) in str(info.value)


def test_the_testbed_id_is_made_once(tmp_path: Path) -> None:
    assert capacity.testbed_id(create=False) is None
    made = capacity.testbed_id()
    assert made and capacity.testbed_id() == made
    assert (tmp_path / "testbed" / "id").read_text().strip() == made
    assert capacity.label_args() == ["--label", f"io.ptc.testbed={made}"]


# -- counting ---------------------------------------------------------------------------------


def test_stopped_nodes_hold_machines_and_removed_ones_do_not(books: list[Machine]) -> None:
    now = capacity.usage()
    assert (now.machines, now.in_use, now.free) == (4, 3, 1)
    assert now.holding("alpha").nodes == {"head": "running", "node-0": "stopped"}
    books.remove(Machine("alpha", "node-0", "exited"))  # `podman rm`
    assert capacity.usage().free == 2


def test_listing_is_filtered_by_this_testbeds_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def fake_run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        asked.extend(args)
        return subprocess.CompletedProcess(args, 0, stdout="[]\n", stderr="")

    monkeypatch.setattr(capacity.podman, "run", fake_run)
    assert REAL_LISTING("abc123") == []
    assert f"label={podman.TESTBED_LABEL}=abc123" in asked and "-a" in asked


# -- reservations -----------------------------------------------------------------------------


def test_a_reservation_holds_machines_until_the_block_ends(books: list[Machine]) -> None:
    with capacity.reserved("gamma", ["head"]):
        now = capacity.usage()
        assert now.free == 0 and now.holding("gamma").machines == 1
        with pytest.raises(NoMachines), capacity.reserved("delta", ["head"]):
            pass
    assert capacity.usage().free == 1
    assert json.loads(Path(os.environ[capacity.ENV], "reservations.json").read_text()) == []


def test_a_node_counts_once_while_being_made(books: list[Machine]) -> None:
    with capacity.reserved("gamma", ["head"]):
        books.append(Machine("gamma", "head", "running"))  # the container now exists
        assert capacity.usage().holding("gamma").machines == 1
        assert capacity.usage().free == 0


def test_replacing_held_nodes_needs_no_more_machines(books: list[Machine]) -> None:
    books.append(Machine("beta", "node-0", "running"))  # the testbed is full
    with capacity.reserved("beta", ["head", "node-0"]):
        assert capacity.usage().holding("beta").machines == 2
    refused = pytest.raises(NoMachines, match="'beta' needs 1 more machine,")
    with refused, capacity.reserved("beta", ["node-1"]):
        pass


# Another `ptc up` in its own process: it holds a reservation of the last free machine until its
# stdin closes. Its podman listing is the same fake as the test's (it makes no container).
HOLDER = """
import sys
from elastic.testbed.backends.local import capacity
from elastic.testbed.backends.local.capacity import Machine
capacity.listing = lambda testbed: [
    Machine("alpha", "head", "running"), Machine("alpha", "node-0", "exited"),
    Machine("beta", "head", "running"),
]
with capacity.reserved("other", ["head"]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_two_processes_cannot_both_take_the_last_machine(books: list[Machine]) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        refused = pytest.raises(NoMachines, match="'other' holds 1 \\(1 being created\\)")
        with refused, capacity.reserved("gamma", ["head"]):
            raise AssertionError("the last machine was given twice")
    finally:
        holder.communicate("")
    assert holder.returncode == 0
    with capacity.reserved("gamma", ["head"]):  # released when the other finished
        assert capacity.usage().free == 0


def test_a_reservation_of_a_killed_process_is_dropped(books: list[Machine]) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    assert capacity.usage().free == 0
    holder.kill()  # a `ptc up` killed mid-creation never drops its own reservation
    holder.wait()
    with capacity.reserved("gamma", ["head"]):
        assert [h.experiment for h in capacity.usage().holdings] == ["alpha", "beta", "gamma"]


def test_a_reservation_of_a_dead_process_is_dropped(books: list[Machine]) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    reused = capacity.Reservation("ghost", 1, os.getpid(), started=1)  # a reused pid
    live = capacity.Reservation("busy", 1, os.getpid(), capacity._start_time(os.getpid()))
    stale = capacity.Reservation("zombie", 3, dead.pid, None)
    capacity._write_reservations([stale, reused, live])
    now = capacity.usage()
    assert [h.experiment for h in now.holdings] == ["alpha", "beta", "busy"]
    with capacity.reserved("gamma", []):
        pass  # counting under the lock drops the stale ones for good
    kept = json.loads(Path(os.environ[capacity.ENV], "reservations.json").read_text())
    assert [r["experiment"] for r in kept] == ["busy"]


def test_the_refusal_says_needed_free_and_who_holds_the_rest(books: list[Machine]) -> None:
    with (
        pytest.raises(NoMachines) as info,
        capacity.reserved("gamma", ["head", "node-0"]),
    ):
        raise AssertionError("the block must not run")
    err = info.value
    assert (err.needed, err.free) == (2, 1)
    message = str(err)
    assert "'gamma' needs 2 machines" in message and "1 free of 4" in message
    assert "'alpha' holds 2 (1 running, 1 stopped)" in message
    assert "'beta' holds 1 (1 running)" in message
    assert err.exit_code == 3


def test_other_testbeds_are_not_counted(books: list[Machine]) -> None:
    from elastic.testbed import backends

    cloudlab = backends.backend_class("cloudlab")
    assert not cloudlab.capabilities.host_machines
    with cloudlab.reserved("big", [f"n{i}" for i in range(50)]):
        assert capacity.usage().holding("big").machines == 0
    local = backends.backend_class("local")
    with pytest.raises(NoMachines), local.reserved("big", [f"n{i}" for i in range(50)]):
        pass


def test_set_below_what_is_in_use_is_refused(books: list[Machine]) -> None:
    with pytest.raises(InputError, match="--machines 2 is below the 3 machines in use"):
        capacity.set_machines(2)
    assert capacity.settings().machines == 4
    assert capacity.set_machines(3).free == 0


# -- the lifecycle and the CLI ----------------------------------------------------------------


class NeverBackend(StandInBackend):
    """A backend that fails the test if anything is created; it only replaces held nodes."""

    def __init__(self) -> None:
        self.replaced: list[str] = []

    def preflight(self) -> None:
        pass

    def claim_name(self, name: str) -> None:
        pass

    def create(self, exp: Experiment, request: Topology) -> bytes:
        raise AssertionError("created despite too few machines")

    def delete(self, exp: Experiment) -> None:
        raise AssertionError("nothing to delete")

    def modify(self, exp: Experiment, request: Topology, change: Change) -> bytes:
        raise AssertionError("nodes added despite too few machines")

    def replace_nodes(self, exp: Experiment, request: Topology, nodes: list[str]) -> bytes:
        self.replaced = nodes
        return exp.manifest()


def on_disk(name: str, compute: int) -> Experiment:
    """A ready slurm_cluster.py experiment as `ptc up` leaves it (its containers: the books)."""
    params = {"computeNodeCount": str(compute)}
    exp = Experiment(name, "local", str(PROFILE), params, state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    request_xml = render_profile(PROFILE, params)
    atomic.write_bytes(exp.request_path, request_xml)
    manifest = rspec.parse_request(request_xml)
    for port, node in enumerate(manifest.nodes, start=2200):
        node.login = Login("127.0.0.1", port, "root")
    atomic.write_bytes(exp.manifest_path, rspec.write_manifest(manifest))
    return exp


def test_modify_adding_more_than_is_free_is_refused(
    books: list[Machine], monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = on_disk("alpha", 1)
    before = {p: p.read_bytes() for p in exp.dir.rglob("*") if p.is_file()}
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: NeverBackend())
    with pytest.raises(NoMachines, match=r"'alpha' needs 2 more machines.*1 free of 4"):
        lifecycle.modify("alpha", {"computeNodeCount": "3"})
    assert {p: p.read_bytes() for p in exp.dir.rglob("*") if p.is_file()} == before
    assert experiments.load("alpha").state is State.READY


def test_replace_needs_a_machine_only_for_a_node_whose_container_is_gone(
    books: list[Machine], monkeypatch: pytest.MonkeyPatch
) -> None:
    on_disk("alpha", 1)
    backend = NeverBackend()
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: backend)
    books.append(Machine("gamma", "head", "running"))  # the testbed is full
    lifecycle.replace_nodes("alpha", ["node-0"])  # held while stopped: replaced in place
    assert backend.replaced == ["node-0"]
    books.remove(Machine("alpha", "node-0", "exited"))
    books.append(Machine("gamma", "node-0", "running"))  # full again, node-0's machine taken
    backend.replaced = []
    with pytest.raises(NoMachines, match="'alpha' needs 1 more machine,"):
        lifecycle.replace_nodes("alpha", ["node-0"])
    assert backend.replaced == []


def test_up_is_refused_before_anything_exists(
    books: list[Machine], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle.backends, "get", lambda *a, **k: NeverBackend())
    with pytest.raises(NoMachines, match="needs 2 machines"):
        lifecycle.up(PROFILE, {"computeNodeCount": "1"}, "gamma", "local")
    assert not experiments.exists("gamma")
    assert not (experiments.Experiment("gamma", "local", "").dir).exists()


def test_cli_show_and_set(books: list[Machine]) -> None:
    from elastic.cli import testbed as testbed_cli

    runner = CliRunner()
    shown = runner.invoke(testbed_cli.app, ["show", "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert (data["machines"], data["in_use"], data["free"], data["sized"]) == (
        4,
        3,
        1,
        "settings",
    )
    assert data["experiments"][0] == {
        "name": "alpha",
        "machines": 2,
        "nodes": {"head": "running", "node-0": "stopped"},
        "creating": 0,
    }
    table = runner.invoke(testbed_cli.app, ["show"])
    assert "alpha" in table.output and "node-0 (stopped)" in table.output
    refused = runner.invoke(testbed_cli.app, ["set", "--machines", "1"])
    assert isinstance(refused.exception, InputError)
    assert "3 machines in use" in str(refused.exception)
    assert runner.invoke(testbed_cli.app, ["set", "--machines", "0"]).exit_code == 2
    assert data["provisioning"] == {
        "limits": {"concurrency": None, "per_minute": None, "full_per_minute": None},
        "running": [],
        "waiting": [],
        "started_last_minute": 0,
    }


def test_cli_sets_and_shows_the_provisioning_limits_and_queue(books: list[Machine]) -> None:
    from elastic.cli import testbed as testbed_cli
    from elastic.testbed.backends.local import provisioning

    runner = CliRunner()
    limited = runner.invoke(
        testbed_cli.app, ["set", "--provision-concurrency", "2", "--provisions-per-minute", "15"]
    )
    assert limited.exit_code == 0, limited.output
    assert "provisioning: 2 at once, 15 a minute" in limited.output
    full = runner.invoke(testbed_cli.app, ["set", "--full-provisions-per-minute", "5"])
    assert "provisioning: 2 at once, 15 a minute, 5 full (reload, allocate) a minute" in " ".join(
        full.output.split()
    ), full.output
    assert capacity.settings().machines == 4, "setting limits changed the size"
    with provisioning.slot("alpha", "reload", ["node-0"]):
        data = json.loads(runner.invoke(testbed_cli.app, ["show", "--json"]).output)
        table = runner.invoke(testbed_cli.app, ["show"]).output
    queue = data["provisioning"]
    assert queue["limits"] == {"concurrency": 2, "per_minute": 15, "full_per_minute": 5}
    assert [(e["experiment"], e["action"], e["nodes"]) for e in queue["running"]] == [
        ("alpha", "reload", ["node-0"])
    ]
    assert queue["started_last_minute"] == 1
    flat = " ".join(table.split())
    assert "1 nodes provisioning" in flat and "provisioning queue" in flat, table
    nothing = runner.invoke(testbed_cli.app, ["set"])
    assert isinstance(nothing.exception, InputError)
    assert "--provision-concurrency" in str(nothing.exception)
