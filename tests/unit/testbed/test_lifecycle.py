"""What `ptc up` leaves behind when the testbed fails part-way."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.errors import PtcError
from elastic.testbed import experiment as experiments
from elastic.testbed import lifecycle
from elastic.testbed.experiment import Experiment
from elastic.testbed.topology import Topology

PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "tests" / "single_node.py"


class FailingBackend:
    """A backend whose create fails; delete fails too when asked to."""

    def __init__(self, delete_fails: bool) -> None:
        self.delete_fails = delete_fails
        self.deleted = False

    def preflight(self) -> None:
        pass

    def create(self, exp: Experiment, request: Topology) -> bytes:
        raise PtcError("node head: boot failed")

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


def test_failed_up_is_cleaned_up_and_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = FailingBackend(delete_fails=False)
    monkeypatch.setattr(lifecycle, "make_backend", lambda *a, **k: backend)
    with pytest.raises(PtcError, match="boot failed"):
        lifecycle.up(PROFILE, {}, "broken")
    assert backend.deleted
    assert not experiments.exists("broken")


def test_failed_cleanup_keeps_the_record_for_ptc_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        lifecycle, "make_backend", lambda *a, **k: FailingBackend(delete_fails=True)
    )
    with pytest.raises(PtcError) as info:
        lifecycle.up(PROFILE, {}, "stuck")
    assert "ptc down stuck" in "".join(getattr(info.value, "__notes__", []))
    assert experiments.load("stuck").state == "failed"


def test_existing_name_is_refused_without_touching_it(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = Experiment(name="taken", testbed="local", profile="p", state="ready")
    exp.dir.mkdir(parents=True)
    exp.save()
    with pytest.raises(PtcError, match="already exists"):
        lifecycle.up(PROFILE, {}, "taken")
    assert experiments.load("taken").state == "ready"


@pytest.mark.parametrize("name", ["Bad", "-x", "a b", "x" * 40, ""])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(PtcError, match="experiment name"):
        experiments.validate_name(name)
