"""Offline replay of active learning over a dataset's runs (thesis §6.4, §6.5.2.4, §7.3-7.4).

Per repeat, the good runs are split at random: one Initial run, and the rest 8:2 into Active
and Test sets. The model is fitted on the Initial run; then, step by step, a rule picks one run
from what is left of the Active set (runs of a configuration already used stay candidates: that
is how a point is measured again), the run joins the training data and the model is refitted.
After every step we record:

- ``rmse``: root mean squared error of the predicted log response on the Test set (eq. 6.2);
- ``amsd``: arithmetic mean of the predictive standard deviation over the whole Active set;
- ``sd_pick``: the predictive standard deviation at the picked point;
- ``cost``: cumulative cost (core-seconds) of the runs used, the Initial one included.

Figures are median and interquartile range over repeats, against cumulative cost, as in
Fig. 6.8 and Figs. 7.4-7.5. ``cost_to_target`` is, per rule, the cumulative cost at which RMSE
first comes within ``target_ratio`` (10%) of a model fitted on all the Active data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter
from elastic.learn.gp import Array, Features, Model
from elastic.learn.rules import Rule

DEFAULT_FEATURES = ("operator", "size", "nodes", "ranks_per_node", "threads")


@dataclass(frozen=True)
class Settings:
    response: str = "runtime_s"
    cost: str = "cost_core_s"
    features: Sequence[str] = DEFAULT_FEATURES
    log_features: Sequence[str] = ("size",)
    repeats: int = 20
    steps: int | None = None  # None: until the Active set is used up
    seed: int = 0
    min_noise: float = 0.1
    noise_bound: str = "sd"  # the bound applies to sigma_n ("sd") or to sigma_n^2 ("variance")
    isotropic: bool = True
    restarts: int = 2
    # Hyperparameters: optimised at every one of the first ``settle`` steps, then every
    # ``optimize_every`` steps (the steps between keep them and only condition on the new
    # run); random restarts on the first fits and every ``restart_every`` steps, warm-started
    # optimisation otherwise. optimize_every=1 refits the hyperparameters at every step.
    settle: int = 10
    optimize_every: int = 5
    restart_every: int = 20
    # Stop a replay once its RMSE reaches the target (cost_to_target needs no more).
    stop_at_target: bool = False
    active_fraction: float = 0.8
    target_ratio: float = 1.1
    # CE penalises the predicted log cost, mu + log(cores) (exact when the response is the
    # run's time and the cost its core-seconds), rather than mu alone; False, or a dataset with
    # no ``cores`` column, gives the thesis's sigma - C * mu.
    cost_aware: bool = True
    cores: str = "cores"

    def model(self, seed: int) -> Model:
        return Model(self.min_noise, self.restarts, seed, self.isotropic, self.noise_bound)


@dataclass
class Evaluation:
    trajectories: pd.DataFrame  # rule, repeat, step, cost, rmse, amsd, sd_pick
    reference: pd.DataFrame  # repeat, rmse_all (model on all the Active data)
    summary: pd.DataFrame  # rule, cost_to_target median/IQR, reached
    settings: Settings
    wall_s: float = 0.0
    files: list[Path] = field(default_factory=list)


def usable(frame: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Runs with a positive response and cost (failed runs have neither)."""
    for column in (settings.response, settings.cost):
        if column not in frame.columns:
            raise InputError(f"the dataset has no column {column!r}")
    ok = frame[(frame[settings.response] > 0) & (frame[settings.cost] > 0)]
    if "error" in ok.columns:
        ok = ok[ok["error"].fillna("") == ""]
    ok = ok.reset_index(drop=True)
    if len(ok) < 10:
        raise InputError(f"the dataset has {len(ok)} usable runs; active learning needs 10 or more")
    return ok


def split(n: int, rng: np.random.Generator, active_fraction: float) -> tuple[int, Array, Array]:
    order = rng.permutation(n)
    initial = int(order[0])
    rest = order[1:]
    n_active = round(len(rest) * active_fraction)
    return initial, rest[:n_active].astype(int), rest[n_active:].astype(int)


def _rmse(model: Model, x: Array, log_y: Array) -> float:
    mu, _ = model.predict(x)
    return float(np.sqrt(np.mean((mu - log_y) ** 2)))


