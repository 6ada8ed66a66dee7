"""The active-learning comparison's definitions on hand-made replays: the error reduction at
equal cost, where CE's curve crosses VR's for good, and the solve time's derived cost."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from elastic.errors import InputError
from elastic.papers import learning
from elastic.paths import REPO_ROOT

DATASET = REPO_ROOT / "datasets" / "hpgmg-fe-local.parquet"


def replay(rule: str, repeat: int, points: list[tuple[float, float]]) -> list[dict[str, object]]:
    return [
        {"rule": rule, "repeat": repeat, "step": i, "cost": c, "rmse": e}
        for i, (c, e) in enumerate(points)
    ]


def test_reduction_is_read_on_the_costs_both_replays_reached() -> None:
    # VR's error halves at cost 10; CE's at cost 2. Both stop at 100 and 80.
    rows = replay("VR", 0, [(1, 1.0), (10, 0.5), (100, 0.4)])
    rows += replay("CE", 0, [(1, 1.0), (2, 0.5), (80, 0.2)])
    curve = learning.equal_cost(pd.DataFrame(rows), "CE")
    assert curve.cost.min() == pytest.approx(1) and curve.cost.max() == pytest.approx(80)
    at = dict(zip(curve.cost.round(6), curve.reduction_pct, strict=True))
    assert at[1.0] == pytest.approx(0.0)
    # at 80: CE's last step (0.2) against VR's step at 10 (0.5)
    assert at[80.0] == pytest.approx(60.0)
    # between 2 and 10 CE is at 0.5 and VR still at 1.0
    middle = curve[(curve.cost > 2) & (curve.cost < 10)]
    assert not middle.empty
    assert middle.reduction_pct.tolist() == pytest.approx([50.0] * len(middle))


def test_a_repeat_only_one_rule_ran_is_left_out() -> None:
    rows = replay("VR", 0, [(1, 1.0), (5, 0.5)]) + replay("CE", 1, [(1, 1.0), (5, 0.4)])
    assert learning.equal_cost(pd.DataFrame(rows), "CE").empty


def test_the_crossing_is_the_first_cost_after_the_last_loss() -> None:
    curve = pd.DataFrame({"cost": [1, 2, 3, 4, 5], "reduction_pct": [5, -1, 2, 3, 4]})
    assert learning._crossing(curve) == 3
    assert learning._crossing(curve.assign(reduction_pct=[1, 1, 1, 1, 1])) == 1
    # ends behind VR: it never crosses for good
    assert math.isnan(learning._crossing(curve.assign(reduction_pct=[1, 1, 1, 1, -1])))


def test_the_solve_cost_is_the_solve_time_on_every_core() -> None:
    frame = learning.frame(learning.LearningSettings(DATASET))
    assert (frame.solve_cost_core_s == frame.solve_time_s * frame.cores).all()
    # the job time's recorded cost is the same product with the job's time
    assert (frame.cost_core_s - frame.runtime_s * frame.cores).abs().max() < 1e-6


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"measures": ("wall",)}, "'measures': 'wall'"), ({"measures": ()}, "'measures'"),
     ({"repeats": 0}, "'repeats'")],
)  # fmt: skip
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=field):
        learning.LearningSettings(Path("x.parquet"), **kwargs)  # type: ignore[arg-type]
