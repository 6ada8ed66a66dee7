"""Speed of `ptc sim`: the full policy x GP sweep on the HTC and KTH-SP2 workloads.

Prints wall times, snapshots/s, peak memory, schedule-only jobs/s on the whole KTH-SP2 log and
a linearity check. It reports figures; it asserts nothing about them.

    .venv/bin/python benchmarks/sim_sweep.py
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from elastic.sim.results import write_samples
from elastic.sim.schedule import simulate
from elastic.sim.sweep import SweepConfig, SweepResult, run_sweep
from elastic.sim.traces import Trace, first_jobs, load_trace, public
from elastic.sim.workload import WorkloadSpec, prepare

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "data" / "traces"
N, P, T = 20, 10, 30.0


def sweep(trace: Trace) -> tuple[float, float, SweepResult]:
    began = time.perf_counter()
    schedule = simulate(np.zeros(len(trace)), trace.runtime, trace.requested, trace.nodes, N)
    scheduled = time.perf_counter()
    result = run_sweep(schedule, trace.priority, SweepConfig(preempt=P, interval=T))
    return scheduled - began, time.perf_counter() - began, result


def schedule_only(trace: Trace, mode: str) -> float:
    """Best of three, since one run of well under a second is at the mercy of the machine."""
    # A log's missing request (-1) means "unknown": the runtime stands in, so EASY still works.
    requested = np.where(np.isnan(trace.requested), trace.runtime, trace.requested)
    submit = np.zeros(len(trace)) if mode == "batch" else trace.submit
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        simulate(submit, trace.runtime, requested, trace.nodes, 100)
        best = min(best, time.perf_counter() - began)
    return best


def traced_peak_mib(trace: Trace) -> float:
    tracemalloc.start()
    sweep(trace)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def report(label: str, trace: Trace) -> None:
    sched_s, total_s, result = sweep(trace)
    combos = len(result.policies) * len(result.grace_periods)
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        write_samples(result, Path(tmp) / "samples.parquet")
        parquet_s = time.perf_counter() - began
    print(
        f"{label}: {len(trace):,} jobs, {result.samples:,} snapshots x {combos} policy-GP = "
        f"{result.samples * combos:,} samples\n"
        f"  sweep wall time {total_s:.2f} s (schedule {sched_s:.2f} s), "
        f"{result.samples / total_s:,.0f} snapshots/s, "
        f"{result.samples * combos / total_s:,.0f} samples/s; Parquet write {parquet_s:.2f} s\n"
        f"  peak traced memory {traced_peak_mib(trace):,.0f} MiB"
    )


def main() -> int:
    htc, _ = prepare(WorkloadSpec(public.locate("htc-condor", TRACES), max_nodes=N, seed=0))
    kth, _ = prepare(WorkloadSpec(public.locate("kth-sp2", TRACES), max_nodes=N))
    print(f"full sweep: 5 policies x 10 GPs, N={N}, P={P}, T={T:g} s, batch arrival\n")
    report("HTC x10", htc)
    report("KTH-SP2 <=20 nodes, first 7,000 jobs", first_jobs(kth, 7000))
    report("KTH-SP2 <=20 nodes, all", kth)

    full = load_trace(public.locate("kth-sp2", TRACES))
    print(f"\nschedule only, whole KTH-SP2 log ({len(full):,} jobs, N=100, the SP2's size):")
    for mode in ("batch", "submit"):
        base_s = 0.0
        for share in (4, 2, 1):
            part = first_jobs(full, len(full) // share)
            elapsed = schedule_only(part, mode)
            base_s = base_s or elapsed
            print(
                f"  {mode:6s} arrival, 1/{share}: {len(part):6,} jobs in {elapsed:5.2f} s "
                f"(x{elapsed / base_s:.2f}), {len(part) / elapsed:,.0f} jobs/s"
            )

    print("\nlinearity (KTH-SP2 <=20 nodes, batch arrival):")
    base: tuple[float, float, int] | None = None
    for share in (4, 2, 1):
        part = first_jobs(kth, len(kth) // share)
        sched_s, total_s, result = sweep(part)
        base = base or (sched_s, total_s, result.samples)
        print(
            f"  1/{share}: {len(part):6,} jobs, {result.samples:9,} snapshots: "
            f"schedule {sched_s:5.2f} s (x{sched_s / base[0]:.2f}), "
            f"sweep {total_s:5.2f} s (x{total_s / base[1]:.2f}), "
            f"snapshots x{result.samples / base[2]:.2f}"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess peak RSS {peak:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
