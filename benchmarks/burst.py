"""Bursting to a FAKE EC2 region through Slurm's power-save hooks, measured on a live local
experiment. Prints, asserts nothing:

1. Submit to start on EC2 nodes: ``sbatch -N2 -C SITE`` of a job whose two ec2 nodes are
   powered down, split along the critical path (the last node ready): slurmctld to the
   ResumeProgram, the pool manager's AddNodes, the launch call (RunInstances, one per node, and
   the node's address set in Slurm), boot (pending to running: the region's boot delay, to
   the user data starting on the instance), join (the user data: munge key fetched from the controller, slurmd started), slurmd's
   registration with slurmctld, and Slurm starting the job after it (slurmctld ends a
   powered-up job's configuring in a periodic pass, the wait this part mostly is). Sources: the
   Slurm client's resume timings and journal on the head, the region's log on the host,
   slurmctld's journal, the instance's own journal (read with ``podman exec`` while the job
   runs: the instance has no SSH from the host) and the job's first line. A part the sources
   cannot separate is reported as such, merged with its neighbour.
2. Capacity error to a job running on another site: the local site is held busy, the region
   refuses every RunInstances (``ptc fake-ec2 fault capacity --until-cleared``) and an
   unconstrained job goes to the ec2 site first (growth policy ``cheapest``, ec2 cheaper than
   the other local site); from the resume's ``InsufficientInstanceCapacity`` (slurmctld's
   journal, as the node gets it as its reason) to the job running on the other site, from the
   first and from the last failure (a site whose pause ends is tried again), and the job's
   EligibleTime against them.
3. One Ch. 2 round across the local site and the ec2 site, both filled with jobs:
   ``ptc elastic rebalance --policy FO`` then ``AP-100`` with the sites file, each round's
   drained, requeued and terminated nodes, excess cost and discarded work as its report gives
   them; then how long until the region's instances were terminated.

    PTC_HOME=... .venv/bin/python benchmarks/burst.py NAME --sites SITES.yml [--reps 3] \\
        [--local here] [--ec2 cloud] [--other dear] [--skip-resume] [--skip-capacity] \\
        [--skip-rebalance] [--user ptc] [--policies FO,AP-100] [--out benchmarks/results/burst]

NAME is a local experiment with a fake region (``ptc fake-ec2 start NAME``) deployed with
``-e ptc_elastic=true`` and SITES.yml as ``elastic_sites_file``: a one-node local site
(``--local``), a two-node ec2 site on the region (``--ec2``, ``operation: terminate``) and a
dearer local site (``--other``); short power-save times (SuspendTime 30 s, SuspendTimeout
15 s), ``elastic_growth_policy=cheapest`` and short site pauses
(``elastic_site_pause_first=20``). The local site's node is kept busy by a job of the script
throughout, so the growth policy sends the other jobs to the ec2 site. Every pool node must
start free and powered down. It runs as root on the testbed's host (the instances' journals
are read through podman). With ``--out`` it writes results.json, results.md and burst.png.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from elastic_latency import wait_for  # the sibling benchmark's poll, not a copy of it

from elastic import node_paths
from elastic.atomic import write_text
from elastic.bench.plot import save_png
from elastic.remote import ssh
from elastic.slurm.hostlist import expand
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local import podman

# The job's first line goes to the batch host's own /tmp: an instance mounts no share.
MARK = "/tmp/burst-mark-"
CLIENT_UNIT = "ptc-elastic-slurm-client"
RESUME_PARTS = (
    "slurmctld to ResumeProgram",
    "manager (AddNodes)",
    "launch call (RunInstances)",
    "boot (pending to running)",
    "join (user data to slurmd start)",
    "slurmd registration",
    "job start after registration",
)
# What the region logs (the host's local time, Python logging's asctime).
REGION_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ (.*)$")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Exp:
    def __init__(self, name: str) -> None:
        exp = experiments.load(name)
        self.name = name
        self.ssh_config = exp.ssh_config_path
        self.region_dir = exp.dir / "fake-ec2"
        self.tz_offset = 0.0
        self.user = "ptc"
        self.ec2_nodes: set[str] = set()

    def sh(self, node: str, command: str, timeout: float = 600) -> str:
        """``command``'s output on ``node``, through the library's SSH seam."""
        return ssh.run(self.ssh_config, node, command, timeout=timeout)

    def now(self) -> float:
        return float(self.sh("head", "date +%s.%N"))

    def ptc(self, *args: str) -> str:
        """The CLI of this checkout, for what a user of the testbed would type."""
        proc = subprocess.run(
            [sys.executable, "-m", "elastic.cli", *args], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ptc {' '.join(args)}: {proc.stderr.strip()[-2000:]}")
        return proc.stdout

    def sbatch(self, options: str, script: str) -> str:
        # no output file and /tmp as the working directory: an instance has no shared /home
        command = (
            f"sbatch --parsable --chdir=/tmp -o /dev/null {options} --wrap {shlex.quote(script)}"
        )
        out = self.sh("head", f"cd /tmp && runuser -u {self.user} -- sh -c {shlex.quote(command)}")
        return out.strip().split(";")[0]

    def mark(self, job_id: str, tag: str) -> float | None:
        """The job's first line, ``date +%s.%N`` in the batch host's ``MARK + tag``."""
        host = self.job(job_id).get("BatchHost", "")
        if not host or host == "(null)":
            return None
        if host in self.ec2_nodes:
            proc = podman.run(
                "exec", podman.container_name(self.name, host), "cat", MARK + tag, check=False
            )
            text = proc.stdout if proc.returncode == 0 else ""
        else:
            text = self.sh(host, f"cat {MARK + tag} 2>/dev/null || true", timeout=60)
        try:
            return float(text.strip())
        except ValueError:
            return None

    def scancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self.sh("head", f"scancel {' '.join(job_ids)}")

    def states(self) -> dict[str, str]:
        out = self.sh("head", "sinfo --noheader --Node --format='%N|%T'")
        return dict(line.strip().split("|", 1) for line in out.splitlines() if line.strip())

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job``'s fields (empty once Slurm forgot the job)."""
        out = self.sh("head", f"scontrol -o show job {job_id} 2>/dev/null || true")
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def slurm_time(self, value: str) -> float | None:
        """Seconds since the epoch of a time scontrol prints (the head's local time)."""
        try:
            naive = datetime.fromisoformat(value)
        except ValueError:
            return None
        return naive.replace(tzinfo=UTC).timestamp() - self.tz_offset

    def journal(self, unit: str, since: float) -> list[tuple[float, str]]:
        """(time, message) of ``unit``'s journal on the head since ``since``."""
        out = self.sh(
            "head",
            f"journalctl -q --no-pager -o short-unix -u {unit} --since @{int(since) - 1}",
        )
        return _journal_lines(out)

    def instance_journal(self, node: str) -> list[tuple[float, str]]:
        """The instance's journal, read through its machine: it has no SSH from the host."""
        proc = podman.run(
            "exec",
            podman.container_name(self.name, node),
            "journalctl",
            "-q",
            "--no-pager",
            "-o",
            "short-unix",
            check=False,
        )
        return _journal_lines(proc.stdout) if proc.returncode == 0 else []

    def region_log(self, since: float) -> list[tuple[float, str]]:
        lines = []
        for raw in (self.region_dir / "service.log").read_text(errors="replace").splitlines():
            if m := REGION_LINE.match(raw):
                t = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                if t >= since:
                    lines.append((t, m[2]))
        return lines

    def region_machines(self) -> list[dict[str, Any]]:
        try:
            status = json.loads((self.region_dir / "status.json").read_text())
        except (OSError, ValueError):
            return []
        return list(status.get("machines", []))

    def reservations(self) -> str:
        return self.sh("head", "scontrol -o show reservation 2>/dev/null || true")


