"""MyCluster's job proxy migration (Walker's slides) reproduced: the gain of migration over seeds.

Runs ``elastic.sim.mycluster`` (16 clusters, proxies of 32 CPUs, 600 ticks; choices where the
slides are silent are in that module's docstring) and prints:

1. Mean user jobs completed without migration, with MyCluster's older rule (move pending proxies
   to sites whose proxies all run) and with the liability-adjusted rule, beside the slides'
   410K / 460K; the per-seed gain of migration (mean, 95% interval of the mean, spread
   across seeds) beside the slides' +12%.
2. The window k of T(t): the gain for k in 1..32, on seeds apart from those of (1), so the
   default window is not judged on the seeds that chose it.
3. A per-site cap on the user's proxies (a queue limit per user), which bounds how far
   migration can pile proxies on the best sites.
4. Growth: a pool that starts at 2 proxies per site and grows by 8 every 50 ticks, placed by
   ``cheapest_first`` or ``liability_adjusted`` (sites have random prices, independent of
   their speed and queue wait; at most 10 proxies per site), without migration.

Writes ``runs.parquet`` (one row per study, variant and seed) and ``mycluster.png`` under
``benchmarks/results/mycluster/``. It asserts nothing.

    .venv/bin/python benchmarks/mycluster.py [--seeds 300] [--sweep-seeds 100] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from elastic import atomic
from elastic.policies.growth import DEFAULT_WINDOW
from elastic.sim.mycluster import MyClusterConfig
from elastic.sim.mycluster_runs import describe_gain, paired_gain, run_seeds
from elastic.sim.plots import save

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "mycluster"
SLIDES_OFF, SLIDES_ON = 410_000, 460_000  # the slides' CDF, 1000 runs
WINDOWS = (1, 2, 4, 8, 16, 32)
SWEEP_BASE = 100_000  # sweep seeds start here, apart from the headline's


def _chunk(args: tuple[dict[str, MyClusterConfig], list[int]]) -> pd.DataFrame:
    return run_seeds(*args)


def run(variants: dict[str, MyClusterConfig], seeds: list[int], workers: int) -> pd.DataFrame:
    parts = [seeds[i::workers] for i in range(workers) if seeds[i::workers]]
    if len(parts) == 1:
        return run_seeds(variants, seeds)
    with ProcessPoolExecutor(max_workers=len(parts)) as pool:
        frames = list(pool.map(_chunk, [(variants, part) for part in parts]))
    return pd.concat(frames, ignore_index=True).sort_values(["variant", "seed"])


def pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def gain_line(label: str, gain: pd.Series) -> str:
    d = describe_gain(gain)
    return (
        f"  {label:<28} mean {pct(d['mean'])} ± {100 * d['ci95']:.1f} (95% CI), "
        f"sd {100 * d['sd']:.1f} pts, median {pct(d['median'])}, "
        f"5-95% [{pct(d['p5'])}, {pct(d['p95'])}], min {pct(d['min'])}, max {pct(d['max'])}, "
        f"lower on {100 * d['share_lower']:.0f}% of seeds"
    )


def plot(head: pd.DataFrame, sweep: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    for variant, style in (("none", "-"), ("all-running", ":"), ("liability", "--")):
        values = np.sort(head.loc[head.variant == variant, "completed"].to_numpy())
        ax.plot(values / 1000, np.arange(1, len(values) + 1) / len(values), style, label=variant)
    for x, label in ((SLIDES_OFF, "slides: off"), (SLIDES_ON, "slides: on")):
        ax.axvline(x / 1000, color="grey", lw=0.8, ls="-." if "on" in label else "-")
        ax.text(x / 1000, 0.02, label, rotation=90, fontsize=7, color="grey")
    ax.set_xlabel("user jobs completed in 600 ticks (thousands)")
    ax.set_ylabel("CDF over seeds")
    ax.set_title("Migration disabled / enabled")
    ax.legend(fontsize=8)
    ax = axes[1]
    gain = paired_gain(head, "liability", "none") * 100
    ax.hist(gain, bins=40, color="tab:blue", alpha=0.8)
    ax.axvline(100 * (SLIDES_ON / SLIDES_OFF - 1), color="k", ls="--", label="slides +12%")
    ax.axvline(float(gain.mean()), color="tab:red", label=f"mean {gain.mean():+.1f}%")
    ax.set_xlabel("gain of liability-adjusted migration per seed (%)")
    ax.set_ylabel("seeds")
    ax.legend(fontsize=8)
    ax = axes[2]
    means = [100 * paired_gain(sweep, f"k={k}", "none").mean() for k in WINDOWS]
    ax.plot(WINDOWS, means, "-o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("window k of T(t) (ticks)")
    ax.set_ylabel("mean gain over no migration (%)")
    ax.set_title(f"window sweep (default k={DEFAULT_WINDOW})")
    ax.grid(alpha=0.3)
    save(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=300, help="headline seeds (slides: 1000)")
    parser.add_argument("--sweep-seeds", type=int, default=100)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    began = time.perf_counter()
    base = MyClusterConfig()
    seeds = list(range(args.seeds))
    sweep_seeds = list(range(SWEEP_BASE, SWEEP_BASE + args.sweep_seeds))

    print(
        f"MyCluster simulation: {base.sites} clusters, proxy {base.proxy_size} CPUs x "
        f"{base.proxy_runtime} ticks, user jobs {base.job_size} CPUs / {base.job_runtime:g} "
        f"tick, T_W in {base.wait_range}, F in {base.flops_range}, {base.ticks} ticks, "
        f"{base.proxies_per_site} proxies per cluster, window k={base.window}\n"
    )
    head = run(
        {m: replace(base, migration=m) for m in ("none", "all-running", "liability")},
        seeds,
        args.workers,
    )
    print(f"1. Migration, {len(seeds)} seeds (slides: 1000 runs)")
    for variant in ("none", "all-running", "liability"):
        rows = head[head.variant == variant]
        print(
            f"  {variant:<12} completed mean {rows.completed.mean() / 1000:6.1f}K "
            f"median {rows.completed.median() / 1000:6.1f}K "
            f"(sd {rows.completed.std() / 1000:5.1f}K), migrations/run {rows.migrations.mean():.0f}"
        )
    print(
        f"  slides       disabled ~{SLIDES_OFF // 1000}K, enabled ~{SLIDES_ON // 1000}K "
        f"-> {pct(SLIDES_ON / SLIDES_OFF - 1)}"
    )
    print(gain_line("liability vs none", paired_gain(head, "liability", "none")))
    print(gain_line("all-running (old) vs none", paired_gain(head, "all-running", "none")))
    print(gain_line("liability vs all-running", paired_gain(head, "liability", "all-running")))
    off = head[head.variant == "none"].completed.median()
    on = head[head.variant == "liability"].completed.median()
    print(f"  ratio of medians (as a CDF plot shows it): {pct(on / off - 1)}\n")

    variants = {"none": base} | {f"k={k}": replace(base, migration="liability", window=k)
                                 for k in WINDOWS}  # fmt: skip
    sweep = run(variants, sweep_seeds, args.workers)
    print(f"2. Window k of T(t), {len(sweep_seeds)} other seeds: gain of liability vs none")
    for k in WINDOWS:
        print(gain_line(f"k={k}" + (" (default)" if k == DEFAULT_WINDOW else ""),
                        paired_gain(sweep, f"k={k}", "none")))  # fmt: skip
    print()

    capped = run(
        {
            "none": replace(base, capacity=12),
            "liability": replace(base, capacity=12, migration="liability"),
        },
        sweep_seeds,
        args.workers,
    )
    print(
        f"3. At most 12 proxies per cluster (2x the initial 6; a cap of ours, the slides give "
        f"none), {len(sweep_seeds)} seeds"
    )
    print(gain_line("liability vs none, cap 12", paired_gain(capped, "liability", "none")))
    print()

    grow = replace(base, proxies_per_site=2, growth_every=50, growth_k=8, capacity=10)
    growth = run(
        {p: replace(grow, growth_policy=p) for p in ("cheapest_first", "liability_adjusted")},
        sweep_seeds,
        args.workers,
    )
    print(
        f"4. Growth: 2 proxies per cluster, +8 every 50 ticks (to {int(growth.proxies.max())}), "
        f"at most 10 per cluster, no migration, {len(sweep_seeds)} seeds"
    )
    for policy in ("cheapest_first", "liability_adjusted"):
        rows = growth[growth.variant == policy]
        print(
            f"  {policy:<20} completed mean {rows.completed.mean() / 1000:6.1f}K, "
            f"cost mean {rows.cost.mean():7.0f}, cost per 1000 jobs {rows.cost_per_kjob.mean():.3f}"
        )
    print(gain_line("liability_adjusted vs cheapest_first (jobs)",
                    paired_gain(growth, "liability_adjusted", "cheapest_first")))  # fmt: skip
    wide = growth.pivot(index="seed", columns="variant", values="cost_per_kjob")
    ratio = wide["liability_adjusted"] / wide["cheapest_first"] - 1
    print(f"  cost per job, liability_adjusted vs cheapest_first: mean {pct(ratio.mean())}, "
          f"median {pct(ratio.median())}\n")  # fmt: skip

    table = pd.concat(
        [
            head.assign(study="migration"),
            sweep.assign(study="window"),
            capped.assign(study="cap12"),
            growth.assign(study="growth"),
        ],
        ignore_index=True,
    )
    parquet = args.out / "runs.parquet"
    with atomic.replacing(parquet) as tmp:
        table.to_parquet(tmp, index=False)
    plot(head, sweep, args.out / "mycluster.png")
    print(
        f"wrote {parquet} and {args.out / 'mycluster.png'} in {time.perf_counter() - began:.0f} s"
    )


if __name__ == "__main__":
    main()
