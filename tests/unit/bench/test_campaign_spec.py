"""Campaign files: schema errors name the field; runs are stable, seeded and grouped by shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.bench import campaign, hpgmg, spec
from elastic.errors import InputError

REPO = Path(__file__).resolve().parents[3]


def doc(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "t",
        "benchmark": "hpgmg-fe",
        "factors": {"operator": ["poisson1", "poisson2"], "size": [1000, 8000], "nodes": [1, 2]},
        "repeats": 2,
        "order": {"randomize": True, "seed": 3},
    }
    base.update(changes)
    return base


def test_the_shipped_campaign_file_is_valid() -> None:
    plan = spec.load(REPO / "campaigns" / "hpgmg-fe-smoke.yml")
    assert plan.benchmark == "hpgmg-fe" and len(plan.runs()) == 2


def test_errors_name_the_field() -> None:
    bad = doc(factors={"operator": ["poisson1", "poisson9"], "size": [1000]})
    with pytest.raises(InputError, match=r"factors\.operator\[1\]"):
        spec.parse(bad, "c.yml")
    with pytest.raises(InputError, match="repeats"):
        spec.parse(doc(repeats=0), "c.yml")


def test_runs_are_seeded_stable_and_grouped_by_shape() -> None:
    plan = spec.parse(doc())
    runs = plan.runs()
    assert len(runs) == 2 * 2 * 2 * 2
    assert [r.run_id for r in runs] == [r.run_id for r in spec.parse(doc()).runs()]
    assert len({r.run_id for r in runs}) == len(runs)
    groups = campaign.group_by_shape(runs)
    assert sorted(g[0].nodes for g in groups) == [1, 2]
    script = campaign.job_script(plan, groups[0], array=True)
    assert f"#SBATCH --array=0-{len(groups[0]) - 1}%2" in script
    assert "hpgmg-fe sample -op_type" in script


def test_fe_sample_lines_are_parsed() -> None:
    text = (
        "Small Test G[   16   16   16]\n"
        "Q1 G[   16   16   16] P[  1  1  1]  1.000e-02 s    0.500000 GF    0.400000 MEq/s\n"
        "Q1 G[   16   16   16] P[  1  1  1]  3.000e-02 s    0.300000 GF    0.200000 MEq/s\n"
    )
    row = hpgmg.parse_fe(text)
    assert row["global_dofs"] == 17**3 and row["samples"] == 2
    assert row["solve_time_s"] == pytest.approx(0.02)
