"""The thesis's active learning (Ch. 6-7) beside a replay on ptc's committed HPGMG-FE dataset.

The dataset was recorded live (``datasets/``); the replay (``elastic.learn.evaluate``) runs
here, so its numbers are computed by the report. The thesis compares Cost Efficiency (CE) with
Variance Reduction (VR) by their errors at equal cost: CE's error is up to 38% lower once the
cost passes the point where the curves cross (§6.5.2.4, Fig. 6.8b).

The replay runs once per :data:`MEASURES` entry. The thesis's runtimes (0.005-458 s) are
HPGMG-FE's own solve times: no job starts in 5 ms. A job's wall time adds MPI start-up and
PETSc set-up, a floor that narrows the range CE can exploit; the dataset holds both, so the two
replays show what that floor costs CE without a new campaign.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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
class Measure:
    """What a replay models and pays: ``response`` is learnt (log), ``cost`` is spent."""

    name: str
    response: str
    cost: str
    label: str  # what the response is, for titles and axes
    why: str  # how it relates to the thesis's runtimes


SOLVE = Measure(
    "solve",
    "solve_time_s",
    "solve_cost_core_s",  # not stored: ``dataset.derived``
    "solve time",
    "HPGMG-FE's own time for one solve, as the thesis's runtimes are",
)
JOB = Measure(
    "job",
    "runtime_s",
    "cost_core_s",
    "job time",
    "the job's wall time: MPI start-up and PETSc set-up included, a floor the thesis's "
    "runtimes do not have",
)
MEASURES = {m.name: m for m in (SOLVE, JOB)}


@dataclass(frozen=True)
class LearningSettings:
    dataset: Path
    repeats: int = 3
    steps: int = 100  # runs added per replay; the whole Active set is about 260
    rules: str = "VR,CE,CE:0.25,Random"
    measures: tuple[str, ...] = ("solve", "job")

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.steps < 1:
            raise InputError("learning settings: 'repeats' and 'steps' must be >= 1")
        if not self.measures:
            raise InputError(f"learning settings: 'measures' is empty ({', '.join(MEASURES)})")
        for name in self.measures:
            if name not in MEASURES:
                raise InputError(
                    f"learning settings: 'measures': {name!r} is not one of {', '.join(MEASURES)}"
                )


def frame(settings: LearningSettings) -> pd.DataFrame:
    """The dataset with the solve's core-seconds beside the job's (``dataset.derived``)."""
    return dataset.derived(dataset.load(settings.dataset))


def run(
    settings: LearningSettings, measure: Measure, on_event: OnEvent | None = None
) -> evaluate.Evaluation:
    config = evaluate.Settings(
        response=measure.response,
        cost=measure.cost,
        features=evaluate.DEFAULT_FEATURES,
        repeats=settings.repeats,
        steps=settings.steps,
    )
    return evaluate.evaluate(frame(settings), rules.parse_list(settings.rules), config, on_event)


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


def provenance(settings: LearningSettings, data: pd.DataFrame) -> str:
    days = sorted({str(t)[:10] for t in data["submit_time"].dropna()})
    when = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    first = data.iloc[0]
    mem = float(first["mem_total_kb"]) / 2**20
    return (
        f"The committed dataset `{settings.dataset.name}`: {len(data)} HPGMG-FE runs recorded "
        f"on {when} on the {first['testbed']} testbed, whose nodes share one "
        f"{int(first['cpu_cores'])}-core {first['cpu_model']} machine with {mem:.0f} GiB (from "
        "the rows' own columns). The replay runs here: every repeat splits the runs at random "
        "into one Initial run, Active and Test sets, and each rule adds Active runs one at a "
        f"time; {settings.repeats} repeats of {settings.steps} steps each, once per measure: "
        + "; ".join(f"the {MEASURES[m].label} ({MEASURES[m].why})" for m in settings.measures)
        + "."
    )


def _range(usable: pd.DataFrame, result: evaluate.Evaluation) -> tuple[float, float, float]:
    """The orders of magnitude of the replay's response over the usable runs, and its ends."""
    response = usable[result.settings.response]
    low, high = float(response.min()), float(response.max())
    return math.log10(high / low), low, high


