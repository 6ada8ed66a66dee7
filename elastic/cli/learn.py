"""`ptc learn`: active learning over performance datasets (offline replay) and on a cluster (live)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic.bench import dataset, spec
from elastic.cli import draw
from elastic.errors import InputError
from elastic.learn import evaluate as evaluation
from elastic.learn import live, rules
from elastic.testbed import experiment as experiments

app = typer.Typer(no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

MinNoise = Annotated[
    float, typer.Option(help="lower bound of the GP noise (sigma_n, or sigma_n^2: --noise-bound)")
]
NoiseBound = Annotated[
    str, typer.Option(help="the bound applies to 'sd' (sigma_n, default) or 'variance'")
]
Anisotropic = Annotated[
    bool, typer.Option("--anisotropic", help="one RBF length scale per feature (default: one)")
]


def _check_bound(value: str) -> str:
    if value not in ("sd", "variance"):
        raise InputError(f"--noise-bound must be 'sd' or 'variance', not {value!r}")
    return value


@app.command("evaluate")
def evaluate_cmd(
    path: Annotated[Path, typer.Argument(help="dataset (Parquet or CSV)")],
    rule_list: Annotated[
        str, typer.Option("--rules", help="comma-separated: VR, CE, CE:C (cost weight), Random")
    ] = "VR,CE,Random",
    repeats: Annotated[int, typer.Option(help="random partitions per rule")] = 20,
    steps: Annotated[
        int | None, typer.Option(help="steps per replay (default: the whole Active set)")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the partitions and of Random")] = 0,
    out: Annotated[Path, typer.Option(help="directory for the CSVs and plots")] = Path(
        "learn-evaluation"
    ),
    response: Annotated[str, typer.Option(help="column to model (log-transformed)")] = "runtime_s",
    cost: Annotated[
        str, typer.Option(help="cost column (core-seconds); solve_cost_core_s is derived")
    ] = "cost_core_s",
    features: Annotated[str, typer.Option(help="comma-separated feature columns")] = ",".join(
        evaluation.DEFAULT_FEATURES
    ),
    log_features: Annotated[str, typer.Option(help="features taken as logs")] = "size",
    min_noise: MinNoise = 0.1,
    noise_bound: NoiseBound = "sd",
    anisotropic: Anisotropic = False,
    restarts: Annotated[int, typer.Option(help="random restarts of the LML optimiser")] = 2,
    restart_every: Annotated[
        int, typer.Option(help="restart every K steps, warm-started fits in between")
    ] = 10,
    cost_weight: Annotated[float, typer.Option(help="C of CE when --rules says just CE")] = 1.0,
) -> None:
    """Replay active learning over DATASET: RMSE, AMSD and cost per step, median and IQR plots."""
    if repeats < 1:
        raise InputError("--repeats must be at least 1")
    if steps is not None and steps < 1:
        raise InputError("--steps must be at least 1")
    settings = evaluation.Settings(
        response=response,
        cost=cost,
        features=tuple(f.strip() for f in features.split(",") if f.strip()),
        log_features=tuple(f.strip() for f in log_features.split(",") if f.strip()),
        repeats=repeats,
        steps=steps,
        seed=seed,
        min_noise=min_noise,
        noise_bound=_check_bound(noise_bound),
        isotropic=not anisotropic,
        restarts=restarts,
        restart_every=restart_every,
    )
    chosen = rules.parse_list(rule_list, cost_weight)
    frame = dataset.derived(dataset.load(path))
    with draw.progress(err_console) as on_event:
        result = evaluation.evaluate(frame, chosen, settings, on_event)
    files = evaluation.write(result, out)
    table = Table(
        "rule",
        "reached",
        "cost to target, median",
        "IQR",
        title=f"cost (core-s) to RMSE <= {settings.target_ratio:g} x the all-Active model's",
    )
    for row in result.summary.to_dict("records"):
        table.add_row(
            str(row["rule"]),
            f"{row['reached']}/{row['repeats']}",
            _num(row["cost_median"]),
            f"{_num(row['cost_q1'])} - {_num(row['cost_q3'])}",
        )
    console.print(table)
    console.print(
        f"all-Active model RMSE (median over repeats): "
        f"{result.reference['rmse_all'].median():.4g}; {result.wall_s:.0f}s"
    )
    for file in files:
        console.print(f"wrote {file}")


@app.command("run")
def run_cmd(
    campaign_file: Annotated[Path, typer.Argument(help="campaign file (YAML): the candidates")],
    name: Annotated[str, typer.Argument(help="experiment name")],
    rule: Annotated[str, typer.Option(help="VR, CE, CE:C or Random")] = "CE",
    budget: Annotated[float, typer.Option(help="cost to spend, core-seconds")] = 600.0,
    out: Annotated[
        Path | None, typer.Option(help="dataset (Parquet); default in the experiment")
    ] = None,
    window: Annotated[int, typer.Option(help="AMSD convergence: steps looked back")] = 5,
    tolerance: Annotated[
        float, typer.Option(help="AMSD convergence: relative change below this")
    ] = 0.02,
    max_steps: Annotated[int | None, typer.Option(help="stop after this many runs")] = None,
    min_noise: MinNoise = 0.1,
    noise_bound: NoiseBound = "sd",
    anisotropic: Anisotropic = False,
    seed: Annotated[int, typer.Option(help="seed of the optimiser and of Random")] = 0,
) -> None:
    """Active learning on EXPERIMENT: fit, pick, run, append, refit; stop at budget or AMSD."""
    plan = spec.load(campaign_file)
    chosen = rules.parse(rule)
    settings = live.LiveSettings(
        min_noise=min_noise,
        noise_bound=_check_bound(noise_bound),
        isotropic=not anisotropic,
        window=window,
        tolerance=tolerance,
        max_steps=max_steps,
        seed=seed,
    )
    exp = experiments.load(name)
    path = out or exp.datasets_dir / f"{plan.name}.parquet"
    with draw.progress(err_console) as on_event:
        result = live.learn(exp, plan, path, chosen, budget, settings, on_event)
    table = Table("step", "run", "AMSD before", "predicted s", "cost core-s", "spent", "state")
    for s in result.steps:
        table.add_row(
            str(s.step), s.run_id, _num(s.amsd), _num(s.predicted_s), _num(s.cost_core_s),
            _num(s.spent_core_s), s.state,
        )  # fmt: skip
    console.print(table)
    console.print(
        f"stopped: {result.stop}; {len(result.steps)} runs, {result.spent_core_s:.1f} core-s "
        f"of {budget:g}; AMSD {(_num(result.amsd[-1]) if result.amsd else '-')}; "
        f"{result.wall_s:.0f}s"
    )
    console.print(f"dataset: {path} (+ .csv, .columns.json)")


def _num(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return "inf" if math.isinf(value) else f"{value:.4g}"
    return str(value)