def _journal_lines(text: str) -> list[tuple[float, str]]:
    lines = []
    for raw in text.splitlines():
        stamp, _, rest = raw.partition(" ")
        try:
            lines.append((float(stamp), rest))
        except ValueError:
            continue
    return lines


def first(lines: list[tuple[float, str]], pattern: str, after: float = 0.0) -> float | None:
    found = [t for t, text in lines if t >= after and re.search(pattern, text)]
    return min(found) if found else None


def last(lines: list[tuple[float, str]], pattern: str, after: float = 0.0) -> float | None:
    found = [t for t, text in lines if t >= after and re.search(pattern, text)]
    return max(found) if found else None


def latest(values: list[float | None]) -> float | None:
    """The last of ``values``, or None when any is missing (or there are none)."""
    known = [v for v in values if v is not None]
    return max(known) if known and len(known) == len(values) else None


def job_running(exp: Exp, job_id: str) -> dict[str, str] | None:
    info = exp.job(job_id)
    return info if info.get("JobState") == "RUNNING" else None


def ec2_at_rest(exp: Exp, ec2_nodes: list[str], others: tuple[str, ...] = ()) -> bool:
    """The ec2 nodes (and ``others``) powered down, and the region holding no machine for them.
    A node a capacity failure sent back powered down may keep its reason (and a state other
    than idle): that is the site's pause, which the caller waits out if it must."""
    states = exp.states()
    if not all(states.get(n, "").endswith("~") for n in [*ec2_nodes, *others]):
        return False
    return not any(m.get("node") in ec2_nodes for m in exp.region_machines())


