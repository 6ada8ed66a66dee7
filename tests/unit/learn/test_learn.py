"""The GP model, the selection rules and the offline replay (elastic.learn)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from elastic.errors import InputError
from elastic.learn import evaluate, rules
from elastic.learn.gp import Features, Model


def test_gp_recovers_a_known_function() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, size=(60, 2))

    def truth(p: np.ndarray) -> np.ndarray:
        return np.asarray(np.sin(3 * p[:, 0]) + 0.5 * p[:, 1] ** 2)

    y = truth(x) + rng.normal(0, 0.05, size=60)
    model = Model(min_noise=0.01, restarts=2, seed=1).fit(x, y)
    grid = rng.uniform(0, 1, size=(200, 2))
    mu, sigma = model.predict(grid)
    assert np.sqrt(np.mean((mu - truth(grid)) ** 2)) < 0.05
    assert np.all(sigma > 0)
    # Far from the data the model is less sure than among it.
    _, far = model.predict(np.array([[3.0, 3.0]]))
    assert far[0] > np.median(sigma)


def test_noise_is_bounded_below() -> None:
    x = np.linspace(0, 1, 8).reshape(-1, 1)
    y = np.sin(x[:, 0])  # noise-free: an unbounded fit would drive sigma_n to ~0
    model = Model(min_noise=0.1, restarts=1).fit(x, y)
    assert model.noise_variance >= 0.1**2 * (1 - 1e-9)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("VR", np.array([0.1, 0.9, 0.5])),
        ("CE", np.array([0.9, 0.3, 0.1])),
        ("CE:0", np.array([0.1, 0.9, 0.5])),
    ],
)
def test_each_rule_picks_the_argmax_it_names(text: str, expected: np.ndarray) -> None:
    mu = np.array([-1.0, 1.0, 2.0])
    sigma = np.array([0.1, 0.9, 0.5])
    rule = rules.parse(text)
    pick = rule.pick(mu, sigma, np.random.default_rng(0))
    score = sigma if rule.name == "VR" or rule.cost_weight == 0 else sigma - rule.cost_weight * mu
    assert pick == int(np.argmax(score))
    # VR: argmax sigma = 1; CE (C=1): sigma - mu = [1.1, -0.1, -1.5] -> 0.
    assert pick == (1 if text != "CE" else 0)
    del expected


def test_random_rule_picks_every_candidate_sometimes() -> None:
    rng = np.random.default_rng(0)
    picks = {rules.parse("Random").pick(np.zeros(4), np.zeros(4), rng) for _ in range(200)}
    assert picks == {0, 1, 2, 3}


def test_rule_parsing_names_the_bad_rule() -> None:
    with pytest.raises(InputError, match="unknown rule 'XX'"):
        rules.parse_list("VR,XX")
    assert [r.label for r in rules.parse_list("VR,CE:0.25,Random")] == [
        "VR",
        "CE(C=0.25)",
        "Random",
    ]


def test_features_scale_to_the_unit_cube_with_logs_and_one_hot() -> None:
    space = pd.DataFrame(
        {
            "operator": ["poisson1", "poisson2", "poisson1"],
            "size": [10, 1000, 100],
            "nodes": [1, 1, 1],
        }
    )
    feats = Features.fit(space, ["operator", "size", "nodes"])
    x = feats.transform(space)
    assert feats.columns == ["operator", "size"]  # nodes has one level: dropped
    assert x.shape == (3, 3) and x.min() == 0 and x.max() == 1
    assert np.allclose(x[:, 2], [0, 1, 0.5])  # log scale: 100 is half-way from 10 to 1000


def synthetic(n: int = 120, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    size = rng.choice([1e3, 4e3, 1.6e4, 6.4e4, 2.56e5], size=n)
    ranks = rng.choice([1, 2, 4], size=n)
    runtime = 1e-4 * size / ranks**0.8 * np.exp(rng.normal(0, 0.1, size=n)) + 0.05
    return pd.DataFrame(
        {
            "operator": "poisson1",
            "size": size,
            "nodes": 1,
            "ranks_per_node": ranks,
            "threads": 1,
            "runtime_s": runtime,
            "cost_core_s": runtime * ranks,
            "error": "",
        }
    )


def test_seeded_evaluation_is_reproducible(tmp_path: Path) -> None:
    settings = evaluate.Settings(repeats=2, steps=6, seed=5, restarts=0)
    chosen = rules.parse_list("VR,CE,Random")
    first = evaluate.evaluate(synthetic(), chosen, settings)
    second = evaluate.evaluate(synthetic(), chosen, settings)
    pd.testing.assert_frame_equal(first.trajectories, second.trajectories)
    assert set(first.trajectories["rule"]) == {"VR", "CE(C=1)", "Random"}
    per_run = first.trajectories.groupby(["rule", "repeat"]).size()
    assert (per_run == 7).all()  # the initial fit and 6 steps
    # Cost only grows, and each step adds a run's cost.
    for _, run in first.trajectories.groupby(["rule", "repeat"]):
        assert (np.diff(run["cost"].to_numpy()) > 0).all()
    files = evaluate.write(first, tmp_path)
    assert (tmp_path / "rmse.png").stat().st_size > 0 and (tmp_path / "amsd.png").exists()
    assert len(pd.read_csv(tmp_path / "trajectories.csv")) == len(first.trajectories)
    assert len(files) == 5


def test_ce_prefers_cheaper_runs_than_vr() -> None:
    settings = evaluate.Settings(repeats=3, steps=15, seed=1, restarts=0)
    result = evaluate.evaluate(synthetic(200, 2), rules.parse_list("VR,CE"), settings)
    last = result.trajectories.groupby("rule")["cost"].max()
    # Same number of steps: CE's penalty on predicted runtime buys cheaper experiments.
    assert last["CE(C=1)"] < last["VR"]


def test_too_few_runs_is_an_input_error() -> None:
    with pytest.raises(InputError, match="needs 10 or more"):
        evaluate.evaluate(synthetic(5), rules.parse_list("VR"), evaluate.Settings())
