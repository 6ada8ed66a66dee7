"""HPGMG-FE and HPGMG-FV on a deployed cluster: DOF/s at each size, on 1 and 2 nodes.

    python benchmarks/bench_hpgmg.py EXPERIMENT [--repeats 3] [--out DIR]

The experiment must have HPGMG built into its share (the bench-software playbook with
``hpgmg_fe_enabled=true``, or site.yml with ``ptc_hpgmg_enabled``/``ptc_petsc_enabled``). Both
benchmarks run as campaigns through Slurm, one run at a time on whole nodes (exclusive,
singleton), one rank per node (HPGMG-FV: the same 8 boxes on 1 and on 2 nodes), and the
script prints the median DOF/s per size and node count
as the benchmarks report it (HPGMG-FE: the median solve's MEq/s; HPGMG-FV: the finest level of
its summary). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elastic.bench import campaign as campaigns  # noqa: E402
from elastic.bench import spec  # noqa: E402
from elastic.events import to_logger  # noqa: E402
from elastic.testbed import experiment as experiments  # noqa: E402

FE_SIZES = [1000, 4000, 16000, 64000, 256000]
FV_BOXES = [4, 5, 6]  # log2 of the box edge: 16^3, 32^3, 64^3 cells per box, 8 boxes


def plans(stamp: str, repeats: int) -> list[spec.Campaign]:
    common = {
        "repeats": repeats,
        "order": {"randomize": True, "seed": 1},
        "slurm": {"max_concurrent": 1, "time_limit": "00:10:00", "exclusive": True,
                  "singleton": True},
    }  # fmt: skip
    fe = spec.parse(
        {
            "name": f"bn-fe-{stamp}",
            "benchmark": "hpgmg-fe",
            "factors": {"operator": ["poisson1"], "size": FE_SIZES, "nodes": [1, 2]},
            "options": {"sample_repeat": 3},
            **common,
        }
    )
    # HPGMG-FV's domain is a cube of boxes: ranks x boxes per rank must be a cube, so the same
    # global problem (8 boxes) is 8 boxes on one rank and 4 on each of two.
    fvs = [
        spec.parse(
            {
                "name": f"bn-fv{nodes}-{stamp}",
                "benchmark": "hpgmg-fv",
                "factors": {"log2_box_dim": FV_BOXES, "boxes_per_rank": [8 // nodes],
                            "nodes": [nodes]},
                # Upstream times every pass for 60 s; 2 s is enough for a steady figure here.
                "options": {"min_time": 2},
                **common,
            }
        )
        for nodes in (1, 2)
    ]  # fmt: skip
    return [fe, *fvs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("/tmp/ptc-bench-hpgmg"))
    parser.add_argument("--only", choices=["hpgmg-fe", "hpgmg-fv"], default=None)
    args = parser.parse_args()
    console = Console(width=140)
    exp = experiments.load(args.experiment)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    import logging

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    frames = []
    for plan in plans(stamp, args.repeats):
        if args.only and plan.benchmark != args.only:
            continue
        out = args.out / f"{plan.name}.parquet"
        started = time.monotonic()
        result = campaigns.run(exp, plan, out, to_logger(logging.getLogger("bench")))
        console.print(
            f"{plan.benchmark}: {result.tally.done} runs, {result.tally.failed} failed, "
            f"{time.monotonic() - started:.0f}s; dataset {out}"
        )
        frames.append(pd.DataFrame(result.rows))
    data = pd.concat(frames, ignore_index=True)
    data = data[data["error"].fillna("") == ""]
    for column in ("size", "log2_box_dim"):
        if column not in data.columns:
            data[column] = float("nan")
    table = Table(
        "benchmark", "size", "global DOF", "nodes", "runs", "DOF/s (median)", "min", "max",
        "solve s (median)", title=f"HPGMG on {args.experiment}: one rank per node",
    )  # fmt: skip
    data["size_label"] = data.apply(
        lambda r: (
            f"{int(r['size'])} el"
            if r["benchmark"] == "hpgmg-fe"
            else f"2^{int(r['log2_box_dim'])} box"
        ),
        axis=1,
    )
    data["size_key"] = data["size"].fillna(0) + data["log2_box_dim"].fillna(0)
    data = data.sort_values(["benchmark", "size_key", "nodes"])
    keys = ["benchmark", "size_label", "nodes"]
    for (bench, label, nodes), group in data.groupby(keys, sort=False):
        table.add_row(
            str(bench), str(label), f"{group['global_dofs'].median():.4g}", str(nodes),
            str(len(group)), f"{group['dof_per_s'].median():.3g}",
            f"{group['dof_per_s'].min():.3g}", f"{group['dof_per_s'].max():.3g}",
            f"{group['solve_time_s'].median():.3g}",
        )  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
