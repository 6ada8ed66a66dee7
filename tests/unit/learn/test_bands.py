"""The median/IQR bands of learning trajectories against cost, both ways a repeat may count."""

from __future__ import annotations

import pandas as pd

from elastic.learn.evaluate import bands


def trajectories() -> pd.DataFrame:
    # one rule, three repeats: each a step function of cost, the third reaching furthest
    rows = []
    for repeat, steps in enumerate(
        [[(1, 9.0), (10, 5.0)], [(1, 7.0), (10, 3.0)], [(1, 8.0), (1000, 1.0)]]
    ):
        for step, (cost, rmse) in enumerate(steps):
            rows.append({"rule": "CE", "repeat": repeat, "step": step, "cost": cost, "rmse": rmse})
    return pd.DataFrame(rows)


def test_a_repeat_holds_its_last_value_beyond_its_last_cost_by_default() -> None:
    table = bands(trajectories(), "rmse", points=4)  # costs 1, 10, 100, 1000
    assert list(table["cost"].round(6)) == [1.0, 10.0, 100.0, 1000.0]
    assert list(table["median"]) == [8.0, 5.0, 5.0, 3.0]


def test_reached_only_drops_a_repeat_past_its_last_cost_and_needs_half_rounded_up() -> None:
    table = bands(trajectories(), "rmse", points=4, reached_only=True)
    # at 100 and 1000 only the third repeat is left: 1 of 3 is less than half, rounded up
    assert list(table["cost"].round(6)) == [1.0, 10.0]
    assert list(table["median"]) == [8.0, 5.0]
