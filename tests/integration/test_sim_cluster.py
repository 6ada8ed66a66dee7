"""`ptc sim run --on NAME`: the sweep as a Slurm job array on the shared cluster, merged here,
against the same run done locally.

A small sweep (the first 300 KTH-SP2 jobs, 5 policies x 10 grace periods, 5% of the jobs at
high priority) cut into 7 array tasks, so that parts hold several policies' worth of grace
periods and some policies are split across tasks. The merged samples must equal a local
run's: the files byte for byte, and the tables after sorting, row by row. The test leaves the
cluster as it found it apart from the unpacked Python packages under /opt/ptc/sim, which later
runs reuse.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from remote import ssh
from tracedata import missing, trace_file

Runner = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    # Before any fixture: a skip in one would come after the shared cluster was made.
    pytest.mark.skipif(bool(missing("kth-sp2")), reason=missing("kth-sp2")),
]

ARGS = ("--limit-jobs", "300", "--high-fraction", "0.05", "--no-plots", "--no-progress")
KEY = [("policy", "ascending"), ("gp_s", "ascending"), ("snapshot", "ascending")]


def _sorted_bytes(path: Path) -> bytes:
    table = pq.read_table(path)
    table = table.cast(table.schema.set(0, pa.field("policy", pa.string())))  # decode names
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.sort_by(KEY))
    return sink.getvalue()


@pytest.fixture(scope="module")
def trace() -> Path:
    return trace_file("kth-sp2")


def test_sweep_on_the_cluster_equals_a_local_run(
    trace: Path, shared_cluster: Path, ptc: Runner, tmp_path: Path
) -> None:
    local = ptc("sim", "run", str(trace), "--out", str(tmp_path / "local"), *ARGS)
    assert local.returncode == 0, local.stderr
    remote = ptc(
        "sim", "run", str(trace), "--out", str(tmp_path / "cluster"), *ARGS,
        "--on", shared_cluster.name, "--tasks", "7",
    )  # fmt: skip
    assert remote.returncode == 0, remote.stderr
    assert "7 tasks" in remote.stdout + remote.stderr

    a, b = tmp_path / "local" / "samples.parquet", tmp_path / "cluster" / "samples.parquet"
    snapshots = int(pq.read_table(a, columns=["snapshot"]).column(0).to_numpy().max()) + 1
    assert pq.read_metadata(a).num_rows == 5 * 10 * snapshots  # every policy x GP x snapshot
    assert _sorted_bytes(a) == _sorted_bytes(b)
    assert a.read_bytes() == b.read_bytes()
    summary = "summary.csv"
    assert (tmp_path / "local" / summary).read_text() == (
        tmp_path / "cluster" / summary
    ).read_text()

    # nothing left in the cluster user's home
    left = ssh(shared_cluster, "head", "ls -A /home/ptc").stdout.split()
    assert "ptc-sim" not in left
