"""An experiment's record on disk: its state is a ``State`` in memory and the same string as
ever in ``experiment.json``, so records written before the enum (and by older versions) load."""

from __future__ import annotations

import json

import pytest

from elastic.errors import InputError, PtcError
from elastic.testbed import experiment as experiments
from elastic.testbed.experiment import Experiment, State


def test_the_record_keeps_each_state_as_its_string() -> None:
    for state in State:
        exp = Experiment(f"s-{state}", "local", "p", state=state)
        exp.dir.mkdir(parents=True)
        exp.save()
        assert json.loads(exp.record_path.read_text())["state"] == state.value
        loaded = experiments.load(exp.name)
        assert loaded.state is state


def test_a_record_written_as_plain_strings_loads_with_its_state() -> None:
    exp = Experiment("old", "local", "p")
    exp.dir.mkdir(parents=True)
    record = {"name": "old", "testbed": "local", "profile": "p", "state": "modifying"}
    exp.record_path.write_text(json.dumps(record))
    assert experiments.load("old").state is State.MODIFYING


def test_an_unknown_state_on_disk_names_the_file_and_the_field() -> None:
    exp = Experiment("odd", "local", "p")
    exp.dir.mkdir(parents=True)
    record = {"name": "odd", "testbed": "local", "profile": "p", "state": "pausing"}
    exp.record_path.write_text(json.dumps(record))
    with pytest.raises(PtcError) as caught:
        experiments.load("odd")
    message = str(caught.value)
    assert str(exp.record_path) in message and "field 'state'" in message
    assert "'pausing'" in message and "modifying" in message


def test_a_caller_s_string_becomes_a_state_and_a_wrong_one_is_refused() -> None:
    assert Experiment("x", "local", "p", state="ready").state is State.READY  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Experiment("x", "local", "p", state="pausing")  # type: ignore[arg-type]


def test_only_a_ready_experiment_is_acted_on() -> None:
    Experiment("x", "local", "p", state=State.READY).require_ready()
    with pytest.raises(InputError, match=r"^deploy: experiment 'x' is modifying, not ready"):
        Experiment("x", "local", "p", state=State.MODIFYING).require_ready("deploy: ")
