"""The figures the Part-Time Cloud evaluation (§4.3, §4.4) asks for, on our traces.

    .venv/bin/python benchmarks/sim_paper_results.py

High-priority class (PAP+, priority 10, ~1% of jobs):
- NREL Eagle sample: the three rare partitions (partition004/007/009, 7 of the 642 filtered
  jobs, 1.1%) stand in for Peregrine's bigmem queue; the sample has a single qos ("normal").
- KTH-SP2 and HTC have no queue to single out: round(1% x jobs) jobs drawn uniformly with
  numpy's default_rng(seed=0) (``--high-fraction 0.01 --seed 0`` on the CLI).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from elastic.sim.schedule import simulate
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep
from elastic.sim.workload import WorkloadSpec, prepare

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "traces"
HTC = TRACES / "htc-condor-1120.submit"
KTH = TRACES / "KTH-SP2-1996-2.swf"
EAGLE = TRACES / "nrel-eagle-sample-1000.csv"
EAGLE_RULE = ("queue=partition00[479]:10",)
SHORT_GPS = (60.0, 120.0, 1200.0, 1800.0)


def run(spec: WorkloadSpec, nodes: int, preempt: int) -> tuple[SweepResult, int, int]:
    trace, _ = prepare(spec)
    schedule = simulate(np.zeros(len(trace)), trace.runtime, trace.requested, trace.nodes, nodes)
    config = SweepConfig(preempt=preempt, keep_selections=True)
    result = run_sweep(schedule, trace.priority, config)
    return result, len(trace), int((trace.priority > 1).sum())


def medians(result: SweepResult, policies: tuple[str, ...], gps: tuple[float, ...]) -> None:
    print("    median WC (node-hours) " + " ".join(f"{g:>8g}" for g in gps))
    for name in policies:
        p = result.policies.index(name)
        row = [np.median(result.wc[p, result.grace_periods.index(g)]) / 3600 for g in gps]
        print(f"    {name:>24s} " + " ".join(f"{v:8.3f}" for v in row))


def overlap(result: SweepResult, preempt: int) -> None:
    same = (result.selections["LIFO"] == result.selections["PAP"]).all(axis=1)
    contested = result.idle < preempt  # otherwise both just take idle nodes
    print(
        f"    LIFO and PAP preempt the same nodes in {same.mean():.1%} of all samples, "
        f"{same[contested].mean():.1%} of the {contested.sum():,} samples with < P idle nodes"
    )
    p = result.policies.index("LIFO")
    g = result.grace_periods.index(60.0)
    q = result.policies.index("PAP")
    print(f"    identical WC at GP=60 s: {(result.wc[p, g] == result.wc[q, g]).mean():.1%}")


def pap_plus(result: SweepResult, high_jobs: int, jobs: int) -> None:
    pap, plus = result.policies.index("PAP"), result.policies.index("PAP+")
    print(f"    PAP+ vs PAP, {high_jobs} high-priority jobs of {jobs:,} ({high_jobs / jobs:.1%}):")
    print("      GP (s)    high    default      all   (change in cumulative WC)")
    for g, gp in enumerate(result.grace_periods):
        if gp not in SHORT_GPS and gp != 3600.0:
            continue
        hi = [result.wc_high[k, g].sum() for k in (pap, plus)]
        al = [result.wc[k, g].sum() for k in (pap, plus)]
        de = [a - h for a, h in zip(al, hi, strict=True)]
        cells = [(b - a) / a * 100 if a > 0 else float("nan") for a, b in (hi, de, al)]
        print(f"      {gp:6g} " + " ".join(f"{c:+8.1f}%" for c in cells))


def scenario(title: str, spec: WorkloadSpec, nodes: int, preempt: int, htc: bool) -> None:
    began = time.perf_counter()
    result, jobs, high = run(spec, nodes, preempt)
    took = time.perf_counter() - began
    print(
        f"\n== {title}: N={nodes}, P={preempt}, {jobs:,} jobs, {result.samples:,} snapshots "
        f"({took:.1f} s)"
    )
    if htc:
        medians(result, ("RANDOM", "FIFO", "LIFO"), result.grace_periods[:5])
    else:
        medians(result, ("RANDOM", "FIFO", "LIFO", "PAP"), result.grace_periods)
        overlap(result, preempt)
    pap_plus(result, high, jobs)


def main() -> int:
    for nodes, preempt in ((20, 10), (200, 100)):
        scenario(
            "HTC x10",
            WorkloadSpec(HTC, nodes, seed=0, high_fraction=0.01),
            nodes,
            preempt,
            htc=True,
        )
        scenario(
            "KTH-SP2",
            WorkloadSpec(KTH, nodes, seed=0, high_fraction=0.01),
            nodes,
            preempt,
            htc=False,
        )
        scenario(
            "NREL Eagle sample",
            WorkloadSpec(EAGLE, nodes, priority_rules=EAGLE_RULE),
            nodes,
            preempt,
            htc=False,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
