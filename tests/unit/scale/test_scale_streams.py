"""The scale harness's job stream and emulated queue come from the trace, through ptc's reader."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from benchmarks.scale.cluster import Layout, hostlist, node_names, slurm_conf
from benchmarks.scale.live import job_stream
from benchmarks.scale.rounds import emulated_queue, emulated_runner
from elastic.policies import make_policy
from elastic.sim.traces import load_trace
from elastic.slurm.commands import Slurm
from elastic.slurm.queue import compute_pv

TRACE = Path(__file__).resolve().parents[2] / "data" / "traces" / "KTH-SP2-1996-2-first-100.swf"


@pytest.mark.parametrize("size", [100, 1000])
def test_the_stream_scales_the_trace_s_sizes_to_the_pool(size: int) -> None:
    trace = load_trace(TRACE)
    stream = job_stream(trace, size, window=20.0, fill=3.0)
    assert sum(s.nodes for s in stream) == 3 * size
    assert all(1 <= s.nodes <= size for s in stream)
    assert stream[0].at == 0.0 and stream[-1].at == pytest.approx(20.0)
    assert all(10.0 <= s.runtime <= 30.0 for s in stream)
    assert [s.at for s in stream] == sorted(s.at for s in stream)


def test_the_emulated_queue_goes_through_the_client_s_parser_and_policy() -> None:
    trace = load_trace(TRACE)
    names = node_names(300)
    queue = emulated_queue(trace, names, 500)
    assert queue.running_jobs + len(queue.pending.split()) == 500
    assert queue.node_entries <= 300
    vector = compute_pv(
        Slurm(emulated_runner(queue)), make_policy("LIFO"), None, names, time.time()
    )
    assert len(vector.jobs) == queue.running_jobs
    assert set(vector.pv.values) == set(names)
    used = [n for job in vector.jobs for n in job.nodes]
    assert len(used) == len(set(used)) == queue.node_entries


def test_every_node_has_its_own_port_and_is_a_cloud_node(tmp_path: Path) -> None:
    conf = slurm_conf(Layout(tmp_path, tmp_path / "root", 3, base_port=30000))
    lines = [line for line in conf.splitlines() if line.startswith("NodeName=")]
    assert [line.split()[0] for line in lines] == ["NodeName=emu00001", "NodeName=emu00002",
                                                   "NodeName=emu00003"]  # fmt: skip
    assert [line.split()[3] for line in lines] == ["Port=30000", "Port=30001", "Port=30002"]
    assert all("State=CLOUD" in line for line in lines)
    assert f"Nodes={hostlist(3)} " in conf and hostlist(3) == "emu[00001-00003]"
