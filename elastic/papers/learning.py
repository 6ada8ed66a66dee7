"""The thesis's active learning (Ch. 6-7) beside a replay on ptc's committed HPGMG-FE dataset.

The dataset was recorded live (``datasets/``); the replay (``elastic.learn.evaluate``) runs
here, so its numbers are computed by the report. The thesis compares Cost Efficiency (CE) with
Variance Reduction (VR) by their errors at equal cost: CE's error is up to 38% lower once the
cost passes the point where the curves cross (§6.5.2.4, Fig. 6.8b).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from elastic.bench import dataset
from elastic.errors import InputError
from elastic.events import OnEvent
from elastic.learn import evaluate, rules
from elastic.papers.table import (
    MISSING,
    Figure,
    PaperValue,
    Row,
    Section,
    Spread,
    Table,
    difference,
    number,
)

OWNER = "the thesis's"
FIG68 = "§6.5.2.4, Fig. 6.8b (HPGMG-FE, 50 random partitions)"
REDUCTION = PaperValue(
    38.0, "up to 38%", FIG68, "the largest relative gap between the two rules' curves"
)
CROSSING = PaperValue(
    1626.0, "1,626 core-s", FIG68, "where the curves cross; CE is lower beyond it"
)
RUNTIME_RANGE = PaperValue(
    5.0, "5 orders of magnitude (0.005-458 s)", "§6.4, the HPGMG-FE datasets", "the data's range"
)
NOT_COMPARED = PaperValue(
    None, "not compared", "§6.5.2.4", "the thesis compares errors at equal cost"
)
GRID_POINTS = 60


@dataclass(frozen=True)
class LearningSettings:
    dataset: Path
    repeats: int = 3
    steps: int = 100  # runs added per replay; the whole Active set is about 260
    rules: str = "VR,CE,CE:0.25,Random"

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.steps < 1:
            raise InputError("learning settings: 'repeats' and 'steps' must be >= 1")


def run(settings: LearningSettings, on_event: OnEvent | None = None) -> evaluate.Evaluation:
    frame = dataset.load(settings.dataset)
    config = evaluate.Settings(
        features=evaluate.DEFAULT_FEATURES, repeats=settings.repeats, steps=settings.steps
    )
    return evaluate.evaluate(frame, rules.parse_list(settings.rules), config, on_event)


def _curve(run: pd.DataFrame, grid: np.ndarray) -> np.ndarray:
    """A replay's RMSE at each cost of ``grid``: its last step's at or below that cost."""
    costs = run["cost"].to_numpy()
    values = run["rmse"].to_numpy()
    idx = np.searchsorted(costs, grid, side="right") - 1
    return np.where(idx >= 0, values[np.clip(idx, 0, None)], np.nan)


def equal_cost(trajectories: pd.DataFrame, rule: str, base: str = "VR") -> pd.DataFrame:
    """Per repeat, on the costs both replays reached: 1 - RMSE(rule) / RMSE(base), in percent."""
    rows = []
    for repeat, group in trajectories.groupby("repeat"):
        a = group[group.rule == rule].sort_values("step")
        b = group[group.rule == base].sort_values("step")
        if a.empty or b.empty:
            continue
        low = max(float(a.cost.iloc[0]), float(b.cost.iloc[0]))
        high = min(float(a.cost.iloc[-1]), float(b.cost.iloc[-1]))
        if not high > low:
            continue
        grid = np.geomspace(low, high, GRID_POINTS)
        gain = 100 * (1 - _curve(a, grid) / _curve(b, grid))
        rows += [
            {"repeat": repeat, "cost": c, "reduction_pct": g}
            for c, g in zip(grid, gain, strict=True)
        ]
    return pd.DataFrame(rows, columns=["repeat", "cost", "reduction_pct"])


def _crossing(curve: pd.DataFrame) -> float:
    """The lowest cost beyond which the reduction stays positive; NaN if it never does."""
    ordered = curve.sort_values("cost")
    positive = ordered["reduction_pct"].to_numpy() > 0
    if not positive.any() or not positive[-1]:
        return math.nan
    last_bad = np.flatnonzero(~positive)
    start = 0 if last_bad.size == 0 else int(last_bad[-1]) + 1
    return float(ordered["cost"].iloc[start])


def provenance(settings: LearningSettings) -> str:
    frame = dataset.load(settings.dataset)
    days = sorted({str(t)[:10] for t in frame["submit_time"].dropna()})
    when = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    first = frame.iloc[0]
    mem = float(first["mem_total_kb"]) / 2**20
    return (
        f"The committed dataset `{settings.dataset.name}`: {len(frame)} HPGMG-FE runs recorded "
        f"on {when} on the {first['testbed']} testbed, whose nodes share one "
        f"{int(first['cpu_cores'])}-core {first['cpu_model']} machine with {mem:.0f} GiB (from "
        "the rows' own columns). The replay runs here: every repeat splits the runs at random "
        "into one Initial run, Active and Test sets, and each rule adds Active runs one at a "
        f"time; {settings.repeats} repeats of {settings.steps} steps each."
    )


def section(result: evaluate.Evaluation, settings: LearningSettings, figure: str) -> Section:
    traj = result.trajectories
    labels = list(dict.fromkeys(traj["rule"]))
    ce_rules = [r for r in labels if r.startswith("CE")]
    frame = evaluate.usable(dataset.load(settings.dataset), result.settings)
    runtime = frame[result.settings.response]
    orders = math.log10(float(runtime.max()) / float(runtime.min()))
    total = float(frame[result.settings.cost].sum())
    rows: list[Row] = []
    cols = (f"ours: mean ± sd over {settings.repeats} repeats",)
    for rule in ce_rules:
        curve = equal_cost(traj, rule)
        best = Spread.of(curve.groupby("repeat")["reduction_pct"].max())
        median = curve.groupby("cost")["reduction_pct"].median() if not curve.empty else pd.Series()
        cross = Spread.of(_crossing(g) for _, g in curve.groupby("repeat"))
        rows.append(
            Row(
                f"{rule} against VR: largest error reduction at equal cost (%)",
                REDUCTION,
                (best.text(1),),
                difference(best.mean, REDUCTION.value, 1, relative=False),
                "Per repeat, the largest 1 - RMSE(CE) / RMSE(VR) over the costs both "
                "replays reached (up to "
                f"{number(float(curve.cost.max()) if len(curve) else math.nan, 0)} core-s); "
                "the reduction at the median over repeats reaches "
                f"{number(float(median.max()) if len(median) else math.nan, 1)}%.",
            )
        )
        rows.append(
            Row(
                f"{rule} against VR: cost beyond which CE's error stays lower (core-s)",
                CROSSING,
                (cross.text(0) + f" ({len(cross.finite)} of {cross.n} repeats cross)",),
                difference(cross.mean, CROSSING.value, 0),
                f"Our replays stop after {settings.steps} runs (at most "
                f"{number(float(traj.cost.max()), 0)} core-s); the whole dataset costs "
                f"{number(total, 0)} core-s. The thesis's CE wins late in the learning, "
                "after many cheap runs.",
            )
        )
    target = evaluate.cost_to_target(traj, result.reference, result.settings.target_ratio)
    target = target.set_index("rule")
    if "Random" in target.index:
        random_cost = float(str(target.loc["Random", "cost_median"]))
        for rule in ("VR", *ce_rules):
            if rule not in target.index:
                continue
            cost = float(str(target.loc[rule, "cost_median"]))
            if math.isfinite(cost) and math.isfinite(random_cost):
                ours = (
                    f"{100 * (cost / random_cost - 1):+.0f}% (median cost {number(cost, 0)} "
                    f"against {number(random_cost, 0)} core-s)"
                )
            else:
                ours = f"not reached by the median repeat within {settings.steps} steps"
            rows.append(
                Row(
                    f"{rule}: cost to reach the target error, against Random",
                    NOT_COMPARED,
                    (ours,),
                    MISSING,
                    "ptc's own measure: the cost until the Test error first comes within 10% "
                    "of a model fitted on all the Active runs. A repeat that does not reach it "
                    "within the steps counts as infinite.",
                )
            )
    rows.append(
        Row(
            "range of the runtimes (orders of magnitude)",
            RUNTIME_RANGE,
            (
                f"{orders:.1f} ({number(float(runtime.min()), 2)}-"
                f"{number(float(runtime.max()), 1)} s)",
            ),
            difference(orders, RUNTIME_RANGE.value, 1, relative=False),
            "What CE can gain is bounded by how much cheaper the cheap runs are. A dataset "
            "with a wider range, across problem sizes and node counts, is what would "
            "show more of CE's advantage; it needs a live campaign.",
        )
    )
    table = Table(
        "Active learning: CE against VR at equal cost (thesis Ch. 6)",
        OWNER,
        cols,
        tuple(rows),
        notes=("RMSE: of the log runtime on the Test set. Cost: core-seconds of the runs used.",),
    )
    return Section(
        "Duplyakin's thesis, Ch. 6-7: active learning",
        (provenance(settings),),
        (table,),
        (
            Figure(
                figure,
                "Active learning: median Test RMSE against cumulative cost (IQR shaded), per rule",
            ),
        ),
    )
