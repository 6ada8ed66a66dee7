"""One size, live: slurmctld, munged and the manager up, a job stream replayed, the figures
read off Slurm and the hook's log, everything stopped again.

What is real: Debian's slurmctld 22.05.8 and munged, sbatch/squeue/sinfo/scontrol, the manager
(``python -m elastic.manager``, HTTPS, JSON file store or etcd), ptc's Slurm client as ResumeProgram
and SuspendProgram, the policy. What is emulated: a node's machine is one slurmd process on
loopback (its own port), started by the client's provisioner at power on; the job stream is
the trace's first jobs, sizes scaled to the pool and times compressed (below).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.scale.cluster import (
    PARTITION,
    Layout,
    node_names,
    start,
    start_ctld,
    start_munge,
    wait_for,
    write_files,
)
from benchmarks.scale.dbd import DbdRun
from benchmarks.scale.etcd import EtcdRun
from elastic.errors import PtcError
from elastic.sim.traces.model import Trace

MANAGER_PORT = 19900


@dataclass(frozen=True)
class Submission:
    at: float  # seconds after the stream starts
    nodes: int
    runtime: float
    name: str


def job_stream(trace: Trace, size: int, window: float, *, fill: float = 3.0,
               min_run: float = 10.0, max_run: float = 30.0) -> list[Submission]:  # fmt: skip
    """The trace's first jobs on a pool of ``size`` nodes: the trace's machine (its largest
    job) scaled to ``size``, so a job of w of its P processors asks for ``round(w * size / P)``
    nodes (at least 1), taken in order until they ask for ``fill`` of the pool between them;
    arrivals keep the trace's spacing squeezed into ``window`` seconds, runtimes its order
    squeezed into ``min_run``..``max_run`` seconds (the jobs only sleep)."""
    procs = float(np.nanmax(trace.nodes[trace.nodes > 0]))
    want = max(1, int(size * fill))
    picked: list[int] = []
    asked = 0
    for i in range(len(trace)):
        if trace.nodes[i] <= 0:
            continue
        nodes = max(1, round(float(trace.nodes[i]) * size / procs))
        if asked + nodes > want:
            nodes = want - asked
        picked.append(i)
        asked += nodes
        if asked >= want:
            break
    submit = trace.submit[picked] - trace.submit[picked[0]]
    span = float(submit[-1]) or 1.0
    runtime = np.nan_to_num(trace.runtime[picked], nan=0.0)
    top = float(runtime.max()) or 1.0
    out, asked = [], 0
    for k, i in enumerate(picked):
        nodes = min(max(1, round(float(trace.nodes[i]) * size / procs)), want - asked)
        asked += nodes
        run = min_run + (max_run - min_run) * float(runtime[k]) / top
        out.append(
            Submission(window * float(submit[k]) / span, nodes, run, f"j{int(trace.job_id[i])}")
        )
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid: int) -> dict[str, float]:
    """VmHWM (peak RSS) and Pss in MiB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            out["Pss"] = int(line.split()[1]) / 1024
    return out


def node_memory(wrapper: int, layout: Layout, node: str) -> dict[str, float]:
    """One emulated node: its slurmd and the process holding its time namespace."""
    try:
        slurmd = int((layout.run / "slurmd" / f"{node}.pid").read_text().strip())
        both = [memory(wrapper), memory(slurmd)]
    except (OSError, ValueError):
        return {}
    return {k: sum(m.get(k, 0.0) for m in both) for k in ("Pss", "VmRSS")}