def best_reduction(curve: pd.DataFrame) -> Spread:
    """Per repeat, the largest reduction of an ``equal_cost`` curve, in percent."""
    return Spread.of(curve.groupby("repeat")["reduction_pct"].max())


def _ce_rules(result: evaluate.Evaluation) -> list[str]:
    return [r for r in dict.fromkeys(result.trajectories["rule"]) if r.startswith("CE")]


def table(
    result: evaluate.Evaluation, settings: LearningSettings, measure: Measure, data: pd.DataFrame
) -> Table:
    """``data``: the dataset as ``frame`` reads it."""
    traj = result.trajectories
    ce_rules = _ce_rules(result)
    usable = evaluate.usable(data, result.settings)
    orders, low, high = _range(usable, result)
    total = float(usable[result.settings.cost].sum())
    rows: list[Row] = []
    cols = (f"ours: mean ± sd over {settings.repeats} repeats",)
    for rule in ce_rules:
        curve = equal_cost(traj, rule)
        best = best_reduction(curve)
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
                f"{number(float(curve.cost.max()) if len(curve) else math.nan, 1)} core-s); "
                "the reduction at the median over repeats reaches "
                f"{number(float(median.max()) if len(median) else math.nan, 1)}%.",
            )
        )
        rows.append(
            Row(
                f"{rule} against VR: cost beyond which CE's error stays lower (core-s)",
                CROSSING,
                (cross.text(1) + f" ({len(cross.finite)} of {cross.n} repeats cross)",),
                difference(cross.mean, CROSSING.value, 0),
                f"Our replays stop after {settings.steps} runs (at most "
                f"{number(float(traj.cost.max()), 1)} core-s); the whole dataset costs "
                f"{number(total, 0)} core-s of {measure.label}. Costs are those of our "
                "machine's runs, not of the thesis's: compare where CE wins within each "
                "replay, not the core-seconds.",
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
                    f"{100 * (cost / random_cost - 1):+.0f}% (median cost {number(cost, 1)} "
                    f"against {number(random_cost, 1)} core-s)"
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
            f"range of the {measure.label}s (orders of magnitude)",
            RUNTIME_RANGE,
            (f"{orders:.1f} ({number(low, 4 if low < 0.01 else 2)}-{number(high, 1)} s)",),
            difference(orders, RUNTIME_RANGE.value, 1, relative=False),
            f"Over the {len(usable)} usable runs; the {measure.label} is {measure.why}. What "
            "CE can gain is bounded by how much cheaper the cheap runs are.",
        )
    )
    return Table(
        f"Active learning on the {measure.label}: CE against VR at equal cost (thesis Ch. 6)",
        OWNER,
        cols,
        tuple(rows),
        notes=(
            f"RMSE: of the log {measure.label} on the Test set. Cost: core-seconds of "
            f"{measure.label} of the runs used.",
        ),
    )


def comparison(
    results: Mapping[str, evaluate.Evaluation], settings: LearningSettings, data: pd.DataFrame
) -> str:
    """One sentence per measure: its range and each CE rule's largest reduction against VR."""
    parts = []
    for name, result in results.items():
        measure = MEASURES[name]
        orders = _range(evaluate.usable(data, result.settings), result)[0]
        gains = ", ".join(
            f"{r} {best_reduction(equal_cost(result.trajectories, r)).text(1)}%"
            for r in _ce_rules(result)
        )
        parts.append(f"on the {measure.label} ({orders:.1f} orders of magnitude): {gains}")
    return (
        "The largest error reduction against VR at equal cost, mean ± sd over "
        f"{settings.repeats} repeats, " + "; ".join(parts) + ". The thesis reports up to 38%."
    )


def section(
    results: Mapping[str, evaluate.Evaluation],
    settings: LearningSettings,
    figures: Mapping[str, str],
) -> Section:
    """One table and one figure per measure replayed (``results`` and ``figures`` by name)."""
    data = frame(settings)
    return Section(
        "Duplyakin's thesis, Ch. 6-7: active learning",
        (provenance(settings, data), comparison(results, settings, data)),
        tuple(table(result, settings, MEASURES[name], data) for name, result in results.items()),
        tuple(
            Figure(
                figures[name],
                f"Active learning on the {MEASURES[name].label}: median Test RMSE against "
                "cumulative cost (IQR shaded), per rule",
            )
            for name in results
        ),
    )