def hold_local(exp: Exp, site: str) -> str:
    """A long job on the local site's node: the growth policy's cheapest site is then full."""
    job = exp.sbatch(f"-N1 -C {site} -t 120 -J burst-holder", "sleep 7000")
    log(f"holder job {job} on site {site}: waiting for it to run")
    wait_for(f"holder job {job}", lambda: job_running(exp, job), 600, 3)
    return job


# -- 1. submit to start on EC2 nodes ----------------------------------------------------------
def resume_once(exp: Exp, site: str, ec2_nodes: list[str], rep: int) -> dict[str, Any]:
    log(f"resume rep {rep}: waiting for {','.join(ec2_nodes)} powered down, instances gone")
    wait_for("the ec2 nodes at rest", lambda: ec2_at_rest(exp, ec2_nodes), 600, 3)
    tag = f"r{time.time_ns()}"
    submitted = exp.now()
    job = exp.sbatch(
        f"-N{len(ec2_nodes)} -C {site} --exclusive -t 5 -J burst-resume",
        f"date +%s.%N > {MARK + tag}; sleep 45",
    )
    log(f"resume rep {rep}: job {job} submitted")
    info = wait_for(f"job {job} running", lambda: job_running(exp, job), 600, 0.5)
    # The instances live only while the job holds them: read their journals now.
    region = exp.region_machines()
    started = float(wait_for("the job's first line", lambda: exp.mark(job, tag), 60))
    nodes = expand(info.get("NodeList", ""))
    instance = {n: exp.instance_journal(n) for n in nodes}
    timings = wait_for(
        "the resume's timings line", lambda: _resume_line(exp, submitted, nodes), 120, 2
    )
    client = exp.journal(CLIENT_UNIT, submitted)
    ctld = exp.journal("slurmctld", submitted)
    region_lines = exp.region_log(submitted - 2)
    exp.scancel([job])

    t = timings["timings"]
    hook = timings["time"] - t["total"]
    launched = hook + t["manager"] + t.get("power_on", 0.0)
    # the client's poll saw every node registered at the end of its register step
    client_ready = launched + t.get("playbook", 0.0) + t.get("register", 0.0)
    per_node_running = {
        n: last(region_lines, rf"instance {iid}: running")
        for n, iid in _instance_ids(region_lines, nodes).items()
    }
    # The instance's own journal has its user data starting (the boot over); the region logs
    # "running" only once it has started it, a little later.
    user_data = {n: first(instance[n], r"Started ptc-fake-cloud-final") for n in nodes}
    running = latest(list(user_data.values()))
    boot_source = "the instance's journal (user data started)"
    if running is None and len(per_node_running) == len(nodes):
        running = latest(list(per_node_running.values()))
        boot_source = "the region's log (instance running)"
    keys = {n: last(client, rf"join: {re.escape(n)}: munge key handed out") for n in nodes}
    slurmd = {n: _slurmd_started(instance[n]) for n in nodes}
    ctld_registered = _registered(ctld, nodes, launched)
    # slurmctld launches a powered-up job's batch script only once its periodic pass
    # (job_time_limit) finds the job's nodes ready and ends its configuring
    configured = first(ctld, rf"Configuration for JobId={job} (is )?complete", launched)
    notes = []
    row: dict[str, Any] = {
        "job": job,
        "nodes": nodes,
        "total": started - submitted,
        "slurmctld to ResumeProgram": hook - submitted,
        "manager (AddNodes)": t["manager"],
        "launch call (RunInstances)": t.get("power_on", 0.0),
        "client resume total": t["total"],
        "client register wait": t.get("register"),
        "region machines at job start": region,
        "boot end seen in": boot_source,
        "per-node user data start (s after the launch call)": {
            n: (v - launched if v is not None else None) for n, v in user_data.items()
        },
    }
    join_end = latest(list(slurmd.values()))
    # slurmctld's own line when it has one; else the client's poll, which saw it after the fact
    registered = ctld_registered if ctld_registered is not None else client_ready
    row["registration seen by"] = (
        "slurmctld (node now responding)" if ctld_registered is not None
        else "the client's poll (its register step's end)"
    )  # fmt: skip
    if configured is not None:
        row["of which registration to slurmctld's configuring complete"] = configured - registered
        row["of which configuring complete to the job's first line"] = started - configured
    if running is None:
        notes.append("boot: no source showed the boot's end; boot merged into join")
        row["boot (pending to running)"] = None
        boot_end = launched
    else:
        row["boot (pending to running)"] = running - launched
        boot_end = running
    if join_end is None:
        notes.append(
            "join: the instance's journal showed no slurmd start; join and registration merged "
            "(under slurmd registration)"
        )
        row["join (user data to slurmd start)"] = None
        row["slurmd registration"] = registered - boot_end
    else:
        row["join (user data to slurmd start)"] = join_end - boot_end
        row["slurmd registration"] = registered - join_end
    row["job start after registration"] = started - registered
    if all(v is not None for v in keys.values()) and running is not None:
        row["join: munge key handed out after running"] = (
            max(v for v in keys.values() if v is not None) - running
        )
    row["per-node running (s after the launch call)"] = {
        n: (v - launched if v is not None else None) for n, v in per_node_running.items()
    }
    row["per-node slurmd start (s after the launch call)"] = {
        n: (v - launched if v is not None else None) for n, v in slurmd.items()
    }
    allocated = first(ctld, rf"Allocate JobId={job} ", submitted)
    program = first(ctld, r"COMMAND=\S*ptc-elastic-hook resume", submitted)
    if allocated is not None:
        row["of which sbatch to the allocation"] = allocated - submitted
        if program is not None:
            row["of which allocation to the ResumeProgram's start"] = program - allocated
            row["of which ResumeProgram's start to the client's resume"] = hook - program
    # what the split was read from, to check it by
    row["slurmctld lines"] = [
        f"{t:.3f} {text}" for t, text in ctld if re.search(rf"JobId={job}\b|ec2|waking", text)
    ][:40]
    row["instance lines"] = {
        n: [f"{t:.3f} {text}" for t, text in lines if re.search(r"slurmd|munge|cloud", text)][:40]
        for n, lines in instance.items()
    }
    row["notes"] = notes
    log(
        f"resume rep {rep}: job {job} on {','.join(nodes)} started {row['total']:.1f} s after "
        "sbatch; "
        + ", ".join(
            f"{p} {row[p]:.1f}" for p in RESUME_PARTS if isinstance(row.get(p), (int, float))
        )
    )
    for part in EXTRAS:
        if isinstance(row.get(part), (int, float)):
            log(f"  {part}: {row[part]:.1f}")
    for note in notes:
        log(f"  note: {note}")
    return row


