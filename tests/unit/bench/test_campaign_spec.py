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


def test_step_usage_waits_for_the_batch_step_and_sums_cpu() -> None:
    from elastic.bench import slurm_job

    class Head:
        def run(self, command: str, stdin: str | None = None, timeout: float = 300) -> str:
            assert "-o JobID,State,TotalCPU,MaxRSS" in command
            return (
                "19_0|COMPLETED|00:01.261|\n"
                "19_0.batch|COMPLETED|00:00.033|4224K\n"
                "19_0.0|COMPLETED|00:01.228|7140K\n"
                "20_1|COMPLETED|00:00.121|\n"
                "20_1.0|RUNNING|00:00.092|0\n"
            )

    usage = slurm_job.sacct_steps(Head(), ["19_0", "20_1"])  # type: ignore[arg-type]
    assert usage["19_0"].settled and usage["19_0"].max_rss == "7140K"
    assert usage["19_0"].total_cpu_s == pytest.approx(1.261)
    assert not usage["20_1"].settled  # no batch step yet, and a step still running


def test_fv_min_time_option_reaches_every_rank() -> None:
    plan = spec.parse(
        {
            "name": "fv",
            "benchmark": "hpgmg-fv",
            "factors": {"log2_box_dim": [4], "boxes_per_rank": [2], "nodes": [2]},
            "options": {"min_time": 0.5},
        }
    )
    (run,) = plan.runs()
    _, command = campaign.run_command(run, plan)
    assert command.endswith("bin/hpgmg-fv 4 2") and command.startswith("env HPGMG_MIN_TIME=0.5 ")
    with pytest.raises(InputError, match=r"factors\.log2_box_dim\[0\]"):
        spec.parse({**plan_doc_fv(), "factors": {"log2_box_dim": [3], "boxes_per_rank": [1]}})


def plan_doc_fv() -> dict[str, object]:
    return {"name": "fv", "benchmark": "hpgmg-fv"}
