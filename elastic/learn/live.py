"""Active learning that runs its own experiments: fit, pick, run through Slurm, append, refit.

The "online" mode the thesis names as its target (§6.5.1, §7.3) and left for future work. The
candidates are the configurations of a campaign file (its factors' levels); the model and the
rules are those of the offline replay (``elastic.learn.gp``, ``elastic.learn.rules``). Each step:

1. fit the GP on every good row of the dataset whose configuration is in the campaign's space
   (rows from earlier campaigns over the same configurations count too);
2. predict mean and standard deviation of the log response at every configuration; the AMSD is
   the mean of those standard deviations over the whole space;
3. stop if the cost spent by this loop has reached the budget, or the AMSD has converged: its
   relative change over the last ``window`` steps is below ``tolerance`` (§6.5.2.4: "when it
   converges ... AL can be terminated");
4. otherwise the rule picks a configuration (a configuration may be picked again: a new repeat of
   it is run, since the data are noisy), the campaign engine runs it through Slurm as a one-task
   job array and appends its row, failed or not, to the dataset.

With no usable row yet, the first step runs the campaign's first configuration in its seeded
order: the thesis's single Initial run. The cost of a run is its ``cost_core_s`` (runtime x
cores); a failed run costs what Slurm says it held (elapsed x allocated CPUs). The run that
crosses the budget is completed, since its cost is only known afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from elastic.bench import campaign as campaigns
from elastic.bench.spec import Campaign, Run
from elastic.errors import InputError, PtcError
from elastic.events import OnEvent, Reporter
from elastic.learn.gp import Features, Model
from elastic.learn.rules import Rule

LOG_FEATURES = ("size", "n", "boxes_per_rank")


@dataclass(frozen=True)
class LiveSettings:
    response: str = "runtime_s"
    min_noise: float = 0.1
    noise_bound: str = "sd"
    isotropic: bool = True
    restarts: int = 2
    window: int = 5
    tolerance: float = 0.02
    min_steps: int = 5
    max_steps: int | None = None
    max_failures: int = 3
    seed: int = 0
    poll_s: float = 2.0
    timeout_s: float = 3600.0


@dataclass
class Step:
    step: int
    config_id: str
    run_id: str
    amsd: float
    sd_pick: float
    predicted_s: float
    cost_core_s: float
    spent_core_s: float
    state: str


@dataclass
class LiveResult:
    dataset: Path
    stop: str  # "budget", "converged", "steps", "failures"
    spent_core_s: float
    amsd: list[float] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0


def space_frame(campaign: Campaign) -> pd.DataFrame:
    """The campaign's configurations, one row each, with their config_id and cores."""
    runs = [Run(campaign.name, campaign.benchmark, config, 0) for config in campaign.space()]
    frame = pd.DataFrame([dict(r.config) for r in runs])
    frame["config_id"] = [r.config_id for r in runs]
    frame["cores"] = [r.cores for r in runs]
    return frame


def training_rows(frame: pd.DataFrame, space: pd.DataFrame, response: str) -> pd.DataFrame:
    """Good rows of the dataset whose configuration is one of the space's."""
    if frame.empty or response not in frame.columns:
        return pd.DataFrame()
    ok = frame[frame["config_id"].isin(set(space["config_id"])) & (frame[response] > 0)]
    if "state" in ok.columns:
        ok = ok[ok["state"] == "COMPLETED"]
    if "error" in ok.columns:
        ok = ok[ok["error"].fillna("") == ""]
    return ok.reset_index(drop=True)


def next_repeat(frame: pd.DataFrame, campaign: Campaign, config_id: str) -> int:
    """A repeat index not used yet by this campaign for this configuration."""
    if frame.empty:
        return 0
    mine = frame[(frame["campaign"] == campaign.name) & (frame["config_id"] == config_id)]
    return int(mine["repeat"].max()) + 1 if len(mine) else 0


def run_cost(row: dict[str, Any]) -> float:
    """Core-seconds a run took; for a failed run, what Slurm held for it."""
    cost = row.get("cost_core_s")
    if isinstance(cost, int | float) and cost == cost and cost > 0:
        return float(cost)
    elapsed, cpus = row.get("elapsed_s"), row.get("alloc_cpus")
    numbers = isinstance(elapsed, int | float) and isinstance(cpus, int | float)
    if numbers and elapsed == elapsed and cpus == cpus:  # NaN != NaN
        return float(elapsed) * float(cpus)  # type: ignore[arg-type]
    return 0.0


def converged(amsd: Sequence[float], window: int, tolerance: float) -> bool:
    """True when AMSD changed by less than ``tolerance`` (relative) over ``window`` steps."""
    if window < 1 or len(amsd) <= window:
        return False
    before, now = amsd[-1 - window], amsd[-1]
    return abs(now - before) <= tolerance * max(abs(before), 1e-12)


