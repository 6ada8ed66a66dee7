"""Many seeds of the MyCluster simulation: one table row per (variant, seed), and paired gains.

Each variant is a :class:`~elastic.sim.mycluster.MyClusterConfig`; every seed runs under every
variant, and a seed draws the same clusters under each (see ``elastic.sim.mycluster``), so
a variant's gain over a baseline is taken seed by seed: ``completed / baseline - 1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter, Steps
from elastic.sim.mycluster import MyClusterConfig, simulate

COLUMNS = ("variant", "seed", "completed", "migrations", "cost", "proxies")


def run_seeds(
    variants: Mapping[str, MyClusterConfig],
    seeds: Sequence[int],
    on_event: OnEvent | None = None,
) -> pd.DataFrame:
    """Run every variant on every seed; columns ``COLUMNS`` (cost per 1000 jobs added)."""
    if not variants:
        raise InputError("mycluster runs: field 'variants' is empty")
    if not seeds:
        raise InputError("mycluster runs: field 'seeds' is empty")
    steps = Steps(Reporter("mycluster", on_event), "simulating", len(variants) * len(seeds))
    rows: list[dict[str, object]] = []
    for name, config in variants.items():
        for seed in seeds:
            run = simulate(config, int(seed))
            rows.append(
                {
                    "variant": name,
                    "seed": int(seed),
                    "completed": run.completed,
                    "migrations": run.migrations,
                    "cost": run.cost,
                    "proxies": run.proxies,
                }
            )
            steps.advance(f"{name} seed {seed}")
    steps.finish()
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame["cost_per_kjob"] = 1000.0 * frame["cost"] / frame["completed"].clip(lower=1)
    return frame


def paired_gain(frame: pd.DataFrame, variant: str, baseline: str) -> pd.Series:
    """Per seed, ``completed[variant] / completed[baseline] - 1``, indexed by seed."""
    wide = frame.pivot(index="seed", columns="variant", values="completed")
    for name in (variant, baseline):
        if name not in wide.columns:
            raise InputError(f"mycluster runs: no variant {name!r} in the table")
    gain = wide[variant] / wide[baseline].clip(lower=1) - 1.0
    return gain.rename(f"{variant} vs {baseline}")


def describe_gain(gain: pd.Series) -> dict[str, float]:
    """Mean, standard deviation, 95% interval of the mean, and percentiles of a gain."""
    values = gain.to_numpy(dtype=np.float64)
    n = len(values)
    sd = float(values.std(ddof=1)) if n > 1 else 0.0
    p5, p25, p50, p75, p95 = np.percentile(values, [5, 25, 50, 75, 95])
    return {
        "n": float(n),
        "mean": float(values.mean()),
        "sd": sd,
        "ci95": 1.96 * sd / np.sqrt(n) if n > 1 else 0.0,
        "p5": float(p5),
        "p25": float(p25),
        "median": float(p50),
        "p75": float(p75),
        "p95": float(p95),
        "min": float(values.min()),
        "max": float(values.max()),
        "share_lower": float(np.mean(values < 0)),
    }
