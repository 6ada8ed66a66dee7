"""The repair loop, measured on a live elastic experiment: from a fault to the node back in service,
per kind of fault. Prints, asserts nothing.

Each kind is injected on one pool node, one at a time, and timed from the injection:

- ``munge``: munge stopped on a node running a job (slurmd stops answering: Slurm's ``*``);
- ``shm``: ``/dev/shm`` filled on a node running a job, to below what the health check wants
  (only when the deploy's ``slurm_health_check_free_mb`` watches ``/dev/shm``; the job is then
  cancelled so the drained node is free to mend);
- ``masked``: slurmd masked on a node at rest; a job then resumes it and the playbook fails;
- ``no-init``: the node's init renamed on its disk while its machine is off (local testbed), so a
  resume fails at power on.

For each: *noticed* (Slurm shows the node broken: not responding, drained by the health check or
DOWN with ptc's reason), *claimed* (the loop's ``repair-started``), *back* (``node-repaired`` and
the node in service again), in seconds from the injection, and the repair's own steps.

    PTC_HOME=... .venv/bin/python benchmarks/repair_times.py NAME [--kinds munge,shm,masked,no-init]
        [--node node-1] [--reps 1] [--out benchmarks/results/repair_times]

NAME is an elastic experiment deployed as tests/integration/test_elastic.py deploys it (its
short intervals: a repair round every 20 s, SuspendTime 20 s, the health check every 30 s), with
every pool node free and powered down. With ``--out`` it writes results.json and repair_times.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastic.atomic import write_text
from elastic.bench.plot import save_png
from elastic.manager.workstation import open_manager
from elastic.remote import ssh
from elastic.testbed import experiment as experiments
from elastic.testbed import nodeops

KINDS = ("munge", "shm", "masked", "no-init")
PHASES = ("noticed", "claimed", "back")


class Exp:
    def __init__(self, name: str) -> None:
        exp = experiments.load(name)
        self.name = name
        self.inventory = exp.inventory_path
        self.ssh_config = exp.ssh_config_path

    def sh(self, node: str, command: str) -> str:
        return ssh.run(self.ssh_config, node, command, timeout=600)

    def events(self, kind: str) -> list[dict[str, Any]]:
        with open_manager(self.inventory, self.ssh_config) as m:
            return [e for e in m.events(0, 10_000) if e["kind"] == kind]

    def node(self, node: str) -> tuple[str, str]:
        line = self.sh("head", f"sinfo --noheader --Node --nodes={node} --format='%T|%E'")
        state, _, reason = line.strip().partition("|")
        return state, "" if reason == "none" else reason

    def job_state(self, job_id: str) -> str:
        return self.sh("head", f"squeue --noheader -j {job_id} -o %T 2>/dev/null || true").strip()

    def sbatch(self, options: str, script: str) -> str:
        out = self.sh("head", f"su - ptc -c \"sbatch --parsable {options} --wrap '{script}'\"")
        return out.strip().split(";")[0]


def wait(what: str, check: Callable[[], Any], timeout: float, poll: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(poll)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def broken(state: str, reason: str) -> bool:
    return (
        "*" in state
        or reason.startswith(("ptc-health:", "ptc resume:", "ptc repair"))
        or state.startswith("down")
    )


def in_service(state: str) -> bool:
    return not state.startswith(("down", "drain")) and "*" not in state


def inject(exp: Exp, kind: str, node: str) -> tuple[float, list[str]]:
    """Break ``node`` the ``kind`` way; the injection's time and the jobs to cancel after."""
    jobs: list[str] = []
    if kind in ("munge", "shm"):
        jobs.append(exp.sbatch(f"-N1 -w {node}", "sleep 900"))
        wait("the holding job running", lambda: exp.job_state(jobs[0]) == "RUNNING", 240)
        if kind == "munge":
            exp.sh(node, "systemctl stop munge")
        else:
            free = exp.sh(node, ". /etc/slurm/ptc-healthcheck.conf; echo \"${FREE_PATHS[@]}|"
                                "${FREE_MB[@]}\"").strip()  # fmt: skip
            paths, _, wanted = free.partition("|")
            want = dict(zip(paths.split(), map(int, wanted.split()), strict=True))
            if "/dev/shm" not in want:
                raise SystemExit("shm: the health check does not watch /dev/shm on this deploy")
            exp.sh(
                node,
                "fallocate -l $(( $(df -P -k /dev/shm | awk 'NR==2{print $4}') - "
                f"{max(want['/dev/shm'] - 4, 1)} * 1024 ))K /dev/shm/ptc-bench-fill",
            )
        return time.time(), jobs
    exp_ = experiments.load(exp.name)
    if kind == "masked":
        with nodeops.awake(exp_, "repair benchmark"):
            exp.sh(node, "systemctl mask slurmd")
    else:  # no-init: the disk's init renamed while the machine is off
        container = f"ptc-{exp.name}-{node}"
        root = subprocess.run(["podman", "mount", container], capture_output=True, text=True,
                              check=True, timeout=120).stdout.strip()  # fmt: skip
        init = Path(root) / "sbin" / "init"
        init.rename(init.with_name("init.ptc-bench"))
        subprocess.run(["podman", "umount", container], check=False, timeout=120)
    at = time.time()
    jobs.append(exp.sbatch(f"-N1 -w {node}", "true"))
    return at, jobs


