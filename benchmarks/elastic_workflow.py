"""A Montage-like workflow run elastically (E-HPC's plan-driven elasticity) against the same
workflow in a static allocation of its widest stage, on a live elastic experiment. Prints,
asserts nothing.

The workflow is Montage's stage sequence with ``sleep`` tasks: wide stages (mProjectPP,
mDiffFit, mBackground) on every pool node, narrow ones (mConcatFit, mBgModel, mImgtbl, mAdd)
on one. Durations are seconds times ``--scale``.

- Elastic: a 1-node job; ``ptc-elastic plan`` on the head resizes it before each stage and runs
  the stage as one step. Node-seconds come from Slurm's accounting: every record sacct keeps of
  the job (one per size it had) and of the helper allocations its expansions made (which hold
  the new nodes while they boot), each its node count times its elapsed time.
- Static: a job of the widest stage's width running the same steps, ``srun -N<width>`` each.

    PTC_HOME=... .venv/bin/python benchmarks/elastic_workflow.py NAME \\
        [--scale 1.0] [--out benchmarks/results/elastic_workflow]

NAME is a 1+4 experiment deployed with ``-e ptc_elastic=true -e slurm_job_expansion=true``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from elastic.atomic import write_text
from elastic.remote import ssh
from elastic.testbed import experiment as experiments

# Montage's stages, in order: (name, wide?, seconds)
STAGES = (
    ("mProjectPP", True, 40),
    ("mDiffFit", True, 30),
    ("mConcatFit", False, 10),
    ("mBgModel", False, 15),
    ("mBackground", True, 30),
    ("mImgtbl", False, 5),
    ("mAdd", False, 20),
)
WORK = "/home/ptc/elastic-workflow"


def sh(exp: Any, command: str, user: bool = True) -> str:
    if user:
        command = f"cd /home/ptc && runuser -u ptc -- sh -c {shlex.quote(command)}"
    return ssh.run(exp.ssh_config_path, "head", command, timeout=3600)


def wait(what: str, check: Any, timeout: float, poll: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(poll)
    raise SystemExit(f"timed out waiting for {what}")


def job_state(exp: Any, job_id: str) -> str:
    out = sh(exp, f"squeue -h -j {job_id} -o %T 2>/dev/null || true")
    return out.strip()


def node_seconds(exp: Any, selector: str) -> tuple[int, list[dict[str, Any]]]:
    """Sum of NNodes x ElapsedRaw over sacct's records for ``selector`` (``-j J`` or
    ``--name N``), and the records."""
    out = sh(exp, f"sacct -X -n -P {selector} --format=JobID,JobName,State,NNodes,ElapsedRaw")
    rows = []
    for line in out.splitlines():
        jid, name, state, nnodes, elapsed = line.split("|")
        rows.append({"job": jid, "name": name, "state": state, "nodes": int(nnodes),
                     "elapsed_s": int(elapsed)})  # fmt: skip
    return sum(r["nodes"] * r["elapsed_s"] for r in rows), rows


def queue_wait_s(exp: Any, job_id: str) -> int:
    """Submit to start of the job's first record (Slurm sets the start once its nodes are up,
    so a resume of powered-down nodes counts as waiting)."""
    out = sh(exp, f"sacct -X -n -P -j {job_id} --format=Submit,Start")
    submit, start = out.splitlines()[0].split("|")
    fmt = "%Y-%m-%dT%H:%M:%S"
    return int(time.mktime(time.strptime(start, fmt)) - time.mktime(time.strptime(submit, fmt)))


def plan_text(width: int, scale: float) -> str:
    lines = ["workflow:", "  command: sleep 1"]
    for name, wide, seconds in STAGES:
        lines += [f"{name}:", f"  nodes: {width if wide else 1}",
                  f"  command: sleep {seconds * scale:g}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def run_elastic(exp: Any, width: int, scale: float, stamp: str) -> dict[str, Any]:
    plan = f"{WORK}/{stamp}.plan.yml"
    sh(exp, f"mkdir -p {WORK} && cat > {plan} <<'EOF'\n{plan_text(width, scale)}EOF")
    mark = f"{WORK}/{stamp}.done"
    job_id = sh(exp, f"sbatch --parsable -N1 -t 60 -J wf-elastic "
                     f"--wrap 'while [ ! -e {mark} ]; do sleep 1; done'").strip()  # fmt: skip
    wait("the elastic job to run", lambda: job_state(exp, job_id) == "RUNNING", 600)
    print(f"elastic: job {job_id} running on 1 node; plan of {len(STAGES)} stages", flush=True)
    started = time.monotonic()
    out = sh(exp, f"ptc-elastic plan --job {job_id} --plan {plan}")
    wall = time.monotonic() - started
    stages = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for s in stages:
        print(f"  {s['stage']:<12} {s['nodes']} node(s): resize {s['resize_s']:6.1f} s, "
              f"step {s['step_s']:6.1f} s", flush=True)  # fmt: skip
    sh(exp, f"touch {mark}")
    wait("the elastic job to end", lambda: job_state(exp, job_id) == "", 300)
    time.sleep(2)
    own, records = node_seconds(exp, f"-j {job_id}")
    helpers, helper_records = node_seconds(exp, f"--name=ptc-expand-{job_id}")
    return {"job": job_id, "plan_wall_s": wall, "queue_s": queue_wait_s(exp, job_id), "stages": stages, "node_s": own + helpers,
            "job_node_s": own, "helper_node_s": helpers, "records": records,
            "helper_records": helper_records}  # fmt: skip


def run_static(exp: Any, width: int, scale: float) -> dict[str, Any]:
    steps = " && ".join(
        f"srun -N{width if wide else 1} --ntasks-per-node=1 sleep {seconds * scale:g}"
        for _, wide, seconds in STAGES
    )
    job_id = sh(exp, f"sbatch --parsable -N{width} -t 60 -J wf-static "
                     f"--wrap {shlex.quote(steps)}").strip()  # fmt: skip
    print(f"static: job {job_id} on {width} nodes", flush=True)
    wait("the static job to end", lambda: job_state(exp, job_id) == "", 1800, 5)
    time.sleep(2)
    total, records = node_seconds(exp, f"-j {job_id}")
    return {"job": job_id, "node_s": total, "records": records,
            "queue_s": queue_wait_s(exp, job_id)}  # fmt: skip


def equations(width: int, elastic: dict[str, Any], static: dict[str, Any]) -> dict[str, float]:
    """E-HPC's Eq. 3 (core-hours: sum CR_i n_i < sum (n - n_i) t_i) and Eq. 7 (turnaround:
    sum q_i < q) from the measured values. A stage's CR_i is the resize before it (ptc's jobs
    keep running through a resize: no checkpoint, no restart); its q_i is that resize when it
    grew the job (waiting for nodes), and the first stage's also the job's own queue wait."""
    stages = elastic["stages"]
    grows = [s["resize_s"] for i, s in enumerate(stages)
             if i == 0 or s["nodes"] > stages[i - 1]["nodes"]]  # fmt: skip
    return {
        "eq3_overhead_node_s": sum(s["resize_s"] * s["nodes"] for s in stages),
        "eq3_gain_node_s": sum((width - s["nodes"]) * s["step_s"] for s in stages),
        "eq7_sum_qi_s": elastic["queue_s"] + sum(grows),
        "eq7_q_s": static["queue_s"],
    }


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    e, s = result["elastic"], result["static"]
    ax.bar(["elastic"], [e["job_node_s"]], color="tab:blue", label="the job")
    ax.bar(["elastic"], [e["helper_node_s"]], bottom=[e["job_node_s"]], color="tab:cyan",
           label="its expansions' helper allocations")  # fmt: skip
    ax.bar(["static"], [s["node_s"]], color="tab:gray", label="static, widest stage")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_ylabel("node-seconds (sacct)")
    ax.set_title(f"Montage-like workflow, {result['width']} nodes at its widest")
    fig.tight_layout()
    path = out / "node_seconds.png"
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--width", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    exp = experiments.load(args.name)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    elastic = run_elastic(exp, args.width, args.scale, stamp)
    static = run_static(exp, args.width, args.scale)
    saving = 1 - elastic["node_s"] / static["node_s"]
    eq = equations(args.width, elastic, static)
    result = {"width": args.width, "scale": args.scale, "elastic": elastic, "static": static,
              "saving": saving, "equations": eq}  # fmt: skip
    print(f"\nnode-seconds: elastic {elastic['node_s']} (job {elastic['job_node_s']}, "
          f"expansion helpers {elastic['helper_node_s']}) against static {static['node_s']}: "
          f"{saving:.0%} fewer (E-HPC: 76% fewer core-hours, Montage at 256 cores)")  # fmt: skip
    print(f"Eq. 3: sum CR_i n_i = {eq['eq3_overhead_node_s']:.0f} node-s against "
          f"sum (n - n_i) t_i = {eq['eq3_gain_node_s']:.0f} node-s; "
          f"Eq. 7: sum q_i = {eq['eq7_sum_qi_s']:.0f} s against q = {eq['eq7_q_s']:.0f} s")  # fmt: skip
    print("resizes before stages: " + ", ".join(
        f"{s['stage']} {s['resize_s']:.1f} s" for s in elastic["stages"]))  # fmt: skip
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text(args.out / "results.json", json.dumps(result, indent=2) + "\n")
        plot(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
