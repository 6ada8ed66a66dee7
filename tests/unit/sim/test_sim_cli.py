"""`ptc sim stats|run|report` end to end on small inputs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tracedata import trace_file
from typer.testing import CliRunner

from elastic.cli.sim import app
from elastic.errors import InputError

runner = CliRunner()

SWF = "\n".join(
    f"{i} {i * 40} 0 {r} {n} -1 -1 {n} {r * 2} -1 1 {1 + i % 3} 1 -1 {1 + i % 2} -1 -1 -1"
    for i, (r, n) in enumerate(
        [(300, 2), (120, 1), (900, 3), (60, 1), (1500, 2), (400, 4), (200, 1), (700, 2)] * 3,
        start=1,
    )
)


def test_stats_prints_table_1_for_htc() -> None:
    result = runner.invoke(app, ["stats", str(trace_file("htc-condor"))])
    assert result.exit_code == 0, result.output
    assert "11,200 jobs, 1,379.05 node-hours" in result.output
    assert "134.25" in result.output


def test_run_then_report(tmp_path: Path) -> None:
    trace = tmp_path / "small.swf"
    trace.write_text("; Version: 2.2\n" + SWF + "\n")
    out = tmp_path / "out"
    args = ["run", str(trace), "--out", str(out), "--nodes", "4", "--preempt", "2"]
    args += ["--grace-periods", "60,1800,3600", "--priority-rule", "queue=2:10", "--no-progress"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    samples = pd.read_parquet(out / "samples.parquet")
    assert set(samples["policy"]) == {"RANDOM", "FIFO", "LIFO", "PAP", "PAP+"}
    assert sorted(set(samples["gp_s"])) == [60.0, 1800.0, 3600.0]
    assert (samples["wc"] >= 0).all()
    assert ((samples["wc_high"] + samples["wc_default"]) == samples["wc"]).all()
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 15
    for name in ("fig3_wc_violins.png", "fig4_wc_violins_long_gp.png", "fig6_cumulative_wc.png"):
        assert (out / name).stat().st_size > 1000
    (out / "fig3_wc_violins.png").unlink()
    again = runner.invoke(app, ["report", str(out)])
    assert again.exit_code == 0, again.output
    assert (out / "fig3_wc_violins.png").is_file()
    pd.testing.assert_frame_equal(pd.read_csv(out / "summary.csv"), summary)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policies", "LIFO,SJF"], "unknown policy 'SJF'"),
        (["--grace-periods", "60,soon"], "'soon' is not a number"),
        (["--preempt", "30"], "--preempt 30 exceeds --nodes 20"),
        (["--arrival", "later"], "--arrival must be"),
        (["--priority-rule", "queue:10"], "expected field=pattern:priority"),
    ],
)
def test_user_errors_are_ptc_errors(tmp_path: Path, extra: list[str], message: str) -> None:
    trace = trace_file("htc-condor")
    args = ["run", str(trace), "--out", str(tmp_path), "--htc-copies", "1", "--no-plots", *extra]
    result = runner.invoke(app, args)
    assert isinstance(result.exception, InputError)
    assert message in str(result.exception)