def _resume_line(exp: Exp, since: float, nodes: list[str]) -> dict[str, Any] | None:
    out = exp.sh("head", f"tail -n 20 {node_paths.RESUME_TIMINGS} 2>/dev/null || true")
    for raw in reversed(out.splitlines()):
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if line["time"] - line["timings"]["total"] < since:
            continue
        if set(nodes) <= set(expand(line["hostlist"])):
            return dict(line)
    return None


def _instance_ids(lines: list[tuple[float, str]], nodes: list[str]) -> dict[str, str]:
    """Each node's (latest) instance, by the region's "machine NODE up" line."""
    found = {}
    for _, text in lines:
        if (m := re.match(r"instance (\S+): machine (\S+) up", text)) and m[2] in nodes:
            found[m[2]] = m[1]
    return found


def _slurmd_started(lines: list[tuple[float, str]]) -> float | None:
    """When the user data's slurmd start took: systemd's line, else slurmd's own first."""
    return last(lines, r"Started slurmd|Started .*[Ss]lurm node daemon") or first(
        lines, r"slurmd(\[\d+\])?: .*(started|slurmd version)"
    )


def _registered(lines: list[tuple[float, str]], nodes: list[str], after: float) -> float | None:
    """When slurmctld had the last of ``nodes`` registered: its "now responding" line."""
    return latest([last(lines, rf"Node {re.escape(n)} now responding", after) for n in nodes])


