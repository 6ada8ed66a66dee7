"""HPCC input deck (the hpcc role's template and hpcc-deck script) and the dataset's append semantics.

The deck has one owner, the role: these tests render its templates with Jinja as Ansible would and
run the script, so the job script and ptc's campaigns are tested through the same file.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import jinja2
import pandas as pd
import pytest

from elastic.bench import dataset, hpcc
from elastic.errors import PtcError

ROLE = Path(__file__).resolve().parents[3] / "roles" / "hpcc" / "templates"


@pytest.fixture(scope="module")
def deck_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("hpcc")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROLE), keep_trailing_newline=True)
    common = {"ansible_managed": "test", "hpcc_prefix": str(prefix)}
    item = {"dest": "hpccinf.template", "size": "@N@", "block": "@NB@", "grid": "@P@ @Q@"}
    (prefix / "hpccinf.template").write_text(
        env.get_template("hpccinf.txt.j2").render(item=item, **common)
    )
    script = prefix / "hpcc-deck"
    script.write_text(env.get_template("hpcc-deck.j2").render(**common))
    script.chmod(0o755)
    return script


def deck(script: Path, n: int, nb: int, ranks: int) -> list[str]:
    command = hpcc.deck_command(str(script.parent), n, nb, ranks).replace(" > hpccinf.txt", "")
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


@pytest.mark.parametrize(
    ("ranks", "grid"),
    [(1, (1, 1)), (2, (1, 2)), (4, (2, 2)), (6, (2, 3)), (7, (1, 7)), (12, (3, 4))],
)
def test_process_grid_is_the_squarest_p_le_q(
    deck_script: Path, ranks: int, grid: tuple[int, int]
) -> None:
    lines = deck(deck_script, 1000, 80, ranks)
    assert (int(lines[10].split()[0]), int(lines[11].split()[0])) == grid


def test_deck_script_refuses_bad_arguments(deck_script: Path) -> None:
    proc = subprocess.run(["sh", str(deck_script), "10", "x", "2"], capture_output=True, text=True)
    assert proc.returncode == 2 and "positive integers" in proc.stderr


def test_deck_carries_size_block_and_grid_on_hpl_lines(deck_script: Path) -> None:
    lines = deck(deck_script, 3000, 96, 6)
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
    dataset.append(path, [{"run_id": "a", "HPL_Tflops": 1.0}])
    dataset.append(path, [{"run_id": "b", "HPL_Tflops": 2.0, "error": ""}])
    frame = pd.read_parquet(path)
    assert list(frame["run_id"]) == ["a", "b"]
    assert list(frame["HPL_Tflops"]) == [1.0, 2.0]
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind
    assert list(pd.read_csv(tmp_path / "d.csv")["run_id"]) == ["a", "b"]
    assert "HPL_Tflops" in (tmp_path / "d.columns.json").read_text()


def test_ptrans_count_lines_are_each_followed_by_values(deck_script: Path) -> None:
    lines = deck(deck_script, 2000, 80, 2)
    sep = next(i for i, line in enumerate(lines) if line.startswith("#####"))
    assert [line.split()[0] for line in lines[sep + 1 : sep + 5]] == ["0", "2000", "0", "80"]


def test_a_section_that_did_not_run_is_an_error_not_a_zero() -> None:
    figures = "\n".join(f"{k}=1.0" for k in hpcc.HEADLINE)
    text = f"Begin of Summary section.\n{figures}\nPTRANS_n=-1\nEnd of Summary section.\n"
    with pytest.raises(PtcError, match="did not run: PTRANS"):
        hpcc.parse_summary(text)