def one(exp: Exp, kind: str, node: str) -> dict[str, Any]:
    seen = len(exp.events("node-repaired"))
    at, jobs = inject(exp, kind, node)
    print(f"  {kind}: injected on {node}", flush=True)
    times: dict[str, float] = {}
    wait(f"{node} noticed broken", lambda: broken(*exp.node(node)), 600)
    times["noticed"] = time.time() - at
    if kind == "shm":  # the drained node is mended once its job is gone
        exp.sh("head", f"scancel {' '.join(jobs)}")
    started = wait(
        f"{node}'s repair claimed",
        lambda: [
            e for e in exp.events("repair-started") if e["data"]["node"] == node and e["time"] >= at
        ],
        900,
    )
    times["claimed"] = started[0]["time"] - at
    done = wait(
        f"{node} mended",
        lambda: [e for e in exp.events("node-repaired")[seen:] if e["data"]["node"] == node],
        900,
    )[0]
    wait(f"{node} in service", lambda: in_service(exp.node(node)[0]), 300)
    times["back"] = time.time() - at  # mended, and seen in service
    exp.sh("head", f"scancel {' '.join(jobs)}")
    return {
        "kind": kind,
        "node": node,
        "cause": done["data"]["cause"],
        "seconds": times,
        "repair_steps": done["data"]["timings"],
    }


def pool_idle(exp: Exp) -> bool:
    out = exp.sh("head", "sinfo --noheader --Node --format=%T")
    return all(s.strip() == "idle~" for s in out.split())


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    starts = {k: 0.0 for k in kinds}
    for phase, colour in zip(PHASES, ("#bbbbbb", "#6699cc", "#336633"), strict=True):
        spans = []
        for k in kinds:
            mean = statistics.mean(r["seconds"][phase] for r in rows if r["kind"] == k)
            spans.append(mean - starts[k])
            starts[k] = mean
        left = [starts[k] - s for k, s in zip(kinds, spans, strict=True)]
        ax.barh(kinds, spans, left=left, color=colour, label=f"to {phase}")
    ax.set_xlabel("seconds from the fault")
    ax.set_title("From a fault to the node back in service (repair loop)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--node", default="node-1")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    if unknown := [k for k in kinds if k not in KINDS]:
        parser.error(f"--kinds: {', '.join(unknown)}: choose from {', '.join(KINDS)}")
    exp = Exp(args.name)
    rows = []
    for rep in range(args.reps):
        for kind in kinds:
            print(f"rep {rep + 1}/{args.reps}, {kind}: waiting for the pool at rest", flush=True)
            wait("the pool at rest", lambda: pool_idle(exp), 600, 5)
            row = one(exp, kind, args.node)
            rows.append(row)
            s = row["seconds"]
            print(f"  noticed {s['noticed']:.0f} s, claimed {s['claimed']:.0f} s, back "
                  f"{s['back']:.0f} s; repair {json.dumps(row['repair_steps'])}", flush=True)  # fmt: skip
    print("\nkind      noticed  claimed  back   (mean seconds from the fault)")
    for kind in kinds:
        mine = [r["seconds"] for r in rows if r["kind"] == kind]
        means = [statistics.mean(m[p] for m in mine) for p in PHASES]
        print(f"{kind:9} {means[0]:7.0f}  {means[1]:7.0f}  {means[2]:5.0f}   (n={len(mine)})")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text(args.out / "results.json", json.dumps(rows, indent=1) + "\n")
        plot(rows, args.out / "repair_times.png")
        print(f"wrote {args.out}/results.json and repair_times.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