def resume_latency(exp: Exp, site: str, ec2_nodes: list[str], reps: int) -> list[dict[str, Any]]:
    return [resume_once(exp, site, ec2_nodes, rep) for rep in range(1, reps + 1)]


# -- 2. capacity error to a job running on another site ----------------------------------------
def capacity_failover(exp: Exp, ec2_site: str, ec2_nodes: list[str]) -> dict[str, Any]:
    log("capacity: waiting for the ec2 nodes at rest")
    wait_for("the ec2 nodes at rest", lambda: ec2_at_rest(exp, ec2_nodes), 600, 3)
    exp.ptc("fake-ec2", "fault", "capacity", exp.name, "--until-cleared")
    try:
        tag = f"c{time.time_ns()}"
        submitted = exp.now()
        job = exp.sbatch("-N1 --exclusive -t 5 -J burst-capacity", f"date +%s.%N > {MARK + tag}")
        log(f"capacity: job {job} submitted, every RunInstances refused")
        seen_nodes: list[str] = []

        def started() -> float | None:
            info = exp.job(job)
            nodes = info.get("NodeList", "")
            if nodes and nodes != "(null)" and nodes not in seen_nodes:
                seen_nodes.append(nodes)
                log(f"capacity: job {job} on {nodes}, {info.get('JobState')}")
            return exp.mark(job, tag) if info.get("JobState") in ("RUNNING", "COMPLETED") else None

        first_line = float(wait_for(f"job {job}'s first line", started, 600, 1))
        info = exp.job(job)
    finally:
        exp.ptc("fake-ec2", "fault", "capacity", exp.name, "--clear")
    # The resume runs in the ResumeProgram (its log is the hooks' file, not the client's
    # journal); slurmctld's journal has each failure, when the node got its reason.
    ctld = exp.journal("slurmctld", submitted)
    failures = [
        t for t, text in ctld if re.search(r"reason set to: .*InsufficientInstanceCapacity", text)
    ]
    allocations = [
        f"{t:.3f} {text}" for t, text in ctld if re.search(rf"Allocate JobId={job} ", text)
    ]
    result: dict[str, Any] = {
        "job": job,
        "nodes tried": seen_nodes,
        "ran on": info.get("NodeList"),
        "capacity failures before it ran": len(failures),
        "submit to first line": first_line - submitted,
        "allocations": allocations,
        "failure lines": [
            f"{t:.3f} {text[:200]}" for t, text in ctld if "InsufficientInstanceCapacity" in text
        ],
        "restarts": info.get("Restarts"),
    }
    start = exp.slurm_time(info.get("StartTime", ""))
    eligible = exp.slurm_time(info.get("EligibleTime", ""))
    if not failures:
        result["note"] = "slurmctld's journal showed no InsufficientInstanceCapacity"
    else:
        for which, failed in (("first", failures[0]), ("last", failures[-1])):
            result[f"submit to the {which} capacity failure"] = failed - submitted
            result[f"{which} failure to the job's first line"] = first_line - failed
            if start is not None:
                result[f"{which} failure to StartTime (1 s resolution)"] = start - failed
            if eligible is not None:
                result[f"EligibleTime minus the {which} failure (1 s resolution)"] = (
                    eligible - failed
                )
    log(
        "capacity: "
        + ", ".join(f"{k} {v:.1f}" for k, v in result.items() if isinstance(v, float))
        + f"; ran on {result['ran on']}"
    )
    return result