def refit(model: Model, x: Array, log_y: Array, step: int, settings: Settings) -> None:
    """Refit as ``settings`` says for this step (see :class:`Settings`)."""
    every = max(1, settings.optimize_every)
    if step >= settings.settle and step % every != 0:
        model.fit(x, log_y, optimize=False)
        return
    cold = step < 3 or settings.restart_every <= 1 or step % settings.restart_every == 0
    model.fit(x, log_y, warm=not cold and step > 0, restarts=None if cold else 0)


def replay(
    x: Array,
    log_y: Array,
    cost: Array,
    rule: Rule,
    initial: int,
    active: Array,
    test: Array,
    settings: Settings,
    rng: np.random.Generator,
    steps: int,
    log_ratio: Array | None = None,
    target: float | None = None,
) -> list[dict[str, float]]:
    """One learning sequence; ``log_ratio`` (log cores per run) turns mu into CE's log cost."""
    model = settings.model(int(rng.integers(2**31)))
    train = [initial]
    pool = list(active)
    spent = float(cost[initial])
    out: list[dict[str, float]] = []
    for step in range(steps + 1):
        refit(model, x[train], log_y[train], step, settings)
        _, sd_active = model.predict(x[active])
        record = {
            "step": float(step),
            "cost": spent,
            "rmse": _rmse(model, x[test], log_y[test]),
            "amsd": float(np.mean(sd_active)),
            "sd_pick": float("nan"),
        }
        out.append(record)
        if step == steps or not pool or (target is not None and record["rmse"] <= target):
            break
        mu, sd = model.predict(x[pool])
        log_cost = mu + log_ratio[pool] if log_ratio is not None else None
        index = rule.pick(mu, sd, rng, log_cost)
        record["sd_pick"] = float(sd[index])
        chosen = pool.pop(index)
        train.append(chosen)
        spent += float(cost[chosen])
    return out


def evaluate(
    frame: pd.DataFrame,
    rules: Sequence[Rule],
    settings: Settings,
    on_event: OnEvent | None = None,
) -> Evaluation:
    """Replay every rule ``settings.repeats`` times on the same random splits (seeded)."""
    started = time.monotonic()
    report = Reporter("learn", on_event)
    data = usable(frame, settings)
    feats = Features.fit(data, settings.features, settings.log_features)
    x = feats.transform(data)
    log_y = np.log(data[settings.response].to_numpy(dtype=float))
    cost = data[settings.cost].to_numpy(dtype=float)
    log_ratio = (
        np.log(data[settings.cores].to_numpy(dtype=float))
        if settings.cost_aware and settings.cores in data.columns
        else None
    )
    total = settings.repeats * len(rules)
    report.begin(
        f"{len(data)} runs, {feats.dimensions} feature dims ({', '.join(feats.columns)})",
        total=total,
    )
    rows: list[dict[str, object]] = []
    refs: list[dict[str, object]] = []
    done = 0
    for repeat in range(settings.repeats):
        split_rng = np.random.default_rng([settings.seed, repeat])
        initial, active, test = split(len(data), split_rng, settings.active_fraction)
        steps = len(active) if settings.steps is None else min(settings.steps, len(active))
        full = settings.model(settings.seed + repeat)
        everything = np.concatenate([[initial], active])
        full.fit(x[everything], log_y[everything])
        rmse_all = _rmse(full, x[test], log_y[test])
        refs.append({"repeat": repeat, "rmse_all": rmse_all})
        for rule_index, rule in enumerate(rules):
            # Each (repeat, rule) has its own stream, so adding a rule changes no other result.
            rng = np.random.default_rng([settings.seed, repeat, rule_index, 7])
            target = rmse_all * settings.target_ratio if settings.stop_at_target else None
            records = replay(
                x,
                log_y,
                cost,
                rule,
                initial,
                active,
                test,
                settings,
                rng,
                steps,
                log_ratio,
                target,
            )
            for rec in records:
                rows.append({"rule": rule.label, "repeat": repeat, **rec})
            done += 1
            report.progress(done, total, f"repeat {repeat + 1}/{settings.repeats} {rule.label}")
    trajectories = pd.DataFrame(rows)
    reference = pd.DataFrame(refs)
    summary = cost_to_target(trajectories, reference, settings.target_ratio)
    wall = time.monotonic() - started
    report.end(f"{total} replays in {wall:.0f}s")
    return Evaluation(trajectories, reference, summary, settings, wall)


