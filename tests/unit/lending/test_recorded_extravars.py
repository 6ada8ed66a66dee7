"""A given-back node is deployed with the extra variables of the experiment's last successful
deploy, read from its run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic.errors import InputError
from elastic.lending.live import recorded_extravars
from elastic.testbed.experiment import Experiment


def run(exp: Experiment, name: str, status: str, extravars: dict[str, object] | None) -> None:
    d = exp.runs_dir / name
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"status": status}))
    if extravars is not None:
        (d / "extravars.json").write_text(json.dumps(extravars))


@pytest.fixture
def exp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Experiment:
    monkeypatch.setenv("PTC_HOME", str(tmp_path))
    return Experiment("ep", "local", "profiles/slurm_cluster.py")


def test_the_last_successful_deploy_s_variables(exp: Experiment) -> None:
    assert recorded_extravars(exp) == {}
    run(exp, "20260101T000000-site", "successful", {"ptc_elastic": True, "x": 1})
    run(exp, "20260102T000000-site", "failed", {"ptc_elastic": False})
    run(exp, "20260103T000000-verify", "successful", {"y": 2})
    assert recorded_extravars(exp) == {"ptc_elastic": True, "x": 1}
    run(exp, "20260104T000000-site", "successful", None)
    assert recorded_extravars(exp) == {}


def test_a_deploy_given_a_secret_cannot_be_replayed(exp: Experiment) -> None:
    run(exp, "20260101T000000-site", "successful", {"ptc_elastic": True, "db_password": "REDACTED"})
    with pytest.raises(InputError, match="db_password"):
        recorded_extravars(exp)