# -- 3. one Ch. 2 round across a local site and the ec2 site ---------------------------------
def rebalance_rounds(
    exp: Exp,
    sites: Path,
    ec2_site: str,
    ec2_nodes: list[str],
    others: tuple[str, ...],
    policies: list[str],
) -> dict[str, Any]:
    log("rebalance: waiting for the ec2 site's pause to end and its nodes at rest")
    wait_for(
        "the ec2 site unpaused", lambda: f"ptc-paused-{ec2_site}" not in exp.reservations(), 300, 3
    )
    # the other site's nodes too: one left up would be in the rounds' excess
    wait_for("the pool at rest", lambda: ec2_at_rest(exp, ec2_nodes, others), 600, 3)
    jobs = [
        exp.sbatch(f"-N1 -C {ec2_site} --exclusive -t 30 -J burst-fill", "sleep 1700")
        for _ in ec2_nodes
    ]
    log(f"rebalance: jobs {','.join(jobs)} filling the ec2 site")
    wait_for("the ec2 site's jobs running", lambda: all(job_running(exp, j) for j in jobs), 600, 2)
    time.sleep(20)  # some progress to discard
    rounds = []
    for policy in policies:
        t0 = exp.now()
        report = json.loads(
            exp.ptc("elastic", "rebalance", exp.name, "--sites", str(sites), "--policy", policy,
                    "--json").strip().splitlines()[-1]
        )  # fmt: skip
        t1 = exp.now()
        row = {
            "policy": policy,
            "started": t0,
            "seconds": t1 - t0,
            "live_before": report["live_before"],
            "drained": list(report["drained"]),
            "requeued": list(report["requeued"]),
            "terminated": [r["node"] for r in report["terminated"]],
            "undrained": list(report["undrained"]),
            "excess_cost": report["excess_cost"],
            "discarded_s": report["discarded_s"],
            "reclamations": report["terminated"],
        }
        rounds.append(row)
        log(
            f"rebalance {policy}: {row['seconds']:.1f} s; live before {row['live_before']}; "
            f"drained {row['drained'] or '-'}, requeued {row['requeued'] or '-'}, terminated "
            f"{row['terminated'] or '-'}; excess cost {row['excess_cost']:g}, discarded work "
            f"{row['discarded_s']:.0f} s"
        )
    terminated_round = next((r for r in reversed(rounds) if r["terminated"]), None)
    result: dict[str, Any] = {"rounds": rounds}
    if terminated_round is not None:
        gone = set(terminated_round["terminated"]) & set(ec2_nodes)
        wait_for(
            "the region's machines gone",
            lambda: not any(m.get("node") in gone for m in exp.region_machines()),
            300,
            1,
        )
        lines = exp.region_log(terminated_round["started"] - 1)
        ended = [last(lines, rf"ended: removing {re.escape(n)}$") for n in sorted(gone)]
        if ended and all(v is not None for v in ended):
            last_end = max(v for v in ended if v is not None)
            t_start = terminated_round["started"]
            t_end = t_start + terminated_round["seconds"]
            result["terminated after the round's start"] = last_end - t_start
            result["terminated after the round's end"] = last_end - t_end
            log(
                f"rebalance: the ec2 instances terminated {last_end - t_start:.1f} s after the "
                f"{terminated_round['policy']} round began ({last_end - t_end:.1f} s after it "
                "returned)"
            )
        else:
            result["note"] = "the region's log showed no removal of the terminated nodes' machines"
    else:
        result["note"] = "no round terminated a node"
    exp.scancel(jobs)
    drained = sorted({n for r in rounds for n in r["drained"] + r["terminated"]})
    if drained:
        # back to a pool at rest: the rounds' drains would keep the nodes out of later runs
        exp.sh("head", f"scontrol update NodeName={','.join(drained)} State=RESUME || true")
    return result


