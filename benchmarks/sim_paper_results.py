"""The figures the Part-Time Cloud evaluation (§4.3, §4.4) asks for, on our traces.

    .venv/bin/python benchmarks/sim_paper_results.py

The paper's PEREGRINE trace is not public: KTH-SP2 and the NREL Eagle sample stand in for it, so
their figures set the paper's findings against other traces, not its numbers. The HTC trace is
the paper's own. The paper's numbers beside ours: benchmarks/paper_report.py.

Every scenario: batch arrival (the paper's), T = 30 s, the paper's ten grace periods, the
paper's filters with node_count <= N. It prints what it measures and asserts nothing.

High-priority class for PAP+ (priority 10, about 1% of jobs, like the paper's 76 bigmem jobs):
- NREL Eagle sample: the three rare partitions (partition004/007/009), 7 of the 642 filtered
  jobs (1.1%); the sample has a single qos ("normal") and no bigmem queue.
- KTH-SP2 has no queues or applications in its log. Two stand-ins: the jobs of one user (the
  one whose job count is nearest 1% of the N = 20 workload: a real class of similar jobs, as a
  queue is), and round(1% x jobs) jobs drawn with numpy's default_rng(0)
  (``--high-fraction 0.01`` on the CLI).
- HTC: the random 1%.
"""

from __future__ import annotations

import collections
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elastic.sim.schedule import simulate
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep
from elastic.sim.traces import Trace, public
from elastic.sim.workload import WorkloadSpec, prepare

# A data directory beside the checkout, if there is one; else ptc's trace cache (ptc sim fetch).
TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "traces"
EAGLE_RULE = ("queue=partition00[479]:10",)
REPORTED_GPS = (60.0, 120.0, 1200.0, 1800.0, 3600.0)


@dataclass(frozen=True)
class Scenario:
    title: str
    spec: WorkloadSpec
    nodes: int
    preempt: int


def run(scenario: Scenario) -> tuple[SweepResult, Trace]:
    trace, _ = prepare(scenario.spec)
    schedule = simulate(
        np.zeros(len(trace)), trace.runtime, trace.requested, trace.nodes, scenario.nodes
    )
    config = SweepConfig(preempt=scenario.preempt, keep_selections=True)
    return run_sweep(schedule, trace.priority, config), trace


def medians(result: SweepResult) -> None:
    gps = result.grace_periods
    print("  median WC per preemption (node-hours), by GP in seconds:")
    print("    " + " " * 8 + "".join(f"{g:>9g}" for g in gps))
    for p, name in enumerate(result.policies):
        row = [np.median(result.wc[p, g]) / 3600 for g in range(len(gps))]
        print(f"    {name:>8s}" + "".join(f"{v:9.2f}" for v in row))
    g60, g1800 = gps.index(60.0), gps.index(1800.0)
    changes = []
    for p, name in enumerate(result.policies):
        a, b = np.median(result.wc[p, g60]), np.median(result.wc[p, g1800])
        changes.append(f"{name} {(b - a) / a:+.1%}" if a > 0 else f"{name} n/a")
    print("  median, GP 60 s -> 30 min: " + ", ".join(changes))


def overlap(result: SweepResult, preempt: int) -> None:
    lifo, pap = result.selections["LIFO"], result.selections["PAP"]
    same = (lifo == pap).all(axis=1)
    shared = np.asarray([np.intersect1d(a, b).size for a, b in zip(lifo, pap, strict=True)])
    contested = result.idle < preempt  # otherwise both policies just take idle nodes
    g = result.grace_periods.index(60.0)
    p, q = result.policies.index("LIFO"), result.policies.index("PAP")
    print(
        f"  LIFO and PAP preempt the same {preempt} nodes in {same.mean():.1%} of samples "
        f"({same[contested].mean():.1%} of the {contested.mean():.0%} with fewer than P idle "
        f"nodes); on average they share {shared.mean() / preempt:.1%} of their picks; "
        f"identical WC at GP 60 s in {(result.wc[p, g] == result.wc[q, g]).mean():.1%}"
    )


def pap_plus(result: SweepResult, trace: Trace, nodes: int, preempt: int) -> None:
    high = trace.priority > 1.0
    if not high.any():
        return
    node_hours = trace.runtime * trace.nodes / 3600
    unprotectable = high & (trace.nodes > nodes - preempt)
    print(
        f"  PAP+ vs PAP: {high.sum()} high-priority jobs of {len(trace):,} ({high.mean():.1%}); "
        f"{unprotectable.sum()} of them ({node_hours[unprotectable].sum() / node_hours[high].sum():.0%}"
        f" of the class's node-hours) need more than N - P = {nodes - preempt} nodes, "
        "which no vector can spare"
    )
    a, b = result.policies.index("PAP"), result.policies.index("PAP+")
    print("    change in cumulative WC, PAP -> PAP+:   high   default       all")
    for gp in REPORTED_GPS:
        g = result.grace_periods.index(gp)
        hi = [result.wc_high[k, g].sum() for k in (a, b)]
        al = [result.wc[k, g].sum() for k in (a, b)]
        de = [x - y for x, y in zip(al, hi, strict=True)]
        cells = [(new - old) / old if old > 0 else float("nan") for old, new in (hi, de, al)]
        print(f"    GP {gp:6g} s {'':22s}" + "".join(f"{c:+10.1%}" for c in cells))


def report(scenario: Scenario, multi_node: bool) -> None:
    began = time.perf_counter()
    result, trace = run(scenario)
    took = time.perf_counter() - began
    print(
        f"\n== {scenario.title}: N={scenario.nodes}, P={scenario.preempt}, {len(trace):,} jobs, "
        f"{result.samples:,} snapshots ({took:.1f} s)"
    )
    medians(result)
    if multi_node:
        overlap(result, scenario.preempt)
    pap_plus(result, trace, scenario.nodes, scenario.preempt)


def one_percent_user(path: Path, nodes: int) -> str:
    trace, _ = prepare(WorkloadSpec(path, nodes))
    counts = collections.Counter(str(u) for u in trace.user if u)
    return min(counts, key=lambda user: (abs(counts[user] - 0.01 * len(trace)), user))


def main() -> int:
    htc, kth, eagle = (public.locate(n, TRACES) for n in ("htc-condor", "kth-sp2", "nrel-eagle"))
    user = one_percent_user(kth, 20)
    print("PEREGRINE (the paper's second trace) is not public: KTH-SP2 and Eagle stand in.")
    print(f"KTH-SP2 high-priority user class: user {user}")
    for nodes, preempt in ((20, 10), (200, 100)):
        scenarios = [
            (
                Scenario("HTC x10", WorkloadSpec(htc, nodes, high_fraction=0.01), nodes, preempt),
                False,
            ),
            (
                Scenario(
                    f"KTH-SP2, user {user} high",
                    WorkloadSpec(kth, nodes, priority_rules=(f"user={user}:10",)),
                    nodes,
                    preempt,
                ),
                True,
            ),
            (
                Scenario(
                    "KTH-SP2, random 1% high",
                    WorkloadSpec(kth, nodes, high_fraction=0.01),
                    nodes,
                    preempt,
                ),
                True,
            ),
            (
                Scenario(
                    "NREL Eagle sample",
                    WorkloadSpec(eagle, nodes, priority_rules=EAGLE_RULE),
                    nodes,
                    preempt,
                ),
                True,
            ),
        ]
        for scenario, multi_node in scenarios:
            report(scenario, multi_node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
