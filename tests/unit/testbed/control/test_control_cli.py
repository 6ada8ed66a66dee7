"""`ptc control status|start|stop|metrics` on a local experiment (a real daemon: its health and
its metrics are asked), and the refusal for an experiment whose nodes cannot reach a service on this host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer
from control_support import make_experiment
from typer.testing import CliRunner

from elastic.cli import control as control_cli
from elastic.testbed.backends.local.control import service
from elastic.testbed.experiment import Experiment, State

app = typer.Typer()
app.add_typer(control_cli.app, name="control")


@pytest.fixture
def alpha() -> Iterator[Experiment]:
    exp = make_experiment("alpha")
    yield exp
    service.stop(exp)


def test_status_start_stop(alpha: Experiment) -> None:
    runner = CliRunner()
    stopped = runner.invoke(app, ["control", "status", "alpha"])
    assert stopped.exit_code == 1 and "alpha: stopped" in stopped.output
    started = runner.invoke(app, ["control", "start", "alpha"])
    assert started.exit_code == 0, started.output
    assert service.status(alpha).running
    running = runner.invoke(app, ["control", "status", "alpha"])
    assert running.exit_code == 0 and "alpha: running" in running.output
    # its metrics, through the socket with the credential (no machine of alpha exists)
    metrics = runner.invoke(app, ["control", "metrics", "alpha"])
    assert metrics.exit_code == 0, metrics.output
    assert "# TYPE ptc_control_operation_seconds histogram" in metrics.output
    stop = runner.invoke(app, ["control", "stop", "alpha"])
    assert stop.exit_code == 0 and "alpha: stopped" in stop.output
    assert not service.status(alpha).running


def test_cloudlab_experiment_has_no_control_service() -> None:
    exp = Experiment(name="remote", testbed="cloudlab", profile="p", state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    result = CliRunner().invoke(app, ["control", "start", "remote"])
    assert result.exit_code != 0
    assert "cloudlab" in str(result.exception)
    assert not exp.control_dir.exists()
