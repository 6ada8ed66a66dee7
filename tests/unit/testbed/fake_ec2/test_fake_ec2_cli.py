"""`ptc fake-ec2` refuses what it cannot do before anything starts, naming the option or the
experiment (no region and no machine is made here)."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from elastic.cli import fake_ec2 as fake_ec2_cli
from elastic.errors import InputError
from elastic.testbed.experiment import Experiment, State

app = typer.Typer()
app.add_typer(fake_ec2_cli.app, name="fake-ec2")


def make(name: str, testbed: str = "local") -> Experiment:
    exp = Experiment(name=name, testbed=testbed, profile="p", state=State.READY)
    exp.dir.mkdir(parents=True)
    exp.save()
    return exp


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["fault", "capacity", "alpha"], "give one of --count N, --until-cleared, --clear"),
        (["fault", "capacity", "alpha", "--count", "2", "--clear"], "give one of"),
        (["fault", "capacity", "alpha", "--count", "2"], "has no FAKE EC2 region running"),
        (["fault", "interrupt", "alpha", "node-3"], "has no FAKE EC2 region running"),
        (["start", "alpha", "--boot-delay", "-1"], "--boot-delay must be 0 seconds or more"),
        (["start", "alpha", "--region", "mars"], "--region 'mars' is no region name"),
        (["start", "remote"], "is on the cloudlab testbed: a FAKE EC2 region realises"),
    ],
)
def test_refusals_name_what_is_wrong(args: list[str], said: str) -> None:
    make("alpha")
    make("remote", testbed="cloudlab")
    result = CliRunner().invoke(app, ["fake-ec2", *args])
    assert isinstance(result.exception, InputError), result.output
    assert said in str(result.exception)


def test_status_without_a_region_says_so_and_fails() -> None:
    make("alpha")
    result = CliRunner().invoke(app, ["fake-ec2", "status", "alpha"])
    assert result.exit_code == 1 and "alpha: no FAKE EC2 region running" in result.output
