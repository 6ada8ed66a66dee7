"""A pool node lent to another experiment: from the reclaim request to the other user's first
command on it, and back into the pool.

    python benchmarks/lend_latency.py EXPERIMENT OTHER [--grace 20] [--runs 1]

EXPERIMENT is a deployed elastic cluster (ptc_elastic=true) with its pool at rest; OTHER is a
second experiment (deployed or not). Each run lends one node through the same code as
`ptc elastic acquire EXPERIMENT --into OTHER` and times each step: the manager handing the
node to the reference partition, the testbed releasing it from EXPERIMENT, allocating its
replacement in OTHER, and the first command on it from the host over SSH. Then it gives the
node back as `ptc elastic release` does, timing the release from OTHER, the allocation in
EXPERIMENT, the deploy with the head and the manager's release. With the pool at rest the
manager's step has no grace period to wait for (with busy nodes it lasts the GP). Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elastic.lending import live, loan  # noqa: E402
from elastic.remote import ssh  # noqa: E402
from elastic.testbed import experiment as experiments  # noqa: E402
from elastic.testbed.loans import LoanBook  # noqa: E402

T = TypeVar("T")


class Clock:
    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []

    def time(self, step: str, call: Callable[[], T]) -> T:
        started = time.monotonic()
        result = call()
        self.steps.append((step, time.monotonic() - started))
        return result


class TimedPool(live.ManagerPool):
    def __init__(self, exp: experiments.Experiment, clock: Clock) -> None:
        super().__init__(exp)
        self.clock = clock

    def acquire(self, count: int, grace: float | None, wait: float) -> list[str]:
        return self.clock.time(
            "manager: acquire", lambda: super(TimedPool, self).acquire(count, grace, wait)
        )

    def give_back(self, node: str) -> None:
        self.clock.time("manager: release", lambda: super(TimedPool, self).give_back(node))


class TimedTestbed(live.LiveTestbed):
    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def release(self, exp: str, node: str) -> None:
        self.clock.time(
            f"testbed: release from {exp}", lambda: super(TimedTestbed, self).release(exp, node)
        )

    def allocate(self, exp: str, node: str, like: str | None) -> None:
        self.clock.time(
            f"testbed: allocate in {exp}",
            lambda: super(TimedTestbed, self).allocate(exp, node, like),
        )

    def configure(self, exp: str, node: str) -> None:
        self.clock.time(
            "deploy head and node", lambda: super(TimedTestbed, self).configure(exp, node)
        )


def one_run(
    name: str, other: str, grace: float
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    exp = experiments.load(name)
    book = LoanBook(exp.loans_path)
    out, back = Clock(), Clock()
    started = time.monotonic()
    [lent] = loan.lend(
        TimedPool(exp, out), TimedTestbed(out), book, name, other, 1, grace=grace, wait=grace + 180
    )
    config = experiments.load(other).ssh_config_path

    def first_command() -> Any:
        done = ssh.execute(config, lent.name, "true", timeout=60)
        if done.returncode != 0:
            raise SystemExit(f"{other}/{lent.name}: `true` failed: {done.error_text}")
        return done

    out.time(f"first command on {other}/{lent.name}", first_command)
    out.steps.append(("reclaim request to first command", time.monotonic() - started))
    started = time.monotonic()
    loan.give_back(TimedPool(exp, back), TimedTestbed(back), book, name, lent.node, None)
    back.steps.append(("give-back in all", time.monotonic() - started))
    return out.steps, back.steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("other")
    parser.add_argument("--grace", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    console = Console()
    for run in range(1, args.runs + 1):
        out, back = one_run(args.experiment, args.other, args.grace)
        table = Table("step", "seconds", title=f"run {run}: lend, then give back")
        for step, seconds in [*out, *back]:
            table.add_row(step, f"{seconds:.1f}")
        console.print(table)


if __name__ == "__main__":
    main()
