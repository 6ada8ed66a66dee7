"""The report's arithmetic and tables on hand-made values: spreads, differences, the cap's fit."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic.errors import InputError
from elastic.papers.markdown import cell, grid
from elastic.papers.mycluster_runs import calibrated, caps, crossing
from elastic.papers.table import PaperValue, Row, Spread, Table, difference, number

PAPER = PaperValue(458.0, "458 min", "§2.4.1, Fig. 2.2d", "one illustrated run, not a mean")


def test_spread_is_the_mean_and_sample_standard_deviation() -> None:
    s = Spread.of([1.0, 2.0, 3.0, math.nan])
    assert (s.n, s.mean, s.sd, s.low, s.high) == (4, 2.0, 1.0, 1.0, 3.0)
    assert s.text(1) == "2.0 ± 1.0"
    assert Spread.of([463.0]).text(0, " min") == "463 min"  # one run: no spread to show
    assert Spread.of([math.nan]).text() == "n/a"


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=30))
def test_spread_agrees_with_pandas(values: list[float]) -> None:
    s = Spread.of(values)
    assert s.mean == pytest.approx(pd.Series(values).mean(), abs=1e-6)
    assert s.sd == pytest.approx(pd.Series(values).std(ddof=1), rel=1e-6, abs=1e-6)


def test_differences_read_as_ours_minus_the_paper_s() -> None:
    assert difference(463.0, 458.0, 0) == "+5 (+1%)"
    assert difference(274.0, 458.0, 0) == "-184 (-40%)"
    assert difference(0.7, 12.6, 1, relative=False) == "-11.9"
    assert difference(32.0, 32.0, 1) == "0"
    assert difference(1.0, None) == "n/a"
    assert number(-0.0001, 2) == "0"
    assert number(12_345.678, 1) == "12,345.7"


def test_a_table_puts_the_paper_s_number_beside_ours() -> None:
    row = Row("AP-100: discarded work", PAPER, ("463 min", "278 ± 30 min"), "+5", "why")
    table = Table("t", "the thesis's", ("ours, file order", "ours: shuffled"), (row,))
    assert table.headers == (
        "quantity",
        "the thesis's number",
        "where, and what it is",
        "ours, file order",
        "ours: shuffled",
        "difference",
        "why",
    )
    assert table.cells()[0][1:3] == (
        "458 min (the thesis's)",
        "§2.4.1, Fig. 2.2d: one illustrated run, not a mean",
    )
    with pytest.raises(InputError, match="'ours' cells"):
        Table("t", "the thesis's", ("ours",), (row,))
    with pytest.raises(InputError, match="start with 'ours'"):
        Table("t", "the thesis's", ("mine",), ())
    with pytest.raises(InputError, match="must not be empty"):
        PaperValue(1.0, "1", "", "mean of 3 runs")


def test_markdown_cells_stay_on_one_line_and_escape_the_separator() -> None:
    assert cell("a |\nb") == "a \\| b"
    assert grid(["x", "y"], [["1", "2"]]).splitlines() == ["| x | y |", "|---|---|", "| 1 | 2 |"]


def runs(rows: list[tuple[str, int, float | None, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["migration", "per_site", "cap", "seed", "completed"])


def test_the_calibration_picks_the_proxies_nearest_410k() -> None:
    frame = runs(
        [
            ("none", 6, None, 0, 280e3),
            ("none", 8, None, 0, 370e3),
            ("none", 9, None, 0, 416e3),
            ("none", 10, None, 0, 461e3),
        ]
    )
    assert calibrated(frame) == 9


def test_the_cap_that_reaches_a_target_is_interpolated() -> None:
    frame = runs(
        [
            ("liability", 9, 10.0, 0, 400e3),
            ("liability", 9, 20.0, 0, 500e3),
            ("liability", 9, None, 0, 800e3),
        ]
    )
    assert crossing(frame, 9, 460e3) == pytest.approx(16.0)
    assert crossing(frame, 9, 400e3) == 10.0
    assert math.isnan(crossing(frame, 9, 600e3))  # only "no cap" gets there


def test_caps_run_from_a_little_room_to_none() -> None:
    assert caps(6) == (7, 8, 12, 24, 48, None)
