"""The local testbed's fixed number of machines: `ptc up` that needs more than are free is
refused before anything is created, and `ptc down` gives the machines back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from naming import experiment_name
from remote import containers

from elastic.testbed.backends.local import capacity
from elastic.testbed.backends.local.network import namespace_exists

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIRST, SECOND = experiment_name("capa"), experiment_name("capb")
RACERS = experiment_name("capr1"), experiment_name("capr2")
REPO = Path(__file__).resolve().parents[2]
PROFILE = "profiles/slurm_cluster.py"
Runner = Callable[..., subprocess.CompletedProcess[str]]


def shown(ptc: Runner) -> dict[str, Any]:
    proc = ptc("testbed", "show", "--json")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def held(data: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {e["name"]: e["nodes"] for e in data["experiments"]}


def test_a_testbed_of_three_machines(
    ptc: Runner,
    experiment_factory: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(capacity.ENV, str(tmp_path / "small-testbed"))
    assert ptc("testbed", "set", "--machines", "3").returncode == 0
    assert (shown(ptc)["machines"], shown(ptc)["free"]) == (3, 3)
    home = Path(os.environ["PTC_HOME"]) / "experiments"
    try:
        # 1 + 1 nodes: two of the three machines.
        experiment_factory(FIRST, PROFILE, "computeNodeCount=1")
        now = shown(ptc)
        assert (now["in_use"], now["free"]) == (2, 1)
        assert held(now) == {FIRST: {"head": "running", "node-0": "running"}}

        # A second 1 + 1 is refused, saying how many are free and who holds the others.
        proc = ptc("up", PROFILE, "--local", "--name", SECOND, "-p", "computeNodeCount=1")
        assert proc.returncode == 3, proc.stderr
        message = " ".join(proc.stderr.split())
        assert f"'{SECOND}' needs 2 machines" in message
        assert "has 1 free of 3" in message
        assert f"'{FIRST}' holds 2 (2 running)" in message
        assert containers(SECOND) == []
        assert not namespace_exists(SECOND)
        assert not (home / SECOND).exists()

        # The testbed cannot shrink below what is in use.
        proc = ptc("testbed", "set", "--machines", "1")
        assert proc.returncode == 2
        assert "below the 2 machines in use" in " ".join(proc.stderr.split())

        # A stopped (powered-off) node keeps its machine.
        subprocess.run(
            ["podman", "stop", "--time", "5", f"ptc-{FIRST}-node-0"], check=True, timeout=120
        )
        now = shown(ptc)
        assert held(now) == {FIRST: {"head": "running", "node-0": "stopped"}}
        assert now["free"] == 1
        table = ptc("testbed", "show")
        assert FIRST in table.stdout and "node-0 (stopped)" in table.stdout

        # `ptc down` gives both machines back, and the second experiment fits.
        assert ptc("down", FIRST).returncode == 0
        assert shown(ptc)["free"] == 3
        experiment_factory(SECOND, PROFILE, "computeNodeCount=1")
        assert held(shown(ptc)) == {SECOND: {"head": "running", "node-0": "running"}}
        assert ptc("down", SECOND).returncode == 0
        assert shown(ptc)["free"] == 3
    finally:
        for name in (FIRST, SECOND):
            if (home / name).exists():
                ptc("down", name)


def test_two_ups_at_once_cannot_both_take_the_last_machines(
    ptc: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(capacity.ENV, str(tmp_path / "small-testbed"))
    assert ptc("testbed", "set", "--machines", "3").returncode == 0
    home = Path(os.environ["PTC_HOME"]) / "experiments"
    argv = [sys.executable, "-m", "elastic.cli", "up", PROFILE, "--local"]
    racers = [
        subprocess.Popen(
            [*argv, "--name", name, "-p", "computeNodeCount=1"],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ | {"COLUMNS": "200"},
        )
        for name in RACERS
    ]
    try:
        errors = [racer.communicate(timeout=900)[1] for racer in racers]
        codes = sorted(racer.returncode for racer in racers)
        assert codes == [0, 3], errors
        loser = RACERS[[r.returncode for r in racers].index(3)]
        assert "needs 2 machines" in " ".join(errors[RACERS.index(loser)].split())
        assert containers(loser) == [] and not (home / loser).exists()
        assert shown(ptc)["in_use"] == 2
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
        for name in RACERS:
            if (home / name).exists():
                ptc("down", name)