# -- output ------------------------------------------------------------------------------
def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f}, {max(values):.1f}]"


EXTRAS = (
    "of which sbatch to the allocation",
    "of which allocation to the ResumeProgram's start",
    "of which ResumeProgram's start to the client's resume",
    "join: munge key handed out after running",
    "of which registration to slurmctld's configuring complete",
    "of which configuring complete to the job's first line",
)


def _markdown(results: dict[str, Any]) -> str:
    lines = [f"# Bursting to a FAKE EC2 region on {results['experiment']}", ""]
    lines += [f"`{results['command']}`", "", f"Region boot delay: {results['boot_delay']} s.", ""]
    resume = results.get("resume")
    if resume:
        lines += [
            f"## Submit to start on {len(resume[0]['nodes'])} ec2 nodes "
            f"(seconds, median [min, max] of {len(resume)})",
            "",
            "| part | s |",
            "|---|---|",
        ]
        for part in ("total", *RESUME_PARTS):
            values = [r[part] for r in resume if isinstance(r.get(part), (int, float))]
            cell = _summary(values) if values else "not separable (see notes)"
            lines.append(f"| {part} | {cell} |")
        lines += ["", "| detail | s |", "|---|---|"]
        for part in EXTRAS:
            values = [r[part] for r in resume if isinstance(r.get(part), (int, float))]
            if values:
                lines.append(f"| {part} | {_summary(values)} |")
        seen_by = sorted({r["registration seen by"] for r in resume})
        lines += ["", f"Registration as seen by: {', '.join(seen_by)}."]
        notes = sorted({n for r in resume for n in r["notes"]})
        lines += ["", *[f"- {n}" for n in notes], ""]
    capacity = results.get("capacity")
    if capacity:
        lines += ["## Capacity error to a job running on another site", ""]
        lines += [f"- {k}: {v:.1f} s" for k, v in capacity.items() if isinstance(v, float)]
        lines += [
            f"- capacity failures before it ran: {capacity['capacity failures before it ran']}",
            f"- ran on: {capacity['ran on']} (nodes tried: {', '.join(capacity['nodes tried'])})",
            "",
        ]
    rebalance = results.get("rebalance")
    if rebalance:
        lines += [
            "## Ch. 2 rounds",
            "",
            "| policy | drained | requeued | terminated | excess cost | discarded work (s) |",
            "|---|---|---|---|---|---|",
        ]
        for r in rebalance["rounds"]:
            lines.append(
                f"| {r['policy']} | {', '.join(r['drained']) or '-'} | "
                f"{', '.join(r['requeued']) or '-'} | {', '.join(r['terminated']) or '-'} | "
                f"{r['excess_cost']:g} | {r['discarded_s']:.0f} |"
            )
        lines.append("")
        lines += [f"- {k}: {v:.1f} s" for k, v in rebalance.items() if isinstance(v, float)]
        if "note" in rebalance:
            lines.append(f"- {rebalance['note']}")
        lines.append("")
    return "\n".join(lines)


