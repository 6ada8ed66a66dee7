"""The report generator on a tiny input: its tables have the columns and labels a reader needs.

Small traces (60 sleep jobs, KTH-SP2's first 100 jobs, 150 Eagle jobs), two orders and seeds,
a short MyCluster run and a replay of three steps: the page is not worth reading, but every
table on it must have the paper's number labelled as the paper's, where it is and what it is,
ours, the difference and why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.events import Event, Kind, collect
from elastic.papers.ch2_runs import Ch2Settings
from elastic.papers.learning import LearningSettings
from elastic.papers.mycluster_runs import MyClusterSettings
from elastic.papers.part_time_cloud_runs import PtcSettings
from elastic.papers.report import ReportSettings, generate
from elastic.paths import REPO_ROOT

SHIPPED = REPO_ROOT / "tests" / "data" / "traces"
OWNERS = ("(the paper's)", "(the thesis's)", "(the slides')")


def tiny_submit(path: Path) -> Path:
    jobs = "".join(f"Arguments = {60 + 37 * (i % 11) * (1 + i % 3)}\nQueue\n" for i in range(60))
    path.write_text("Universe = vanilla\nExecutable = sleep\n" + jobs)
    return path


def tiny_eagle(path: Path) -> Path:
    lines = (SHIPPED / "nrel-eagle-sample-1000.csv").read_text().splitlines()
    path.write_text("\n".join(lines[:151]) + "\n")
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[Event]]:
    tmp = tmp_path_factory.mktemp("report")
    htc = tiny_submit(tmp / "tiny.submit")
    settings = ReportSettings(
        ch2=Ch2Settings(htc, orders=2, boots=(900.0,), boot_orders=1),
        ptc=PtcSettings(
            htc, SHIPPED / "KTH-SP2-1996-2-first-100.swf", tiny_eagle(tmp / "eagle.csv"), seeds=2
        ),
        mycluster=MyClusterSettings(seeds=2, proxies=(6, 7), ticks=20),
        learning=LearningSettings(
            REPO_ROOT / "datasets" / "hpgmg-fe-local.parquet", repeats=1, steps=3
        ),
        provisioning=REPO_ROOT / "benchmarks" / "results" / "provisioning",
        workflow=REPO_ROOT / "benchmarks" / "results" / "elastic_workflow" / "results.json",
        workflow_date=None,
        page=tmp / "docs" / "paper-results.md",
        figures=tmp / "results",
        command="benchmarks/paper_report.py --tiny",
    )
    events: list[Event] = []
    written = generate(settings, collect(events))
    return settings.page, written, events


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table on the page: its header cells and its rows' cells."""
    found: list[tuple[list[str], list[list[str]]]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("| "):
                    break
                rows.append(split(row))
            found.append((split(line), rows))
    return found


def split(line: str) -> list[str]:
    cells = line.strip().strip("|").replace("\\|", "\0").split("|")
    return [c.strip().replace("\0", "|") for c in cells]


def comparisons(text: str) -> list[tuple[list[str], list[list[str]]]]:
    return [t for t in tables(text) if t[0][0] == "quantity"]


def test_the_page_and_its_figures_are_written(report: tuple[Path, list[Path], list[Event]]) -> None:
    page, written, _ = report
    assert written[0] == page and page.is_file()
    pngs = [p for p in written if p.suffix == ".png"]
    assert {p.name for p in pngs} == {
        "part_time_cloud.png",
        "ch2.png",
        "learning_solve.png",
        "learning_job.png",
        "mycluster.png",
    }
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](../results/{png.name})" in page.read_text()
    assert all(p.is_file() for p in written)


def test_every_comparison_has_the_columns_in_order(
    report: tuple[Path, list[Path], list[Event]],
) -> None:
    found = comparisons(report[0].read_text())
    # PTC x2, Ch. 2 x2, learning (solve and job time), MyCluster, Multiverse, E-HPC
    assert len(found) == 9
    for headers, rows in found:
        assert headers[0] == "quantity"
        assert headers[1].startswith("the ") and headers[1].endswith(" number")
        assert headers[2] == "where, and what it is"
        ours = headers[3:-2]
        assert ours and all(h.startswith("ours") for h in ours)
        assert headers[-2:] == ["difference", "why"]
        assert rows
        for row in rows:
            assert len(row) == len(headers)
            assert row[1].endswith(OWNERS), row  # the paper's number, labelled as the paper's
            where, _, kind = row[2].partition(": ")
            assert where and kind, row  # where it is, and what it is
            assert row[-1], row  # why


def test_the_ch2_single_runs_are_not_called_means(
    report: tuple[Path, list[Path], list[Event]],
) -> None:
    text = report[0].read_text()
    rows = [r for _, rs in comparisons(text) for r in rs if r[0].endswith(": discarded work")]
    assert {r[1] for r in rows} == {"71 min (the thesis's)", "458 min (the thesis's)"}
    assert all("one illustrated run, not a mean" in r[2] for r in rows)
    assert "thesis mean" not in text


def test_ours_say_over_how_many_orders_or_seeds(
    report: tuple[Path, list[Path], list[Event]],
) -> None:
    text = report[0].read_text()
    ours = [h for headers, _ in comparisons(text) for h in headers if h.startswith("ours")]
    assert "ours, trace in file order (one run)" in ours
    assert "ours: mean ± sd over 2 shuffled orders" in ours
    words = ("one run", "seeds", "orders", "repeats", "runs each")
    assert all(any(w in h for w in words) for h in ours), ours


def test_the_stand_ins_and_the_stored_runs_say_what_they_are(
    report: tuple[Path, list[Path], list[Event]],
) -> None:
    text = report[0].read_text()
    assert (
        "PEREGRINE, the paper's second trace (Table 1, Fig. 3, Fig. 4, Fig. 6), is not public"
        in text
    )
    assert "Read from `provisioning/` (run on 2026-11-29" in text
    assert "recorded on 2026-11-23" in text


def test_progress_is_reported_per_part(report: tuple[Path, list[Path], list[Event]]) -> None:
    _, _, events = report
    begun = {e.topic for e in events if e.kind is Kind.BEGIN}
    assert {"report", "part-time-cloud", "ch2", "learn", "mycluster"} <= begun
    assert events[-1].topic == "report" and events[-1].kind is Kind.END
