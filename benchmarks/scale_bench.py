"""The elastic control plane at 100, 1,000 and 10,000 power-save CLOUD nodes.

Two parts, each per size (see docs/scale.md for what is real and what is emulated):

- ``live``: Debian's slurmctld 22.05.8 and munged (unpacked under $PTC_HOME, not installed), the
  manager service (HTTPS, JSON file store or, with ``--store etcd``, Debian's etcd-server
  unpacked the same way and run as one member on loopback) with a pool of N nodes, ptc's Slurm client as
  ResumeProgram/SuspendProgram, each node's machine emulated by one slurmd on loopback. A job
  stream from the trace (sizes scaled to N, times compressed) is submitted with sbatch; printed:
  submit to ResumeProgram call, the call to the node's registration, submit to job start,
  slurmctld's and the manager's CPU and memory, one emulated node's memory. With
  ``--accounting slurmdbd``, slurmctld's accounting goes to a real slurmdbd and MariaDB
  (unpacked the same way, run as root under the run's directory).
- ``rounds``: the manager service with a pool of N nodes, all held by the partition; one round
  of the client (``report_pv``: squeue to the preemption vector to the manager) with 10,000 and
  100,000 jobs in the queue (Slurm's answers emulated from the trace), a reclamation's decision,
  the store's writes per second (etcd's CPU and memory too with ``--store etcd``).

Sizes the machine cannot hold are refused before anything starts (the memory of one emulated
node, measured in the baseline's run, times N against MemAvailable). Ctrl-C or SIGTERM stop
everything the run started. Results go to ``--out``; with a baseline (``--baseline``) each
figure is compared with it under ``--tolerance`` and regressions are printed (exit 1).

    PTC_HOME=/tmp/scale-home flock /tmp/ptc-heavy.lock .venv/bin/python benchmarks/scale_bench.py \
        --sizes 100,1000 --parts live,rounds [--store etcd]
    .venv/bin/python benchmarks/scale_bench.py --curve before|after   # the manager's start vs pool size
    .venv/bin/python benchmarks/scale_bench.py --plot                 # PNGs from the saved results
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale.budget import MIB, Budget, TooBig, check_sizes, mem_available  # noqa: E402
from benchmarks.scale.cleanup import Interrupted, Ledger, signals_unwind, tear_down  # noqa: E402
from benchmarks.scale.dbd import MEMORY as DBD_MEMORY  # noqa: E402
from benchmarks.scale.dbd import DbdRun, free_port, unpack_dbd  # noqa: E402
from benchmarks.scale.etcd import MEMORY as ETCD_MEMORY  # noqa: E402
from benchmarks.scale.etcd import EtcdRun, unpack_etcd  # noqa: E402
from elastic.errors import PtcError  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "scale"
TRACE = ROOT.parent / "shared" / "data" / "traces" / "KTH-SP2-1996-2.swf"
# Without a baseline: a slurmd's resident memory as first seen here, rounded up.
DEFAULT_PER_NODE = 12 * MIB
FIXED = 2048 * MIB  # slurmctld, munged, the manager, this harness, the jobs' slurmstepd


def budget_from(baseline: dict[str, Any] | None, extra: int = 0) -> Budget:
    """One emulated node's memory: the largest mean slurmd RSS the baseline measured; ``extra``
    is added to the fixed part (etcd's member, with ``--store etcd``)."""
    seen = [
        float(r["slurmd_mib"]["rss_mean"])
        for r in (baseline or {}).get("live", {}).values()
        if r.get("slurmd_mib", {}).get("rss_mean")
    ]
    per_node = int(max(seen) * MIB) if seen else DEFAULT_PER_NODE
    return Budget(per_node=per_node, fixed=FIXED + extra)


# -- comparison with the baseline ---------------------------------------------------------
# Figures where more is better; every other compared figure is a cost.
HIGHER_IS_BETTER = ("writes_per_s",)


def flatten(tree: Any, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        out[prefix] = float(tree)
    return out


def compare(
    result: dict[str, Any], baseline: dict[str, Any], tolerance: dict[str, Any]
) -> list[str]:
    """Regressions of ``result`` against ``baseline``: a figure named in the tolerance file's
    ``compared`` patterns (a key ends with one) beyond its tolerance: ``relative`` (a fraction)
    plus ``absolute`` (the figure's unit), the pattern's own or the defaults."""
    now, then = flatten(result), flatten(baseline)
    rules: dict[str, dict[str, float]] = tolerance.get("compared", {})
    default = tolerance.get("default", {"relative": 0.5, "absolute": 0.0})
    found = []
    for key, base in sorted(then.items()):
        rule_key = next((p for p in rules if key.endswith(p)), None)
        if rule_key is None or key not in now:
            continue
        rule = {**default, **rules[rule_key]}
        value = now[key]
        slack = abs(base) * float(rule["relative"]) + float(rule["absolute"])
        if any(key.endswith(h) for h in HIGHER_IS_BETTER):
            if value < base - slack:
                found.append(
                    f"{key}: {value:.4g}, baseline {base:.4g} (at least {base - slack:.4g})"
                )
        elif value > base + slack:
            found.append(f"{key}: {value:.4g}, baseline {base:.4g} (at most {base + slack:.4g})")
    return found


def setup_of(run: dict[str, Any]) -> tuple[str, str]:
    """What a run measured with: the manager's store and slurmctld's accounting (runs from
    before either option measured the file store without accounting)."""
    return str(run.get("store", "file")), str(run.get("accounting", "none"))


def describe(setup: tuple[str, str]) -> str:
    return f"the {setup[0]} store with accounting {setup[1]}"


# -- the parts ------------------------------------------------------------------------------
def live_part(
    sizes: list[int],
    top: Path,
    run_id: str,
    trace: Any,
    args: argparse.Namespace,
    save: Any = lambda out: None,
    etcd: EtcdRun | None = None,
    dbd: DbdRun | None = None,
) -> dict[str, Any]:
    from benchmarks.scale.cluster import Layout, unpack
    from benchmarks.scale.live import run_size

    cache = Path(os.environ.get("PTC_HOME", "/tmp")) / "scale-debs"
    root = unpack(cache)
    out: dict[str, Any] = {}
    for size in sizes:
        layout = Layout(top / f"live-{size}", root, size, dbd_port=free_port() if dbd else 0)
        try:
            out[str(size)] = run_size(size, layout, run_id, trace, window=args.window,
                                      timeout=args.timeout, say=say, etcd=etcd, dbd=dbd)  # fmt: skip
        finally:
            tear_down(layout.ledger, run_id, remove=lambda p: None)
        print_live(out[str(size)])
        save(out)
    return out


def a_change(doc: dict[str, Any], names: list[str], n: int) -> None:
    """Change ``doc`` (a manager's state) as one of the manager's writes does: a node of the
    pool (one of ``names``) moves, and the event that logs it is added."""
    node = names[(n * 7919) % len(names)]
    doc["nodes"][node]["since"] = float(n)
    events = doc.setdefault("events", [])
    events.append({"seq": len(events) + 1, "time": float(n), "kind": "scale-bench-write",
                   "data": {"node": node}})  # fmt: skip


def rounds_part(
    sizes: list[int],
    jobs: list[int],
    top: Path,
    run_id: str,
    trace: Any,
    etcd: EtcdRun | None = None,
) -> dict[str, Any]:
    from benchmarks.scale.cluster import PARTITION, Layout, node_names
    from benchmarks.scale.etcd import COPY_KEY, STATE_KEY, USER
    from benchmarks.scale.live import cpu_seconds, memory, start_manager
    from benchmarks.scale.rounds import emulated_queue, emulated_runner
    from elastic.configserver.node import open_node
    from elastic.manager.client import ManagerClient
    from elastic.manager.etcd_store import EtcdStore
    from elastic.manager.store import JsonFileStore, Store, encode
    from elastic.policies import make_policy
    from elastic.slurm.client import ClientConfig, SlurmElasticClient
    from elastic.slurm.commands import Slurm
    from elastic.slurm.queue import compute_pv

    out: dict[str, Any] = {}
    for size in sizes:
        layout = Layout(top / f"rounds-{size}", Path("/nonexistent"), size)
        layout.run.mkdir(parents=True)
        names = node_names(size)
        try:
            member = etcd.start(layout, run_id) if etcd is not None else None
            t0 = time.monotonic()
            try:
                manager, setup = start_manager(layout, run_id, names,
                                               member.store_settings() if member else None)  # fmt: skip
            except PtcError as err:
                # etcd refuses a request larger than its limit: at some size the whole state
                # is one, and the manager cannot register its pool. A finding, not a crash.
                log = layout.run / "manager" / "manager.log"
                last = log.read_text().strip().splitlines()[-1:] if log.exists() else []
                out[str(size)] = {"error": f"{err}: {' '.join(last)[:300]}"}
                say(f"[{size}] error: {out[str(size)]['error']}")
                continue
            started = time.monotonic() - t0
            token = Path(setup["token"]).read_text().strip()
            part = ManagerClient(setup["manager"], token, ca=setup["ca"], timeout=600)
            admin = part.with_token(Path(setup["admin_token"]).read_text().strip())
            part.add_nodes(PARTITION, nodes=names)
            cpu0 = cpu_seconds(manager.pid)
            etcd_cpu0 = cpu_seconds(member.proc.pid) if member else 0.0
            row: dict[str, Any] = {"manager_start_s": started, "jobs": {}}
            for count in jobs:
                queue = emulated_queue(trace, names, count)
                slurm = Slurm(emulated_runner(queue))
                client = SlurmElasticClient(slurm, part, make_policy("LIFO"),
                                            config=ClientConfig(partition=PARTITION))  # fmt: skip
                client.pool_states = dict.fromkeys(names, "allocated")
                t = time.perf_counter()
                compute_pv(slurm, make_policy("LIFO"), None, names, time.time())
                vector = time.perf_counter() - t
                t = time.perf_counter()
                client.report_pv()
                total = time.perf_counter() - t
                row["jobs"][str(count)] = {"running": queue.running_jobs,
                                           "waiting": count - queue.running_jobs,
                                           "round_s": total, "vector_s": vector,
                                           "manager_s": total - vector}  # fmt: skip
                say(f"[{size}] round, {count:,} jobs ({queue.running_jobs:,} running): "
                    f"{total:.3f} s (vector {vector:.3f} s)")  # fmt: skip
            t = time.perf_counter()
            admin.reclaim(PARTITION, max(1, size // 10), 3600.0)
            row["reclaim_s"] = time.perf_counter() - t
            row["manager_cpu_s"] = cpu_seconds(manager.pid) - cpu0
            row["manager_mib"] = memory(manager.pid)
            source: Store
            copy: Store
            if member is None:
                source = JsonFileStore(layout.run / "manager" / "state.json")
                copy = JsonFileStore(layout.run / "store-copy.json")
            else:
                row["etcd_cpu_s"] = cpu_seconds(member.proc.pid) - etcd_cpu0
                row["etcd_mib"] = memory(member.proc.pid)
                row["etcd_data_bytes"] = member.data_bytes()
                etcd_client = open_node(USER, member.credentials, timeout=60)
                source = EtcdStore(etcd_client, STATE_KEY)
                copy = EtcdStore(etcd_client, COPY_KEY)
            _, doc = source.read()
            assert doc is not None
            revision = copy.write(doc, expect=copy.read()[0])
            nodes = sorted(doc["nodes"])
            n, t = 0, time.perf_counter()
            while n < 3 or time.perf_counter() - t < 2.0:
                # Each write changes what one of the manager's changes does (a node and the
                # event that logs it), so a store that writes only what changed is timed at
                # the manager's work, not at rewriting an unchanged state.
                a_change(doc, nodes, n)
                revision = copy.write(doc, expect=revision)
                n += 1
            row["store"] = {"kind": "file" if member is None else "etcd",
                            "writes_per_s": n / (time.perf_counter() - t),
                            "document_bytes": len(encode(doc))}  # fmt: skip
            say(f"[{size}] reclaim {max(1, size // 10)}: {row['reclaim_s']:.3f} s; "
                f"{row['store']['kind']} store: {row['store']['writes_per_s']:.1f} writes/s of "
                f"{row['store']['document_bytes'] / 1e6:.2f} MB; manager start "
                f"{started:.1f} s, peak RSS {row['manager_mib'].get('VmHWM', 0):.0f} MiB")  # fmt: skip
            if member is not None:
                say(f"[{size}] etcd: {row['etcd_cpu_s']:.1f} CPU s over the rounds, peak RSS "
                    f"{row['etcd_mib'].get('VmHWM', 0):.0f} MiB, data directory "
                    f"{row['etcd_data_bytes'] / 1e6:.0f} MB")  # fmt: skip
            out[str(size)] = row
        finally:
            tear_down(layout.ledger, run_id, remove=lambda p: None)
    return out


def partial(result: dict[str, Any], live: dict[str, Any], out: Path) -> None:
    """The sizes done so far, should the run be cut short."""
    path = out.with_name(out.stem + ".partial.json")
    path.write_text(json.dumps({**result, "live": live}, indent=1) + "\n")


def say(text: str) -> None:
    print(text, flush=True)


def print_live(row: dict[str, Any]) -> None:
    def fmt(s: dict[str, Any]) -> str:
        if not s.get("n"):
            return "n/a"
        return f"p50 {s['p50']:.2f} s, p95 {s['p95']:.2f} s, max {s['max']:.2f} s (n={s['n']})"

    say(f"[{row['size']}] jobs {row['started']}/{row['submitted']} started; nodes "
        f"{row['nodes_registered']}/{row['nodes_resumed']} registered; {row['resume_calls']} "
        "ResumeProgram calls")  # fmt: skip
    say(f"[{row['size']}]   submit -> ResumeProgram: {fmt(row['submit_to_resume_s'])}")
    say(f"[{row['size']}]   ResumeProgram -> registered: {fmt(row['resume_to_register_s'])}")
    say(f"[{row['size']}]   submit -> start: {fmt(row['submit_to_start_s'])}")
    m = row["memory_mib"]
    say(f"[{row['size']}]   slurmctld {row['cpu_s']['slurmctld']:.1f} CPU s, peak RSS "
        f"{m['slurmctld'].get('VmHWM', 0):.0f} MiB; manager {row['cpu_s']['manager']:.1f} CPU s, "
        f"peak RSS {m['manager'].get('VmHWM', 0):.0f} MiB; one emulated node (slurmd): "
        f"PSS {row['slurmd_mib']['pss_mean'] or 0:.1f} MiB, RSS {row['slurmd_mib']['rss_mean'] or 0:.1f} MiB")  # fmt: skip
    for what in ("etcd", "slurmdbd", "mariadbd"):
        if what in row["cpu_s"]:
            say(f"[{row['size']}]   {what} {row['cpu_s'][what]:.1f} CPU s, "
                f"peak RSS {m[what].get('VmHWM', 0):.0f} MiB")  # fmt: skip
    if row.get("jobs_in_accounting") is not None:
        say(f"[{row['size']}]   jobs in slurmdbd's accounting: {row['jobs_in_accounting']}")


# -- the curve and the figures -------------------------------------------------------------
def run_curve(label: str, sizes: list[int]) -> Path:
    from benchmarks.scale.curve import curve

    points = curve(sizes, Path(os.environ.get("PTC_HOME", tempfile.gettempdir())))
    path = RESULTS / f"curve-{label}.json"
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    path.write_text(
        json.dumps({"label": label, "commit": commit, "points": points}, indent=1) + "\n"
    )
    return path


def plot() -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    curves = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("curve-*.json"))]
    if curves:
        fig, ax = plt.subplots(figsize=(6, 4))
        for c in sorted(curves, key=lambda c: c["label"] != "before"):
            xs = [p["nodes"] for p in c["points"]]
            ax.plot(xs, [p["seconds"] for p in c["points"]], "o-",
                    label=f"{c['label']} ({c['commit']})")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("pool size (nodes)")
        ax.set_ylabel("manager start (s)")
        ax.set_title("The manager's start with its pool: before and after")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        made.append(RESULTS / "manager-start.png")
        fig.savefig(made[-1], dpi=120)
        plt.close(fig)
    base = RESULTS / "baseline.json"
    if base.exists():
        data = json.loads(base.read_text())
        rounds = data.get("rounds", {})
        if rounds:
            fig, ax = plt.subplots(figsize=(6, 4))
            sizes = sorted(int(s) for s in rounds)
            counts = sorted({c for r in rounds.values() for c in r["jobs"]}, key=int)
            for count in counts:
                ys = [rounds[str(s)]["jobs"].get(count, {}).get("round_s") for s in sizes]
                ax.plot(sizes, ys, "o-", label=f"round, {int(count):,} jobs queued")
            ax.plot(sizes, [rounds[str(s)]["reclaim_s"] for s in sizes], "s--", label="reclamation")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("pool size (nodes)")
            ax.set_ylabel("seconds")
            ax.set_title("The client's round and a reclamation by pool size")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
            fig.tight_layout()
            made.append(RESULTS / "rounds.png")
            fig.savefig(made[-1], dpi=120)
            plt.close(fig)
    after = RESULTS / "rounds-after-snapshot-fix.json"
    if base.exists() and after.exists():
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, path in (("before (baseline)", base), ("after the snapshot's fix", after)):
            rounds = json.loads(path.read_text())["rounds"]
            sizes = sorted(int(s) for s in rounds)
            ys = [rounds[str(s)]["jobs"]["100000"]["vector_s"] for s in sizes]
            ax.plot(sizes, ys, "o-", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("pool size (nodes)")
        ax.set_ylabel("compute_pv (s), 100,000 jobs queued")
        ax.set_title("The preemption vector: before and after")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        made.append(RESULTS / "vector.png")
        fig.savefig(made[-1], dpi=120)
        plt.close(fig)
    return made


def sizes_arg(text: str) -> list[int]:
    try:
        return [int(s.replace("_", "").replace(",", "")) for s in text.split(",") if s]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: sizes are whole numbers, comma-separated"
        ) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=sizes_arg, default=[100, 1000, 10000])
    parser.add_argument("--live-sizes", type=sizes_arg, default=None,
                        help="sizes of the live part (default: --sizes)")  # fmt: skip
    parser.add_argument("--jobs", type=sizes_arg, default=[10000, 100000])
    parser.add_argument("--parts", default="live,rounds")
    parser.add_argument("--store", choices=["file", "etcd"], default="file",
                        help="the manager's store: its JSON file, or a real etcd member")  # fmt: skip
    parser.add_argument("--etcd-max-request-mib", type=float, default=None,
                        help="etcd's --max-request-bytes (default: etcd's 1.5 MiB, as the role)")  # fmt: skip
    parser.add_argument("--accounting", choices=["none", "slurmdbd"], default="none",
                        help="live part: slurmctld's accounting, none or a real slurmdbd and MariaDB")  # fmt: skip
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--baseline", type=Path, default=RESULTS / "baseline.json")
    parser.add_argument("--tolerance", type=Path, default=RESULTS / "tolerance.json")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--save-baseline", action="store_true")
    parser.add_argument("--curve", choices=["before", "after"])
    parser.add_argument("--curve-sizes", type=sizes_arg, default=[125, 250, 500, 1000, 2000, 10000])
    parser.add_argument("--plot", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory (logs)")
    args = parser.parse_args(argv)
    if args.curve:
        say(f"wrote {run_curve(args.curve, args.curve_sizes)}")
        return 0
    if args.plot:
        for path in plot():
            say(f"wrote {path}")
        return 0
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts <= {"live", "rounds"}:
        parser.error(f"--parts: {sorted(parts - {'live', 'rounds'})}: choose from live, rounds")
    baseline = json.loads(args.baseline.read_text()) if args.baseline.exists() else None
    live_sizes = args.live_sizes if args.live_sizes is not None else args.sizes
    # Refused before anything starts: a size that does not fit names itself.
    try:
        if "live" in parts:
            extra = ETCD_MEMORY if args.store == "etcd" else 0
            extra += DBD_MEMORY if args.accounting == "slurmdbd" else 0
            check_sizes(live_sizes, budget_from(baseline, extra), mem_available())
    except TooBig as err:
        say(f"error: {err}")
        return 2
    from elastic.sim.traces import load_trace

    trace = load_trace(args.trace)
    home = Path(os.environ.get("PTC_HOME", tempfile.gettempdir()))
    home.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix="scale-run-", dir=home))
    run_id = uuid.uuid4().hex[:12]
    ledger = Ledger(top / "ledger.jsonl")
    ledger.directory(top)
    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(
            [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]
        ),
        "trace": args.trace.name,
        "store": args.store,
        "accounting": args.accounting,
        "mem_available_mib": mem_available() / MIB,
        "load_before": os.getloadavg()[0],
    }
    status = 0
    out = args.out or RESULTS / f"run-{result['date'][:10]}.json"
    try:
        with signals_unwind():
            etcd = None
            if args.store == "etcd":
                cache = Path(os.environ.get("PTC_HOME", "/tmp")) / "scale-debs"
                limit = args.etcd_max_request_mib
                etcd = EtcdRun(unpack_etcd(cache), None if limit is None else int(limit * MIB))
            dbd = None
            if args.accounting == "slurmdbd" and "live" in parts:
                dbd = DbdRun(unpack_dbd(Path(os.environ.get("PTC_HOME", "/tmp")) / "scale-debs"))
            if "live" in parts:
                result["live"] = live_part(live_sizes, top, run_id, trace, args,
                                           lambda live: partial(result, live, out), etcd, dbd)  # fmt: skip
            if "rounds" in parts:
                result["rounds"] = rounds_part(args.sizes, args.jobs, top, run_id, trace, etcd)
    except (KeyboardInterrupt, Interrupted):
        say("interrupted: stopping everything this run started")
        status = 130
    finally:
        if args.keep:
            done = tear_down(ledger, run_id, remove=lambda p: None)
        else:
            done = tear_down(ledger, run_id)
        say(f"cleaned up: {len(done['stopped'])} processes stopped, "
            f"{len(done['removed'])} directories removed")  # fmt: skip
    if status:
        return status
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    say(f"wrote {out}")
    if args.save_baseline:
        args.baseline.write_text(json.dumps(result, indent=1) + "\n")
        say(f"wrote {args.baseline}")
    elif baseline is not None and setup_of(baseline) != setup_of(result):
        say(f"not compared: {args.baseline.name} measured {describe(setup_of(baseline))}, "
            f"this run {describe(setup_of(result))}")  # fmt: skip
    elif baseline is not None and args.tolerance.exists():
        regressions = compare(result, baseline, json.loads(args.tolerance.read_text()))
        for line in regressions:
            say(f"REGRESSION {line}")
        if regressions:
            return 1
        say(f"no regression against {args.baseline.name} within {args.tolerance.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
