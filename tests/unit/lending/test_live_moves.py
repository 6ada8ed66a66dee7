"""Whether a machine can move between two experiments is asked of their testbeds' declared
capabilities, before the pool acquires (and so preempts) anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.lending.live import LiveTestbed
from elastic.testbed.experiment import Experiment, State


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PTC_HOME", str(tmp_path))
    for name, testbed in (("a", "local"), ("b", "local"), ("c", "cloudlab"), ("d", "cloudlab")):
        exp = Experiment(name, testbed, "profiles/slurm_cluster.py", state=State.READY)
        exp.dir.mkdir(parents=True)
        exp.save()
    return tmp_path


def test_the_local_testbed_moves_machines_between_its_experiments(home: Path) -> None:
    assert LiveTestbed().moves_nodes("a", "b") is None


def test_cloudlab_cannot_move_a_machine(home: Path) -> None:
    why = LiveTestbed().moves_nodes("c", "d")
    assert why is not None and "cloudlab testbed cannot move a machine" in why


def test_a_machine_never_moves_across_testbeds(home: Path) -> None:
    why = LiveTestbed().moves_nodes("a", "c")
    assert why is not None and "a is on the local testbed and c on the cloudlab" in why
