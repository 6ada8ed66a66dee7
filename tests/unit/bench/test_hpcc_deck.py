"""HPCC input deck and the dataset's append semantics."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from elastic.bench import dataset, hpcc
from elastic.errors import PtcError


@pytest.mark.parametrize(
    ("ranks", "grid"),
    [(1, (1, 1)), (2, (1, 2)), (4, (2, 2)), (6, (2, 3)), (7, (1, 7)), (12, (3, 4))],
)
def test_process_grid_is_the_squarest_p_le_q(ranks: int, grid: tuple[int, int]) -> None:
    assert hpcc.Deck(ranks=ranks).grid() == grid


def test_deck_carries_size_block_and_grid_on_hpl_lines() -> None:
    lines = hpcc.Deck(ranks=6, n=3000, nb=96).render().splitlines()
    # HPL reads by line number: N on line 6, NB on 8, P and Q on 11 and 12.
    assert lines[5].split()[0] == "3000"
    assert lines[7].split()[0] == "96"
    assert (lines[10].split()[0], lines[11].split()[0]) == ("2", "3")


def test_summary_without_section_is_an_error() -> None:
    with pytest.raises(PtcError, match="no HPCC summary section"):
        hpcc.parse_summary("HPL ran\n", "node:/x/hpccoutf.txt")


def test_summary_missing_a_headline_figure_names_it() -> None:
    text = "Begin of Summary section.\nHPL_Tflops=0.01\nEnd of Summary section.\n"
    with pytest.raises(PtcError, match="StarDGEMM_Gflops"):
        hpcc.parse_summary(text)


def test_dataset_append_keeps_earlier_rows(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    dataset.append(path, {"run_id": "a", "HPL_Tflops": 1.0})
    dataset.append(path, {"run_id": "b", "HPL_Tflops": 2.0, "error": ""})
    frame = pd.read_parquet(path)
    assert list(frame["run_id"]) == ["a", "b"]
    assert list(frame["HPL_Tflops"]) == [1.0, 2.0]
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_ptrans_count_lines_are_each_followed_by_values() -> None:
    lines = hpcc.Deck(ranks=2, n=2000, nb=80).render().splitlines()
    sep = next(i for i, line in enumerate(lines) if line.startswith("#####"))
    assert [line.split()[0] for line in lines[sep + 1 : sep + 5]] == ["0", "2000", "0", "80"]


def test_a_section_that_did_not_run_is_an_error_not_a_zero() -> None:
    figures = "\n".join(f"{k}=1.0" for k in hpcc.HEADLINE)
    text = f"Begin of Summary section.\n{figures}\nPTRANS_n=-1\nEnd of Summary section.\n"
    with pytest.raises(PtcError, match="did not run: PTRANS"):
        hpcc.parse_summary(text)
