"""Faults of a FAKE EC2 region: capacity refusals counted once per call, interrupts queued."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic.errors import InputError, PtcError
from elastic.testbed.backends.local.fake_ec2.faults import Faults


def test_a_count_refuses_exactly_that_many_calls_then_none(tmp_path: Path) -> None:
    faults = Faults(tmp_path)
    assert not faults.take_capacity()
    faults.set_capacity(2)
    assert [faults.take_capacity() for _ in range(4)] == [True, True, False, False]
    assert faults.read().capacity is None


def test_until_cleared_refuses_every_call_until_cleared(tmp_path: Path) -> None:
    faults = Faults(tmp_path)
    faults.set_capacity(None)
    assert all(faults.take_capacity() for _ in range(10))
    assert faults.clear_capacity()
    assert not faults.take_capacity()
    assert not faults.clear_capacity()


def test_the_count_is_shared_through_the_file(tmp_path: Path) -> None:
    Faults(tmp_path).set_capacity(1)
    assert Faults(tmp_path).take_capacity()  # another process's view of the same region
    assert not Faults(tmp_path).take_capacity()
    assert (tmp_path / "faults.json").stat().st_mode & 0o777 == 0o600


def test_bad_counts_and_notices_are_refused_naming_the_option(tmp_path: Path) -> None:
    faults = Faults(tmp_path)
    with pytest.raises(InputError, match="--count must be at least 1, not 0"):
        faults.set_capacity(0)
    with pytest.raises(InputError, match="--notice must be 0 seconds or more"):
        faults.interrupt("node-1", -1, 0.0)


def test_an_interrupt_is_queued_once_per_node_until_done(tmp_path: Path) -> None:
    faults = Faults(tmp_path)
    asked = faults.interrupt("node-1", 120, 1000.0)
    assert asked.due == 1120.0
    with pytest.raises(InputError, match="node 'node-1': an interruption is already pending"):
        faults.interrupt("node-1", 0, 1001.0)
    assert [i.node for i in faults.read().interrupts] == ["node-1"]
    faults.done("node-1")
    assert faults.read().interrupts == []


def test_a_damaged_file_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "faults.json").write_text(json.dumps({"capacity": "lots"}))
    with pytest.raises(PtcError, match=r"faults\.json: field capacity"):
        Faults(tmp_path).read()
