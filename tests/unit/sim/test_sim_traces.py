"""Trace loaders, the paper's filters, the HTC workload and its Table 1 numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tracedata import trace_file

from elastic.errors import InputError
from elastic.sim.traces import (
    SWF_FIELDS,
    load_trace,
    paper_filters,
    shuffled_copies,
    trace_stats,
)

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "traces"

SWF_TEXT = """; Version: 2.2
; Computer: Test machine
; Information: http://example.org/a/
;              http://example.org/b/
; Note: first line
;       continued
1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 2 -1 -1 -1
2 10 0 50 30 -1 -1 30 60 -1 1 2 1 -1 1 -1 -1 -1
3 20 0 70 2 -1 -1 2 -1 -1 1 2 1 -1 1 -1 -1 -1
4 30 0 90000 2 -1 -1 2 90000 -1 1 3 1 -1 1 -1 -1 -1
5 40 0 10 1 -1 -1 1 20 -1 0 3 1 -1 1 -1 -1 -1
"""

EAGLE_HEADER = (
    "job_id,user,account,partition,qos,wallclock_req,nodes_req,processors_req,gpus_req,"
    "mem_req,submit_time,start_time,end_time,run_time,state,name,work_dir,submit_line\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_swf_fields_metadata_and_missing(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "t.swf", SWF_TEXT))
    assert len(trace) == 5
    assert set(trace.fields) == set(SWF_FIELDS) and len(SWF_FIELDS) == 18
    assert trace.metadata["Computer"] == "Test machine"
    assert trace.metadata["Note"] == "first line continued"
    assert trace.metadata["Information"] == "http://example.org/a/ http://example.org/b/"
    assert "http" not in trace.metadata
    assert trace.nodes.tolist() == [4, 30, 2, 2, 1]
    assert np.isnan(trace.requested[2])  # -1 = missing
    assert trace.queue.tolist()[:2] == ["2", "1"]
    assert trace.completed.tolist() == [True, True, True, True, False]


def test_paper_filters_report_each_step(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "t.swf", SWF_TEXT))
    kept, steps = paper_filters(trace, max_nodes=20)
    assert [(s.name, s.before, s.after) for s in steps] == [
        ("completed successfully", 5, 4),
        ("no missing fields", 4, 3),
        ("node_count <= 20", 3, 2),
        ("runtime <= 86400 s", 2, 1),
    ]
    assert kept.job_id.tolist() == [1]


def test_filter_that_empties_the_trace_is_named(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "t.swf", SWF_TEXT))
    with pytest.raises(InputError, match=r"t.swf is empty after filter 'node_count <= 1'"):
        paper_filters(trace, max_nodes=1)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("6 50 0 10 1 -1 -1 1 20 -1 1 3 1 -1 1 -1 -1", "expected 18 fields, found 17"),
        ("6 50 0 ten 1 -1 -1 1 20 -1 1 3 1 -1 1 -1 -1 -1", r"field 4 \(run_time\): 'ten'"),
        ("6 50 0 10 -3 -1 -1 1 20 -1 1 3 1 -1 1 -1 -1 -1", r"field 5 \(allocated_processors\)"),
    ],
)
def test_swf_bad_line_names_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, "bad.swf", SWF_TEXT + line + "\n")
    lineno = len(SWF_TEXT.splitlines()) + 1
    with pytest.raises(InputError, match=rf"bad.swf:{lineno}: {message}"):
        load_trace(path)


def test_eagle_csv(tmp_path: Path) -> None:
    rows = (
        "7,u1,a,bigmem,normal,3600.0,2,72,0,0.0,2019-01-01 00:00:00,"
        "2019-01-01 00:00:10,2019-01-01 00:10:10,600.0,COMPLETED,app,w,s\n"
        "8,u2,a,short,normal,,1,36,0,0.0,2019-01-01 00:01:00,"
        "2019-01-01 00:01:00,2019-01-01 00:02:00,60.0,TIMEOUT,app,w,s\n"
    )
    trace = load_trace(write(tmp_path, "e.csv", EAGLE_HEADER + rows))
    assert trace.job_id.tolist() == [7, 8]
    assert trace.submit[1] - trace.submit[0] == 60.0
    assert trace.nodes.tolist() == [2, 1]
    assert trace.queue.tolist() == ["bigmem", "short"]
    assert trace.completed.tolist() == [True, False]
    assert np.isnan(trace.requested[1])


def test_eagle_bad_cell_names_line_and_field(tmp_path: Path) -> None:
    row = (
        "7,u1,a,p,normal,3600.0,two,72,0,0.0,2019-01-01 00:00:00,"
        "2019-01-01 00:00:10,2019-01-01 00:10:10,600.0,COMPLETED,app,w,s\n"
    )
    path = write(tmp_path, "e.csv", EAGLE_HEADER + row)
    with pytest.raises(InputError, match=r"e.csv:2: field nodes_req: 'two'"):
        load_trace(path)
    path = write(tmp_path, "h.csv", "job_id,user\n1,u\n")
    with pytest.raises(InputError, match=r"h.csv:1: missing column 'partition'"):
        load_trace(path)


def test_condor_submit(tmp_path: Path) -> None:
    text = "Universe = vanilla\nExecutable = /bin/sleep\n# c\nArguments = 5\nQueue\n"
    text += "Arguments = 7\nQueue 2\n"
    trace = load_trace(write(tmp_path, "c.submit", text))
    assert trace.runtime.tolist() == [5.0, 7.0, 7.0]
    assert trace.nodes.tolist() == [1, 1, 1]
    assert trace.submit.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Executable = sleep\nArguments = soon\nQueue\n", r"c.submit:2: field Arguments: 'soon'"),
        ("Executable = python\nArguments = 5\nQueue\n", r"c.submit:1: field Executable"),
        ("Executable = sleep\nQueue\n", r"c.submit:2: field Arguments: Queue before"),
        ("Executable = sleep\nwhat is this\n", r"c.submit:2: not a 'key = value'"),
    ],
)
def test_condor_bad_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        load_trace(write(tmp_path, "c.submit", text))


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"unknown trace format '\.txt'"):
        load_trace(tmp_path / "x.txt")
    with pytest.raises(InputError, match="no such trace file"):
        load_trace(tmp_path / "x.swf")


def test_htc_workload_matches_table_1() -> None:
    base = load_trace(trace_file("htc-condor"))
    assert len(base) == 1120  # the paper's §4 and docs/simulation.md: a 1,120-job trace
    workload = shuffled_copies(base, 10, seed=0)
    stats = trace_stats(workload)
    # Table 1 of the paper: HTC row
    assert stats.jobs == 11_200
    assert round(stats.node_hours, 2) == 1379.05
    r = stats.runtime
    assert (round(r.mean, 2), r.min, r.q25, r.q50, r.q75, r.max) == (
        443.27,
        54.0,
        84.0,
        106.0,
        134.25,
        7140.0,
    )
    assert stats.node_count.mean == stats.node_count.max == 1.0


def test_htc_copies_are_seeded_permutations() -> None:
    base = load_trace(trace_file("htc-condor"))
    a, b, c = (shuffled_copies(base, 10, seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.runtime, b.runtime)
    assert not np.array_equal(a.runtime, c.runtime)
    for k in range(10):
        part = a.runtime[k * 1120 : (k + 1) * 1120]
        assert np.array_equal(np.sort(part), np.sort(base.runtime))
    assert a.job_id.tolist() == list(range(1, 11_201))


def test_kth_and_eagle_load() -> None:
    kth = load_trace(trace_file("kth-sp2"))
    assert len(kth) == 28_489  # the count docs/simulation.md gives users
    assert kth.metadata["Acknowledge"] == "Lars Malinowsky"
    eagle = load_trace(trace_file("nrel-eagle"))
    assert len(eagle) == 1000
    kept, _ = paper_filters(eagle, max_nodes=20)
    assert (kept.nodes <= 20).all() and (kept.runtime <= 86_400).all()