def learn(
    target: campaigns.Target,
    campaign: Campaign,
    out: Path,
    rule: Rule,
    budget_core_s: float,
    settings: LiveSettings | None = None,
    on_event: OnEvent | None = None,
) -> LiveResult:
    """Run active learning on ``target``'s cluster until the budget or AMSD convergence."""
    settings = settings or LiveSettings()
    if budget_core_s <= 0:
        raise InputError("--budget must be positive (core-seconds)")
    started = time.monotonic()
    report = Reporter("learn", on_event)
    space = space_frame(campaign)
    if len(space) < 2:
        raise InputError(f"{campaign.source}: factors: the campaign has one configuration only")
    features = [c for c in campaign.factors if c in space.columns]
    feats = Features.fit(space, features, [c for c in LOG_FEATURES if c in features])
    x_space = feats.transform(space)
    log_cores = np.log(space["cores"].to_numpy(dtype=float))
    model = Model(
        settings.min_noise, settings.restarts, settings.seed, settings.isotropic,
        settings.noise_bound,
    )  # fmt: skip
    result = LiveResult(out, "budget", 0.0)
    rng = np.random.default_rng(settings.seed)
    report.begin(
        f"{campaign.name}: rule {rule.label}, budget {budget_core_s:g} core-s, "
        f"{len(space)} configurations ({', '.join(feats.columns)})",
        total=round(budget_core_s),
    )
    failures = 0
    step = 0
    while True:
        frame = campaigns.existing_rows(out)
        train = training_rows(frame, space, settings.response)
        if len(train):
            model.fit(
                feats.transform(train),
                np.log(train[settings.response].to_numpy(dtype=float)),
                warm=step > 2,
                restarts=None if step <= 2 or step % 10 == 0 else 0,
            )
            mu, sd = model.predict(x_space)
            amsd = float(np.mean(sd))
            result.amsd.append(amsd)
            index = rule.pick(mu, sd, rng, mu + log_cores)
            predicted = float(np.exp(mu[index]))
            sd_pick = float(sd[index])
        else:
            amsd = sd_pick = predicted = float("nan")
            first = campaign.runs()[0]
            index = int(np.flatnonzero(space["config_id"] == first.config_id)[0])
        spent = result.spent_core_s
        report.progress(
            int(min(spent, budget_core_s)),
            round(budget_core_s),
            f"step {step}: AMSD {amsd:.4g}, cost {spent:.1f}/{budget_core_s:g} core-s, "
            f"{len(train)} runs in the model",
            step=step,
            amsd=amsd,
            spent_core_s=spent,
        )
        stop = ""
        if spent >= budget_core_s:
            stop = "budget"
        elif step >= settings.min_steps and converged(
            result.amsd, settings.window, settings.tolerance
        ):
            stop = "converged"
        elif settings.max_steps is not None and step >= settings.max_steps:
            stop = "steps"
        elif failures >= settings.max_failures:
            stop = "failures"
        if stop:
            result.stop = stop
            break
        config = {
            str(k): v.item() if isinstance(v, np.generic) else v
            for k, v in space.iloc[index].items()
            if k not in ("config_id", "cores")
        }
        probe = Run(campaign.name, campaign.benchmark, config, 0)
        run = Run(
            campaign.name,
            campaign.benchmark,
            config,
            next_repeat(frame, campaign, probe.config_id),
            order=step,
        )
        report.status(
            f"step {step}: AMSD {amsd:.4g}, cost {spent:.1f}/{budget_core_s:g} core-s; "
            f"{rule.label} picks {_describe(config)} "
            f"(predicted {predicted:.3g}s, sd {sd_pick:.3g}) as {run.run_id}",
            step=step,
            amsd=amsd,
            spent_core_s=spent,
        )
        done = campaigns.run(
            target, campaign, out, on_event,
            poll_s=settings.poll_s, timeout_s=settings.timeout_s, only=[run],
        )  # fmt: skip
        if not done.rows:
            raise PtcError(f"learn: the run {run.run_id} produced no row")
        row = done.rows[-1]
        cost = run_cost(row)
        result.spent_core_s += cost
        result.rows.extend(done.rows)
        good = campaigns.is_good(row)
        failures = 0 if good else failures + 1
        result.steps.append(
            Step(step, run.config_id, run.run_id, amsd, sd_pick, predicted, cost,
                 result.spent_core_s, str(row.get("state", "")))
        )  # fmt: skip
        if not good:
            report.warning(f"step {step}: {run.run_id} failed: {row.get('error', '')}")
        step += 1
    result.wall_s = time.monotonic() - started
    report.end(
        f"{campaign.name}: stopped ({result.stop}) after {len(result.steps)} runs, "
        f"{result.spent_core_s:.1f} core-s, AMSD {result.amsd[-1] if result.amsd else float('nan'):.4g}",
        stop=result.stop,
    )
    return result


def _describe(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())