def _figure(results: dict[str, Any], out: Path) -> Path | None:
    resume = results.get("resume")
    if not resume:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 1.4 + 0.45 * len(resume)))
    for i, row in enumerate(resume):
        left = 0.0
        for k, part in enumerate(RESUME_PARTS):
            width = row.get(part)
            if not isinstance(width, (int, float)):
                continue
            ax.barh(i, width, left=left, color=f"C{k}", label=part if i == 0 else None)
            left += width
    ax.set_yticks(range(len(resume)), [f"rep {i + 1}" for i in range(len(resume))])
    ax.set_xlabel("seconds from sbatch to the job's first line")
    ax.set_title(
        f"sbatch -N{len(resume[0]['nodes'])} onto powered-down ec2 nodes, FAKE EC2 region "
        f"(boot delay {results['boot_delay']} s)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    path = out / "burst.png"
    save_png(fig, path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("name", help="a local experiment with a fake EC2 region, deployed elastic")
    parser.add_argument("--sites", type=Path, required=True, help="the deploy's sites file")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--local", default="here", help="the cheapest local site (one node)")
    parser.add_argument("--ec2", default="cloud", help="the ec2 site")
    parser.add_argument("--other", default="dear", help="the dearer local site")
    parser.add_argument("--user", default="ptc", help="who submits the jobs")
    parser.add_argument("--policies", default="FO,AP-100", help="the rounds of part 3")
    parser.add_argument("--skip-resume", action="store_true")
    parser.add_argument("--skip-capacity", action="store_true")
    parser.add_argument("--skip-rebalance", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="write results and the plot here")
    args = parser.parse_args()
    exp = Exp(args.name)
    zone = exp.sh("head", "date +%z").strip()  # scontrol prints the head's local time
    exp.tz_offset = (-1 if zone.startswith("-") else 1) * (
        int(zone[1:3]) * 3600 + int(zone[3:5]) * 60
    )
    exp.user = args.user
    features = dict(
        line.split("|", 1)
        for line in exp.sh("head", "sinfo --noheader --Node --format='%N|%f'").split()
        if "|" in line
    )
    ec2_nodes = sorted(n for n, f in features.items() if args.ec2 in f.split(","))
    exp.ec2_nodes = set(ec2_nodes)
    status = json.loads((exp.region_dir / "status.json").read_text())
    results: dict[str, Any] = {
        "experiment": args.name,
        "command": "benchmarks/burst.py " + " ".join(sys.argv[1:]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "boot_delay": status["settings"].get("boot_delay"),
        "ec2_nodes": ec2_nodes,
        "slurm": exp.sh("head", "scontrol show config | grep -E '^(Suspend|Resume)(Time|Timeout)'")
        .strip()
        .splitlines(),
    }
    log(f"{args.name}: ec2 site {args.ec2} is {','.join(ec2_nodes)}; boot delay "
        f"{results['boot_delay']} s")  # fmt: skip
    holder = hold_local(exp, args.local)
    try:
        if not args.skip_resume:
            results["resume"] = resume_latency(exp, args.ec2, ec2_nodes, args.reps)
        if not args.skip_capacity:
            results["capacity"] = capacity_failover(exp, args.ec2, ec2_nodes)
        if not args.skip_rebalance:
            others = tuple(n for n, f in features.items() if args.other in f.split(","))
            results["rebalance"] = rebalance_rounds(
                exp, args.sites, args.ec2, ec2_nodes, others, args.policies.split(",")
            )
    finally:
        exp.scancel([holder])
    print(_markdown(results))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_text(args.out / "results.json", json.dumps(results, indent=1, default=str) + "\n")
        write_text(args.out / "results.md", _markdown(results))
        written = [args.out / "results.json", args.out / "results.md"]
        if (figure := _figure(results, args.out)) is not None:
            written.append(figure)
        for path in written:
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
