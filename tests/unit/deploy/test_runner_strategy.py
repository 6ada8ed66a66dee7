"""`ptc deploy` runs mitogen's strategy unless told not to (--no-mitogen, PTC_MITOGEN=0)."""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from elastic.deploy import runner


def test_mitogen_strategy_is_set_and_its_plugin_exists() -> None:
    env = runner._environment(mitogen=True)
    assert env["ANSIBLE_STRATEGY"] == "ptc_mitogen_linear"
    ours, mitogens = (Path(p) for p in env["ANSIBLE_STRATEGY_PLUGINS"].split(os.pathsep))
    assert (ours / "ptc_mitogen_linear.py").is_file()
    assert (mitogens / "mitogen_linear.py").is_file()


def test_without_mitogen_ansible_chooses_its_own_strategy() -> None:
    env = runner._environment(mitogen=False)
    assert "ANSIBLE_STRATEGY" not in env
    assert "ANSIBLE_STRATEGY_PLUGINS" not in env
    assert env["ANSIBLE_CONFIG"].endswith("ansible.cfg")


@pytest.mark.parametrize(
    ("value", "enabled"),
    [(None, True), ("1", True), ("yes", True), ("0", False), ("false", False), ("OFF", False)],
)
def test_ptc_mitogen_environment_variable(
    monkeypatch: pytest.MonkeyPatch, value: str | None, enabled: bool
) -> None:
    if value is None:
        monkeypatch.delenv(runner.MITOGEN_ENV, raising=False)
    else:
        monkeypatch.setenv(runner.MITOGEN_ENV, value)
    assert runner.mitogen_enabled() is enabled


@pytest.mark.parametrize(("flag", "expected"), [([], None), (["--no-mitogen"], False)])
def test_cli_flag_reaches_the_runner(
    monkeypatch: pytest.MonkeyPatch, flag: list[str], expected: bool | None
) -> None:
    import typer

    from elastic.cli import cluster

    app = typer.Typer()
    cluster.register(app)

    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def fake_deploy(*args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(runner, "deploy", fake_deploy)
    # an experiment whose testbed powers nothing: the deploy wakes no node
    monkeypatch.setattr(
        cluster.experiments,
        "load",
        lambda name: types.SimpleNamespace(name=name, adopted=True, testbed="cloudlab"),
    )
    monkeypatch.setattr("elastic.deploy.target.Target.of_experiment", lambda exp: exp)
    result = CliRunner().invoke(app, ["deploy", "x", *flag])
    assert isinstance(result.exception, Stop)
    assert seen["mitogen"] is expected