def tls_files(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "manager.crt", directory / "manager.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def start_manager(
    layout: Layout, run_id: str, nodes: list[str], store: dict[str, Any] | None = None
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """The real manager service with the pool of ``nodes`` and the partition, its state in a
    JSON file or, with ``store`` (the configuration's ``store:`` mapping), in etcd; (process,
    setup) where setup names its URL, CA and the partition's token file."""
    d = layout.run / "manager"
    d.mkdir(parents=True, exist_ok=True)
    cert, key = tls_files(d)
    config = {
        "listen": "127.0.0.1",
        "port": MANAGER_PORT,
        "state": str(d / "state.json"),
        "tokens": str(d / "tokens"),
        "tick_interval": 1,
        "protect_after": 0,
        "pool": [{"name": n, "cpus": layout.cpus, "memory_mb": 1000} for n in nodes],
        "partitions": [{"name": PARTITION}],
        "tls": {"cert": str(cert), "key": str(key)},
    }
    if store is not None:
        config["store"] = store
    (d / "config.yaml").write_text(json.dumps(config))
    proc = start([sys.executable, "-m", "elastic.manager", "--config",
                  str(d / "config.yaml")], layout, run_id, "manager", d / "manager.log")  # fmt: skip
    url = f"https://127.0.0.1:{MANAGER_PORT}"
    token = d / "tokens" / f"partition-{PARTITION}.token"

    def up() -> bool:
        if proc.poll() is not None:
            raise PtcError(f"the manager exited {proc.returncode}; see {d}/manager.log")
        return token.exists() and health(url, cert)

    wait_for(up, 900, "the manager")
    return proc, {"manager": url, "ca": str(cert), "token": str(token),
                  "admin_token": str(d / "tokens" / "admin.token")}  # fmt: skip


def health(url: str, ca: Path) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/v1/health", verify=str(ca), timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def squeue_states(env: dict[str, str]) -> dict[str, tuple[str, str]]:
    out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%T|%N"], env=env,
                         capture_output=True, text=True, check=False, timeout=60).stdout  # fmt: skip
    found = {}
    for line in out.splitlines():
        job, _, rest = line.partition("|")
        state, _, nodes = rest.partition("|")
        found[job.strip()] = (state, nodes)
    return found


def node_states(env: dict[str, str]) -> dict[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%T"], env=env, capture_output=True,
                         text=True, check=False, timeout=60).stdout  # fmt: skip
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summary(values: list[float]) -> dict[str, float | None]:
    return {"n": len(values), "min": min(values) if values else None,
            "p50": pct(values, 50), "p95": pct(values, 95),
            "max": max(values) if values else None}  # fmt: skip


