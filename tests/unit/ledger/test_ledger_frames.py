"""The ledger's files (Parquet datasets and a PNG, under --out) and the command's refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from ledger_samples import EVENTS, EXPAND, UNTIL, WHOLE, WHOLE_SINCE

from elastic import paths
from elastic.ledger import frames, pool, records
from elastic.ledger.runs import parse_runs


@pytest.mark.parametrize("by", records.BY)
def test_out_writes_the_datasets_and_a_plot_with_every_column_described(
    tmp_path: Path, by: str
) -> None:
    book = records.build(
        "devel", WHOLE_SINCE, UNTIL, parse_runs(WHOLE), pool.fold(EVENTS), expand=EXPAND
    )
    written = frames.write(book, by, tmp_path)
    assert [p.name for p in written] == [
        "ledger.parquet",
        "runs.parquet",
        "loans.parquet",
        "instances.parquet",
        "ledger.png",
    ]
    summary = pd.read_parquet(tmp_path / "ledger.parquet")
    assert len(summary) == len(records.summarise(book, by))
    run_rows = pd.read_parquet(tmp_path / "runs.parquet")
    assert int(run_rows["used_node_s"].sum()) == 242 and int(run_rows["lost_node_s"].sum()) == 39
    assert pd.read_parquet(tmp_path / "loans.parquet").empty  # no lending: columns, no rows
    for name in ("ledger", "runs", "loans", "instances"):
        described = json.loads((tmp_path / f"{name}.columns.json").read_text())
        assert all(c["meaning"] for c in described.values()), (name, described)
    assert (tmp_path / "ledger.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically, nothing left half-way


def ptc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elastic.cli", *args],
        cwd=paths.REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--by", "bogus"], "--by 'bogus'"), (["--since", "yesterday"], "--since 'yesterday'")],
)
def test_bad_input_exits_2_naming_the_parameter_before_any_cluster_is_asked(
    args: list[str], named: str
) -> None:
    done = ptc("elastic", "ledger", "no-such-experiment", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert named in done.stderr, done.stderr
