"""The overhead taxonomy: its parsers, which resume and which provisioning belong to a job's
node, and parts that lie end to end from submit to start."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from elastic.bench import dataset, plot
from elastic.errors import InputError
from elastic.slurm import overhead
from elastic.slurm.overhead import Job, Resume

SACCT = """\
101|1000|1060|node-[0-1]|COMPLETED
102|1001|1002|node-3|COMPLETED
103|1005|Unknown|None assigned|PENDING
104|1010|1070|node-2|CANCELLED by 0
"""


def resume_line(ended: float, ready: list[str], **timings: float) -> str:
    return json.dumps(
        {"time": ended, "hostlist": "x", "ready": ready, "failed": {}, "timings": timings}
    )


def test_sacct_gives_the_started_jobs_with_their_nodes_expanded() -> None:
    jobs = overhead.parse_sacct(SACCT, {"node-[0-1]": ["node-0", "node-1"]})
    assert [(j.job_id, j.submit, j.start, j.nodes) for j in jobs] == [
        ("101", 1000.0, 1060.0, ("node-0", "node-1")),
        ("102", 1001.0, 1002.0, ("node-3",)),
        ("104", 1010.0, 1070.0, ("node-2",)),
    ]
    with pytest.raises(InputError, match="sacct line 1"):
        overhead.parse_sacct("101|1000\n")


def test_resume_timings_give_when_each_resume_started_and_a_torn_line_is_skipped() -> None:
    text = resume_line(1050.0, ["node-0"], manager=0.5, power_on=10, total=40.0) + "\n{"
    (resume,) = overhead.parse_resumes(text)
    assert (resume.started, resume.ended, resume.ready) == (1010.0, 1050.0, ("node-0",))


def test_a_resume_counts_from_its_recorded_start_not_from_when_its_line_was_written() -> None:
    """The client reports to the manager after its steps, so the line is written a while after
    the resume ended: the steps count from the start the client recorded, and the node's
    provisioning early in the resume is still the resume's."""
    line = json.dumps(
        {
            "time": 1058.0,  # the manager took 8 s to take the report
            "started": 1005.0,
            "hostlist": "node-0",
            "ready": ["node-0"],
            "failed": {},
            "timings": {"manager": 0.1, "power_on": 4.0, "playbook": 12.0, "total": 45.0},
        }
    )
    (resume,) = overhead.parse_resumes(line)
    assert (resume.started, resume.ended) == (1005.0, 1050.0)
    job = Job("103", 1004.0, 1052.0, ("node-0",))
    provisions = [{"nodes": ["node-0"], "started": 1005.2, "ended": 1007.7, "waited_s": 0.0}]
    (row,) = overhead.rows([job], [resume], provisions)
    assert (row["slot_wait_s"], row["testbed_s"]) == (0.1, 2.5)


def test_the_parts_lie_end_to_end_from_submit_to_start() -> None:
    job = Job("101", 1000.0, 1060.0, ("node-0", "node-1"))
    resume = Resume(
        1005.0,
        1050.0,
        ("node-0", "node-1"),
        {"manager": 0.5, "power_on": 20.0, "playbook": 22.0, "register": 2.5, "total": 45.0},
    )
    provisions = [
        # node-0's part started at once; node-1's after it, in the same request
        {"nodes": ["node-0"], "started": 1005.5, "ended": 1012.5, "waited_s": 0.0},
        {"nodes": ["node-1"], "started": 1012.5, "ended": 1020.5, "waited_s": 0.0},
        {"nodes": ["node-1"], "started": 900.0, "ended": 905.0, "waited_s": 0.0},  # earlier
    ]
    rows = {r["node"]: r for r in overhead.rows([job], [resume], provisions)}
    first, second = rows["node-0"], rows["node-1"]
    assert first["slurm_to_resume_s"] == 5.0 and first["manager_s"] == 0.5
    assert (first["slot_wait_s"], first["testbed_s"], first["network_ssh_s"]) == (0.0, 7.0, 13.0)
    assert (second["slot_wait_s"], second["testbed_s"], second["network_ssh_s"]) == (7.0, 8.0, 5.0)
    assert first["slurm_to_start_s"] == 10.0
    for row in (first, second):
        assert sum(row[k] for k in overhead.PARTS) == row["submit_to_start_s"] == 60.0
        assert row["unaccounted_s"] == 0.0 and row["resume_nodes"] == "node-0,node-1"


def test_a_node_already_up_or_another_jobs_resume_gives_no_row() -> None:
    resume = Resume(1005.0, 1050.0, ("node-0",), {"manager": 0.1, "power_on": 5.0, "total": 45})
    later = Job("105", 2000.0, 2001.0, ("node-0",))  # ran on the node once it was up
    other = Job("106", 1000.0, 1060.0, ("node-7",))
    assert overhead.rows([later, other], [resume]) == []


def test_a_job_that_started_before_the_client_saw_its_node_register_keeps_its_row() -> None:
    """Slurm starts the job as slurmd registers; the client's poll notices a few seconds
    later and only then ends its resume. The lag is not the job's wait."""
    job = Job("108", 1000.0, 1040.0, ("node-2",))
    resume = Resume(
        1002.0,
        1043.0,  # three seconds after the job's start
        ("node-2",),
        {"manager": 0.5, "power_on": 20.0, "playbook": 15.0, "register": 5.5, "total": 41.0},
    )
    (row,) = overhead.rows([job], [resume])
    assert row["register_s"] == 2.5 and row["slurm_to_start_s"] == 0.0
    assert all(row[k] >= 0 for k in overhead.PARTS), row
    assert sum(row[k] for k in overhead.PARTS) == row["submit_to_start_s"] == 40.0
    # a resume that ended long after the start brought the node up for some later job
    late = Resume(1002.0, 1040.0 + overhead.POLL_LAG_S + 1, ("node-2",), resume.timings)
    assert overhead.rows([job], [late]) == []


def test_without_the_testbed_log_the_whole_power_on_is_network_and_ssh() -> None:
    job = Job("107", 1000.0, 1040.0, ("node-0",))
    resume = Resume(1001.0, 1039.0, ("node-0",), {"manager": 1.0, "power_on": 12.0, "total": 38})
    (row,) = overhead.rows([job], [resume])
    assert (row["slot_wait_s"], row["testbed_s"], row["network_ssh_s"]) == (0.0, 0.0, 12.0)
    # the resume's steps cover 13 of its 38 s: the rest is unaccounted, not hidden in a part
    assert row["unaccounted_s"] == 25.0


def test_the_dataset_and_plot_are_written_with_the_taxonomy_schema(tmp_path: Path) -> None:
    job = Job("101", 1000.0, 1060.0, ("node-0",))
    resume = Resume(1005.0, 1050.0, ("node-0",), {"manager": 0.5, "power_on": 20, "total": 45})
    frame = pd.DataFrame(overhead.rows([job], [resume]))
    dataset.write(tmp_path / "overhead.parquet", frame, overhead.COLUMNS)
    schema = json.loads((tmp_path / "overhead.columns.json").read_text())
    assert schema["testbed_s"] == {"meaning": overhead.PARTS["testbed_s"], "unit": "s"}
    assert pd.read_parquet(tmp_path / "overhead.parquet").equals(frame)
    png = plot.stacked_parts(frame, overhead.PARTS, tmp_path / "overhead.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InputError, match="no column 'nope'"):
        plot.stacked_parts(frame, {"nope": "x"}, tmp_path / "x.png")