def run_size(size: int, layout: Layout, run_id: str, trace: Trace, *, window: float,
             timeout: float, say: Any, etcd: EtcdRun | None = None,
             dbd: DbdRun | None = None) -> dict[str, Any]:  # fmt: skip
    names = node_names(size)
    write_files(layout, run_id)
    say(f"[{size}] munged, slurmctld" + (", slurmdbd and MariaDB" if dbd else ""))
    start_munge(layout, run_id)
    accounting = dbd.start(layout, run_id) if dbd is not None else None
    ctld = start_ctld(layout, run_id)
    member = None
    if etcd is not None:
        say(f"[{size}] etcd (the manager's store)")
        member = etcd.start(layout, run_id)
    t0 = time.monotonic()
    say(f"[{size}] manager with a pool of {size}")
    manager, setup = start_manager(layout, run_id, names,
                                   member.store_settings() if member else None)  # fmt: skip
    manager_start = time.monotonic() - t0
    (layout.run / "setup.json").write_text(json.dumps({
        **setup, "root": str(layout.root), "nodes": size, "base_port": layout.base_port,
        "policy": "LIFO"}))  # fmt: skip
    env = layout.env(run_id)
    stream = job_stream(trace, size, window)
    say(f"[{size}] {len(stream)} jobs asking for {sum(s.nodes for s in stream)} nodes "
        f"over {window:.0f} s")  # fmt: skip
    watched = {"slurmctld": ctld.pid, "manager": manager.pid}
    if member is not None:
        watched["etcd"] = member.proc.pid
    if accounting is not None:
        watched["slurmdbd"] = accounting.slurmdbd.pid
        watched["mariadbd"] = accounting.mariadbd.pid
    cpu0 = {what: cpu_seconds(pid) for what, pid in watched.items()}
    submitted: dict[str, float] = {}
    errors: list[str] = []
    begin = time.time()

    def submit_all() -> None:
        for s in stream:
            delay = begin + s.at - time.time()
            if delay > 0:
                time.sleep(delay)
            at = time.time()
            done = subprocess.run(
                ["sbatch", "--parsable", "-N", str(s.nodes), "--exclusive", "-J", s.name,
                 "-o", "/dev/null", "--chdir=/tmp", f"--wrap=sleep {s.runtime:.0f}"],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode:
                errors.append(done.stderr.strip()[:200])
            else:
                submitted[done.stdout.strip().split(";")[0]] = at

    feeder = threading.Thread(target=submit_all, daemon=True)
    feeder.start()
    started: dict[str, float] = {}
    registered: dict[str, float] = {}
    job_nodes: dict[str, str] = {}
    deadline = time.time() + timeout
    while time.time() < deadline:
        now = time.time()
        for job, (state, nodes) in squeue_states(env).items():
            if state in ("RUNNING", "COMPLETING", "COMPLETED") and job not in started:
                started[job] = now
            if nodes and job not in job_nodes and state != "PENDING":
                job_nodes[job] = nodes
        for node, state in node_states(env).items():
            up = not any(m in state for m in "~#%*") and not state.startswith(("down", "unk"))
            if up and node not in registered:
                registered[node] = now
        if not feeder.is_alive() and submitted and all(j in started for j in submitted):
            break
        time.sleep(0.5)
    feeder.join(timeout=1)
    cpu = {what: cpu_seconds(pid) - cpu0[what] for what, pid in watched.items()}
    mem = {what: memory(pid) for what, pid in watched.items()}
    slurmd = [e for e in layout.ledger.entries() if str(e.get("what", "")).startswith("slurmd ")]
    per_node = [node_memory(int(e["pid"]), layout, e["what"].split()[1]) for e in slurmd]
    per_node = [m for m in per_node if m]
    events = (
        [json.loads(x) for x in layout.events.read_text().splitlines()]
        if layout.events.exists()
        else []
    )
    called: dict[str, float] = {}
    expand = subprocess.run  # hostlists of the hook's log, expanded by Slurm
    for e in events:
        if e["event"] == "resume-called":
            out = expand(["scontrol", "show", "hostnames", e["hostlist"]], env=env,
                         capture_output=True, text=True, check=False).stdout.split()  # fmt: skip
            for node in out:
                called.setdefault(node, e["time"])
    to_resume, to_start = [], []
    for job, at in submitted.items():
        if job in started:
            to_start.append(started[job] - at)
        held = job_nodes.get(job)
        if held:
            hosts = expand(["scontrol", "show", "hostnames", held], env=env,
                           capture_output=True, text=True, check=False).stdout.split()  # fmt: skip
            # only resumes this job caused: a job on nodes already up (or resumed for an
            # earlier job) waited for no ResumeProgram
            times = [called[h] for h in hosts if h in called and called[h] >= at]
            if times:
                to_resume.append(min(times) - at)
    to_register = [registered[n] - called[n] for n in called if n in registered]
    timings = [e.get("timings", {}) for e in events if e["event"] == "resume-done"]
    accounted = None
    if accounting is not None:
        # the jobs slurmdbd recorded: that accounting was on, not only configured
        listed = subprocess.run(["sacct", "-n", "-X", "-a", "-P", "-o", "JobID", "-S", "now-1hours"],
                                env=env, capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
        accounted = len([j for j in listed.stdout.split() if j.strip() in submitted])
    return {
        "size": size,
        "store": "file" if member is None else "etcd",
        "accounting": "none" if accounting is None else "slurmdbd",
        "jobs_in_accounting": accounted,
        "jobs": len(stream),
        "submitted": len(submitted),
        "started": len([j for j in submitted if j in started]),
        "nodes_resumed": len(called),
        "nodes_registered": len(registered),
        "resume_calls": sum(1 for e in events if e["event"] == "resume-called"),
        "sbatch_errors": errors[:3],
        "manager_start_s": manager_start,
        "submit_to_resume_s": summary(to_resume),
        "resume_to_register_s": summary(to_register),
        "submit_to_start_s": summary(to_start),
        "hook_total_s": summary([float(t.get("total", 0)) for t in timings]),
        "cpu_s": cpu,
        "memory_mib": mem,
        "slurmd_mib": {
            "n": len(per_node),
            "pss_mean": float(np.mean([m["Pss"] for m in per_node])) if per_node else None,
            "rss_mean": float(np.mean([m["VmRSS"] for m in per_node])) if per_node else None,
        },
    }
