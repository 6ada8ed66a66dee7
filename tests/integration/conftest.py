"""Fixtures for tests on the local testbed: real containers, real SSH, driven through the ptc CLI.

Every experiment lives under a per-session PTC_HOME, and every fixture that creates one also takes
it down, so a failing test leaves no containers or namespaces behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from naming import experiment_name

from elastic.testbed.backends.local import capacity

REPO = Path(__file__).resolve().parents[2]
SESSION_MACHINES = 64
PTC = [sys.executable, "-m", "elastic.cli"]


def _testbed_available() -> str | None:
    for tool in ("podman", "runc", "debootstrap", "ip", "ssh"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (run `make setup`)"
    if os.geteuid() != 0:
        return "the local testbed needs root"
    return None


def pytest_itemcollected(item: pytest.Item) -> None:
    # Under `pytest -n N --dist loadgroup` a module's tests stay on one worker (its cluster is a
    # module fixture), and every module on the shared cluster joins one group, so it is made once.
    # Marked as each item is collected: xdist reads the groups in its own modifyitems hook.
    # A test may name a group of its own: a long module split in two runs on two workers, each
    # with its own copy of the module's cluster.
    if not isinstance(item, pytest.Function) or item.get_closest_marker("xdist_group"):
        return
    shared = "shared_cluster" in item.fixturenames
    item.add_marker(pytest.mark.xdist_group("shared-cluster" if shared else item.module.__name__))


# The order groups start in: xdist hands out groups in collection order (with
# --no-loadscope-reorder), and gives a worker its next group once two of its tests are left.
# The two elastic groups, each longer than any other worker's share, start at once and are the
# critical path; the other long ones go early, so that only the short modules are left when an
# elastic worker nears its end (test_slurm_production, 241 s, once ran after an elastic group).
LONGEST_FIRST = (
    "test_elastic",
    "test_elastic_faults",
    "shared-cluster",
    "test_slurm_production",
    "test_cluster",
    "test_configserver",
)


def _group_rank(item: pytest.Item) -> int:
    marker = item.get_closest_marker("xdist_group")
    group = marker.args[0] if marker and marker.args else ""
    return LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_group_rank)  # stable: every module keeps its tests in file order
    reason = _testbed_available()
    if reason is None:
        return
    # In CI a missing testbed is a failure, not a skip: the integration tests must run there.
    if os.environ.get("CI"):
        raise pytest.UsageError(f"local testbed unavailable in CI: {reason}")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Seconds per group and per worker (setup, call and teardown of every test): the groups are
    balanced across the workers by hand (the order above), and this is what to balance by."""
    groups: dict[str, float] = {}
    workers: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if not isinstance(report, pytest.TestReport):
                continue
            group = report.nodeid.rpartition("@")[2] if "@" in report.nodeid else "-"
            gateway = getattr(getattr(report, "node", None), "gateway", None)
            worker = str(getattr(gateway, "id", "main"))
            groups[group] = groups.get(group, 0.0) + report.duration
            workers[worker] = workers.get(worker, 0.0) + report.duration
    if not groups:
        return
    terminalreporter.write_sep("=", "seconds per group, and per worker")
    for name, seconds in sorted(groups.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f}  {name}")
    terminalreporter.write_line(
        "workers: " + ", ".join(f"{w} {s:.0f}" for w, s in sorted(workers.items()))
    )


@pytest.fixture(scope="session")
def ptc_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("ptc-home")
    os.environ["PTC_HOME"] = str(home)
    os.environ.setdefault(
        "CONTAINERS_CONF", str(REPO / "elastic/testbed/backends/local/containers.conf")
    )
    # The session's own testbed, large enough for every module's experiments at once: the
    # host's testbed is shared with other sessions and users. A test that wants a small one
    # points PTC_TESTBED_DIR elsewhere for its own commands.
    os.environ[capacity.ENV] = str(tmp_path_factory.mktemp("testbed"))
    capacity.set_machines(SESSION_MACHINES)
    return home


Runner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def ptc(ptc_home: Path) -> Runner:
    """Run the real `ptc` CLI; returns the completed process (never raises on failure)."""

    def run(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*PTC, *args],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=os.environ | {"COLUMNS": "200"},
        )
        sys.stderr.write(f"$ ptc {' '.join(args)} -> {proc.returncode}\n{proc.stderr[-3000:]}\n")
        return proc

    return run


SHARED_NAME = experiment_name("shared", "PTC_TEST_SHARED_CLUSTER_NAME")

# Every experiment created in this session, in order; the shared cluster outlives its module.
_created: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _down_module_experiments(ptc: Runner) -> Iterator[None]:
    """Take a module's own experiments down when the module ends, not at the end of the session.

    Twenty idle systemd nodes still cost CPU on a 2-core machine, so a module's cluster must not
    slow the modules after it. The shared cluster is the one experiment that stays."""
    before = len(_created)
    yield
    mine = [n for n in _created[before:] if n != SHARED_NAME]
    if not mine:
        return
    for name in mine:
        if (Path(os.environ["PTC_HOME"]) / "experiments" / name).exists():
            ptc("down", name)


@pytest.fixture(scope="session")
def experiment_factory(ptc: Runner) -> Iterator[Callable[..., Path]]:
    """Create experiments with `ptc up`; each module's go down with it, the rest at the end."""
    created = _created

    def make(name: str, profile: str, *params: str, image: str | None = None) -> Path:
        args = ["up", profile, "--local", "--name", name]
        if image:
            args += ["--image", image]
        for p in params:
            args += ["--param", p]
        created.append(name)
        proc = ptc(*args)
        assert proc.returncode == 0, f"ptc up {name} failed:\n{proc.stderr[-4000:]}"
        return Path(os.environ["PTC_HOME"]) / "experiments" / name

    yield make
    for name in created:
        if (Path(os.environ["PTC_HOME"]) / "experiments" / name).exists():
            ptc("down", name)


@pytest.fixture(scope="session")
def shared_cluster(experiment_factory: Callable[..., Path], ptc: Runner) -> Path:
    """One deployed 1+2 cluster for every module that only submits work to it.

    Tests that use it must leave it as they found it (no reconfiguration, nodes resumed), so that
    the modules sharing it stay independent of their order; modules that reconfigure Slurm or
    grow the experiment create their own.
    """
    name = SHARED_NAME
    expdir = experiment_factory(name, "profiles/slurm_cluster.py", "computeNodeCount=2")
    proc = ptc("deploy", name)
    assert proc.returncode == 0, f"ptc deploy {name} failed:\n{proc.stderr[-6000:]}"
    return expdir
