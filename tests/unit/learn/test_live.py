"""The live loop's logic: candidates, repeats, cost, convergence and when it stops.

The loop's real runs go through Slurm on the local testbed in tests/integration/test_bench.py.
Here a stand-in for the campaign engine (``fake_run``) answers each submitted run with a row
from a known function, so the decisions can be checked exactly and fast.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from elastic.bench import campaign as campaigns
from elastic.bench import dataset, spec
from elastic.errors import InputError
from elastic.events import Event, collect
from elastic.learn import live, rules

PLAN = spec.parse(
    {
        "name": "bn-live",
        "benchmark": "hpgmg-fe",
        "factors": {
            "operator": ["poisson1", "poisson2"],
            "size": [1000, 8000, 64000],
            "nodes": [1, 2],
        },
        "order": {"randomize": True, "seed": 4},
    }
)


class Target:
    name = "bn-unit"
    testbed = "local"
    site = None
    ssh_config_path = Path("/nonexistent/ssh_config")


def truth(config: dict[str, Any]) -> float:
    """A runtime that grows with size and operator and shrinks a little with nodes."""
    scale = 2.0 if config["operator"] == "poisson2" else 1.0
    nodes = float(config["nodes"])
    return 0.2 + 1e-4 * scale * float(config["size"]) / math.pow(nodes, 0.7)


def fake_run(submitted: list[spec.Run], fail: set[str] | None = None) -> Any:
    def run(target: Any, campaign: spec.Campaign, out: Path, on_event: Any = None,
            **kw: Any) -> campaigns.Result:  # fmt: skip
        (one,) = kw["only"]
        submitted.append(one)
        bad = fail is not None and one.config_id in fail
        runtime = truth(dict(one.config))
        row = {
            "campaign": campaign.name,
            "run_id": one.run_id,
            "config_id": one.config_id,
            "repeat": one.repeat,
            **dict(one.config),
            "cores": one.cores,
            "runtime_s": None if bad else runtime,
            "cost_core_s": None if bad else runtime * one.cores,
            "elapsed_s": 3.0,
            "alloc_cpus": one.cores,
            "state": "FAILED" if bad else "COMPLETED",
            "error": "boom" if bad else "",
        }
        dataset.append(out, [row])
        result = campaigns.Result(out)
        result.rows.append(row)
        return result

    return run


def test_space_has_every_configuration_with_its_cores() -> None:
    space = live.space_frame(PLAN)
    assert len(space) == 12 and space["config_id"].is_unique
    assert sorted(set(space["cores"])) == [1, 2]


def test_next_repeat_and_cost_of_failed_runs() -> None:
    frame = pd.DataFrame(
        {"campaign": ["bn-live", "bn-live", "other"], "config_id": ["a", "a", "b"],
         "repeat": [0, 3, 7]}
    )  # fmt: skip
    assert live.next_repeat(frame, PLAN, "a") == 4
    assert live.next_repeat(frame, PLAN, "b") == 0  # another campaign's repeats are not ours
    assert live.run_cost({"cost_core_s": 6.0}) == 6.0
    assert live.run_cost({"cost_core_s": float("nan"), "elapsed_s": 3.0, "alloc_cpus": 2}) == 6.0
    assert live.run_cost({}) == 0.0


def test_amsd_convergence_looks_back_a_window() -> None:
    assert not live.converged([1.0, 0.5, 0.3], window=5, tolerance=0.02)
    assert not live.converged([1.0, 0.5, 0.3, 0.2, 0.15, 0.14], window=5, tolerance=0.02)
    assert live.converged([1.0, 0.5, 0.3, 0.2, 0.2, 0.2, 0.2, 0.2, 0.199], 5, 0.02)


def test_loop_spends_its_budget_and_picks_what_ce_scores_best(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[spec.Run] = []
    monkeypatch.setattr(campaigns, "run", fake_run(submitted))
    out = tmp_path / "bn.parquet"
    events: list[Event] = []
    settings = live.LiveSettings(restarts=0, tolerance=0.0)
    result = live.learn(Target(), PLAN, out, rules.parse("CE"), 8.0, settings, collect(events))
    assert result.stop == "budget"
    assert result.spent_core_s >= 8.0
    # Every run's cost counts, and the loop stopped on the first run that crossed the budget.
    assert result.spent_core_s - result.steps[-1].cost_core_s < 8.0
    assert len(dataset.load(out)) == len(submitted) == len(result.steps)
    # The first run is the campaign's first in its seeded order (the Initial run).
    assert submitted[0].config_id == PLAN.runs()[0].config_id
    # A configuration picked again is a new repeat, not a rerun of a recorded run_id.
    assert len({r.run_id for r in submitted}) == len(submitted)
    progress = [e for e in events if e.topic == "learn" and e.kind.value == "progress"]
    assert progress and "AMSD" in progress[-1].message and "core-s" in progress[-1].message


def test_each_pick_is_the_argmax_of_the_rule_on_the_model_of_that_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[spec.Run] = []
    monkeypatch.setattr(campaigns, "run", fake_run(submitted))
    out = tmp_path / "bn.parquet"
    settings = live.LiveSettings(restarts=0, max_steps=4, tolerance=0.0)
    picks: list[str] = []
    original = rules.Rule.pick

    def spy(self: rules.Rule, mu: Any, sigma: Any, rng: Any, log_cost: Any = None) -> int:
        index = original(self, mu, sigma, rng, log_cost)
        assert index == int(np.argmax(sigma))
        picks.append(live.space_frame(PLAN)["config_id"].iloc[index])
        return index

    monkeypatch.setattr(rules.Rule, "pick", spy)
    result = live.learn(Target(), PLAN, out, rules.parse("VR"), 1e9, settings)
    assert result.stop == "steps"
    # Step 0 runs the Initial configuration; every later run is the rule's argmax.
    assert [r.config_id for r in submitted[1:]] == picks[: len(submitted) - 1]


def test_loop_stops_after_repeated_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = live.space_frame(PLAN)
    submitted: list[spec.Run] = []
    monkeypatch.setattr(campaigns, "run", fake_run(submitted, fail=set(space["config_id"])))
    settings = live.LiveSettings(restarts=0, max_failures=2)
    result = live.learn(Target(), PLAN, tmp_path / "bn.parquet", rules.parse("VR"), 1e9, settings)
    assert result.stop == "failures" and len(submitted) == 2
    assert all(s.state == "FAILED" for s in result.steps)
    # A failed run costs what Slurm held: elapsed x allocated CPUs.
    assert math.isclose(result.spent_core_s, sum(3.0 * r.cores for r in submitted))


def test_bad_budget_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="budget"):
        live.learn(Target(), PLAN, tmp_path / "x.parquet", rules.parse("CE"), 0)
