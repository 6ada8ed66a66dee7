"""`ptc deploy -e NAME=VALUE` parsing."""

from __future__ import annotations

import pytest

from elastic.cli.cluster import parse_extravars
from elastic.deploy.runner import resolve_playbook
from elastic.deploy.target import Target
from elastic.errors import PtcError
from elastic.testbed.experiment import Experiment, State


def test_values_are_yaml() -> None:
    assert parse_extravars(["a=true", "b=3", "c=text", "d=", "e=[1, 2]"]) == {
        "a": True,
        "b": 3,
        "c": "text",
        "d": "",
        "e": [1, 2],
    }


@pytest.mark.parametrize("bad", ["novalue", "=x", "k=[unclosed"])
def test_bad_pairs_name_the_argument(bad: str) -> None:
    with pytest.raises(PtcError, match="-e"):
        parse_extravars([bad])


def test_deploy_refuses_experiment_that_is_not_ready() -> None:
    with pytest.raises(PtcError, match="is creating, not ready"):
        Target.of_experiment(Experiment("x", "local", "p", state=State.CREATING))


def test_unknown_playbook_is_named() -> None:
    with pytest.raises(PtcError, match=r"playbook 'nope\.yml' not found"):
        resolve_playbook("nope.yml")