def cost_to_target(
    trajectories: pd.DataFrame, reference: pd.DataFrame, ratio: float
) -> pd.DataFrame:
    """Per rule: the cost at which RMSE first reaches ratio x the all-Active model's RMSE."""
    targets = dict(zip(reference["repeat"], reference["rmse_all"] * ratio, strict=True))
    rows = []
    for rule, group in trajectories.groupby("rule", sort=False):
        costs = []
        for repeat, run in group.groupby("repeat"):
            hit = run[run["rmse"] <= targets[int(str(repeat))]]
            costs.append(float(hit["cost"].iloc[0]) if len(hit) else float("nan"))
        values = np.array(costs)
        reached = values[~np.isnan(values)]
        rows.append(
            {
                "rule": rule,
                "repeats": len(values),
                "reached": len(reached),
                # Repeats that never reach the target count as infinitely costly in the median.
                "cost_median": float(
                    np.quantile(
                        np.where(np.isnan(values), np.inf, values), 0.5, method="inverted_cdf"
                    )
                ),
                "cost_q1": float(
                    np.quantile(
                        np.where(np.isnan(values), np.inf, values), 0.25, method="inverted_cdf"
                    )
                ),
                "cost_q3": float(
                    np.quantile(
                        np.where(np.isnan(values), np.inf, values), 0.75, method="inverted_cdf"
                    )
                ),
            }
        )
    return pd.DataFrame(rows)


def bands(
    trajectories: pd.DataFrame, metric: str, points: int = 60, *, reached_only: bool = False
) -> pd.DataFrame:
    """Median and IQR of ``metric`` against cumulative cost, per rule, on a common log grid.

    Each repeat's trajectory is a step function of cost: at cost c its value is that of its last
    step with cost <= c. A point is left out when fewer than half the repeats (rounded down, at
    least one) got that far. With ``reached_only`` a repeat counts only up to the last cost it
    reached, not beyond, and a point needs half the repeats rounded up.
    """
    positive = trajectories[trajectories["cost"] > 0]
    grid = np.geomspace(positive["cost"].min(), positive["cost"].max(), points)
    rows = []
    for rule, group in trajectories.groupby("rule", sort=False):
        curves = []
        for _, run in group.groupby("repeat"):
            costs = run["cost"].to_numpy()
            values = run[metric].to_numpy()
            idx = np.searchsorted(costs, grid, side="right") - 1
            curve = np.where(idx >= 0, values[np.clip(idx, 0, None)], np.nan)
            if reached_only:
                curve = np.where(grid <= costs[-1], curve, np.nan)
            curves.append(curve)
        stack = np.vstack(curves)
        repeats = stack.shape[0]
        need = math.ceil(repeats / 2) if reached_only else max(1, repeats // 2)
        with np.errstate(all="ignore"):
            for i, c in enumerate(grid):
                column = stack[:, i][~np.isnan(stack[:, i])]
                if len(column) < need:
                    continue  # too few repeats got this far
                q1, med, q3 = np.quantile(column, [0.25, 0.5, 0.75])
                rows.append({"rule": rule, "cost": c, "median": med, "q1": q1, "q3": q3})
    return pd.DataFrame(rows, columns=["rule", "cost", "median", "q1", "q3"])


def write(result: Evaluation, out: Path) -> list[Path]:
    """``trajectories.csv``, ``summary.csv`` and the RMSE/AMSD plots into ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    files = [out / "trajectories.csv", out / "summary.csv", out / "reference.csv"]
    result.trajectories.to_csv(files[0], index=False)
    result.summary.to_csv(files[1], index=False)
    result.reference.to_csv(files[2], index=False)
    for metric, label in (
        ("rmse", "RMSE of log response (Test set)"),
        ("amsd", "AMSD (Active set)"),
    ):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        table = bands(result.trajectories, metric)
        for rule, group in table.groupby("rule", sort=False):
            (line,) = ax.plot(group["cost"], group["median"], label=str(rule), linewidth=2)
            ax.fill_between(group["cost"], group["q1"], group["q3"], alpha=0.25,
                            color=line.get_color())  # fmt: skip
        if metric == "rmse":
            target = float(result.reference["rmse_all"].median()) * result.settings.target_ratio
            ax.axhline(target, color="grey", linestyle="--", linewidth=1,
                       label=f"target ({result.settings.target_ratio:g} x all-Active RMSE)")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("cumulative cost, core-seconds")
        ax.set_ylabel(label)
        ax.set_title(f"median and IQR over {result.settings.repeats} repeats")
        ax.legend()
        fig.tight_layout()
        path = out / f"{metric}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        files.append(path)
    result.files = files
    return files
