"""`ptc profile render|check|params` through typer's test runner."""

from __future__ import annotations

from pathlib import Path

import pytest
from testbed_support import SLURM_PROFILE, TEST_PROFILES
from typer.testing import CliRunner

from elastic.cli.options import parse_params
from elastic.cli.profile import app
from elastic.errors import PtcError
from elastic.testbed import rspec

runner = CliRunner()


def test_render_to_stdout_is_a_valid_request() -> None:
    result = runner.invoke(app, ["render", str(SLURM_PROFILE), "-p", "computeNodeCount=3"])
    assert result.exit_code == 0, result.output
    t = rspec.parse_request(result.stdout_bytes)
    assert [n.client_id for n in t.nodes] == ["head", "node-0", "node-1", "node-2"]


def test_render_to_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "request.xml"
    result = runner.invoke(app, ["render", str(TEST_PROFILES / "two_lans.py"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(rspec.parse_request(out.read_bytes()).links) == 2
    assert "5 nodes, 2 links" in result.stderr


def test_check_prints_summary() -> None:
    result = runner.invoke(app, ["check", str(TEST_PROFILES / "point_to_point.py")])
    assert result.exit_code == 0, result.output
    assert "10.30.0.4/30" in result.stdout
    assert "100000 kbps" in result.stdout
    assert "ok: 3 nodes, 2 links, 4 interfaces" in result.stdout


def test_params_lists_types_and_defaults() -> None:
    result = runner.invoke(app, ["params", str(SLURM_PROFILE)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "computeNodeCount" in result.stdout
    assert "integer" in result.stdout
    assert "slurm_compute,nfs_client" in result.stdout


def test_bad_parameter_raises_ptc_error() -> None:
    result = runner.invoke(app, ["check", str(SLURM_PROFILE), "-p", "computeNodeCount=0"])
    assert isinstance(result.exception, PtcError)
    assert "computeNodeCount" in str(result.exception)


@pytest.mark.parametrize(
    ("values", "fragment"),
    [(["x"], "NAME=VALUE"), (["=1"], "NAME=VALUE"), (["a=1", "a=2"], "twice")],
)
def test_parse_params_errors(values: list[str], fragment: str) -> None:
    with pytest.raises(PtcError, match=fragment):
        parse_params(values)


def test_parse_params_keeps_equals_in_values() -> None:
    assert parse_params(["iacRepo=https://x/y?a=b"]) == {"iacRepo": "https://x/y?a=b"}
