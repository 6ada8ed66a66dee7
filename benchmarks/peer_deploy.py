"""ptc's roles against a peer, the galaxyproject.slurm Ansible role, on the same bare nodes.

    python benchmarks/peer_deploy.py [--sizes 2 16] [--images bare] [--prefix peer]
        [--tarball ../shared/mirrors/galaxyproject-ansible-slurm-ab464df.tar.gz] [--out DIR]

For each size N and image, ptc and the peer each get a fresh 1 head + N compute experiment of
their own (`ptc up`, the same profile and image), one after the other, and each runs its
playbook twice: a first deploy, then a run that must change nothing (ptc: site.yml forced to
run, as `ptc deploy --full`). Both go through the same controller (`elastic.deploy.runner`:
ansible-runner, ptc's ansible.cfg, mitogen's strategy unless --no-mitogen, the same fact cache);
only the playbook and its roles differ.

The peer's side is not in this repository. The role's source is unpacked at run time from the
tarball into a temporary directory (as ``galaxyproject.slurm``), ANSIBLE_ROLES_PATH names only
that directory, and a playbook written there beside it: one play of the benchmark's own that
installs MariaDB, creates the accounting database and lets slurmdbd's Unix user in through
MariaDB's socket (the role does not install a database), then the role on every node, with
variables for this cluster (its nodes, a partition, accounting through slurmdbd) and a munge
key made for this run (0600, in the temporary directory, removed with it). The role reads
facts as top-level variables, so the peer's runs turn Ansible's fact injection back on.

ptc's site.yml does more than the peer (etcd, NFS, MPI, the cluster user, checks): its figures
are given whole and for the roles of the same scope (munge, slurm_accounting, slurm).

Per run it reads ansible-runner's per-task events: tasks per node (run, changed, skipped), the
wall time per task and per role. With --out it writes results.json, results.md and
peer_deploy.png. Prints the figures; never asserts. Ctrl-C takes down what it started.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import secrets
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from deploy_times import role_split  # noqa: E402

from elastic import atomic  # noqa: E402
from elastic.bench.plot import save_png  # noqa: E402
from elastic.cluster_groups import SLURM_COMPUTE as COMPUTE  # noqa: E402
from elastic.cluster_groups import SLURM_CONTROLLER as CONTROLLER  # noqa: E402
from elastic.cluster_groups import SLURM_DBD as DBD  # noqa: E402
from elastic.deploy import runner  # noqa: E402
from elastic.deploy.target import Target  # noqa: E402
from elastic.errors import DeployError, PtcError  # noqa: E402
from elastic.testbed import experiment as experiments  # noqa: E402
from elastic.testbed import lifecycle  # noqa: E402
from elastic.testbed.backends.local import capacity  # noqa: E402

PROFILE = REPO / "profiles" / "slurm_cluster.py"
TARBALL = REPO.parent / "shared" / "mirrors" / "galaxyproject-ansible-slurm-ab464df.tar.gz"
PEER_ROLE = "galaxyproject.slurm"
SIDES = ("ptc", "peer")
IMAGES = ("bare", "prepared")
# The local testbed of this machine holds 16 compute nodes beside a head.
MAX_SIZE = 16
# ptc's roles that do what the peer's role does (munge, slurmctld, slurmd, slurmdbd, MariaDB).
PTC_SCOPE_ROLES = frozenset({"munge", "slurm", "slurm_accounting"})
ACCOUNTING_DB = "slurm_acct_db"
MARIADB_SOCKET = "/run/mysqld/mysqld.sock"
# Result events, one per task and host (loop items come as runner_item_on_* besides).
_RESULTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "failed",
}
_STARTS = ("playbook_on_task_start", "playbook_on_handler_task_start")
_MARKS = ("playbook_on_play_start", *_STARTS, "playbook_on_stats")


@dataclass
class TaskCounts:
    """One host's tasks in a run: ``ran`` (ok or failed, changed among them) and ``skipped``."""

    ran: int = 0
    changed: int = 0
    skipped: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.ran + self.skipped


@dataclass
class Row:
    size: int
    image: str
    side: str
    run: str
    seconds: float
    changed: int
    failed: int
    hosts: int
    load_before: tuple[float, float, float]
    tasks: dict[str, dict[str, int]] = field(default_factory=dict)
    scope_tasks: dict[str, dict[str, int]] = field(default_factory=dict)
    roles: dict[str, float] = field(default_factory=dict)
    slowest: list[tuple[str, float]] = field(default_factory=list)
    check: str = ""


# --- what the events say (pure) -----------------------------------------------------------


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    """ansible-runner's events of one run, in the order they happened."""
    files = (run_dir / "ansible" / "job_events").glob("*.json")
    return sorted((json.loads(p.read_text()) for p in files), key=lambda e: int(e["counter"]))


def tasks_per_host(
    events: Iterable[Mapping[str, Any]], roles: frozenset[str] | None = None
) -> dict[str, TaskCounts]:
    """Each host's task results, counted from the per-task result events (one per task and
    host; a loop's items are not counted apart). ``roles``: only tasks of those roles."""
    out: dict[str, TaskCounts] = {}
    for event in events:
        kind = str(event.get("event", ""))
        data: Mapping[str, Any] = event.get("event_data") or {}
        if kind not in _RESULTS or not data.get("host"):
            continue
        if roles is not None and data.get("role") not in roles:
            continue
        counts = out.setdefault(str(data["host"]), TaskCounts())
        outcome = _RESULTS[kind]
        if outcome == "skipped":
            counts.skipped += 1
            continue
        counts.ran += 1
        if outcome == "failed" and not data.get("ignore_errors"):
            counts.failed += 1
        if (data.get("res") or {}).get("changed"):
            counts.changed += 1
    return dict(sorted(out.items()))


def task_times(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Wall seconds per task ("role: task", or the task's name outside roles), summed over
    repeats: a task lasts until the next task, play or the recap starts (under a linear
    strategy every host finishes a task before the next one starts)."""
    marks: list[tuple[float, str]] = []
    for event in events:
        kind = str(event.get("event", ""))
        if kind not in _MARKS:
            continue
        data: Mapping[str, Any] = event.get("event_data") or {}
        if kind in _STARTS:
            name = str(data.get("task", "?"))
            key = f"{data['role']}: {name}" if data.get("role") else name
        else:
            key = ""
        marks.append((datetime.fromisoformat(str(event["created"])).timestamp(), key))
    out: dict[str, float] = defaultdict(float)
    for (start, key), (end, _) in itertools.pairwise(marks):
        if key:
            out[key] += end - start
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def node_kinds(counts: Mapping[str, Mapping[str, int]], head: str) -> dict[str, str]:
    """Tasks per node in short: the head's, and the compute nodes' (one figure when all agree,
    else the least and the most)."""
    if not counts:
        return {}

    def text(c: Mapping[str, int]) -> str:
        return f"{c['ran'] + c['skipped']} ({c['ran']} run, {c['changed']} changed)"

    out = {"head": text(counts[head])} if head in counts else {}
    computes = sorted({text(c) for h, c in counts.items() if h != head})
    if computes:
        out["compute"] = computes[0] if len(computes) == 1 else f"{computes[0]} .. {computes[-1]}"
    return out


# --- the peer's playbook and variables (pure) ----------------------------------------------


def _group(inventory: Mapping[str, Any], name: str) -> list[str]:
    children = (inventory.get("all") or {}).get("children") or {}
    return sorted(((children.get(name) or {}).get("hosts") or {}).keys())


def peer_vars(inventory: Mapping[str, Any], munge_key: Path) -> dict[str, Any]:
    """The role's variables for the cluster of a ptc inventory: its compute nodes and one
    partition of them, the controller, accounting through slurmdbd into MariaDB (through its
    socket, as slurmdbd's own Unix user), and the run's munge key."""
    controllers, dbds = _group(inventory, CONTROLLER), _group(inventory, DBD)
    computes = _group(inventory, COMPUTE)
    if len(controllers) != 1 or len(dbds) != 1 or not computes:
        raise ValueError(
            f"the inventory needs one {CONTROLLER}, one {DBD} and some {COMPUTE} "
            f"hosts (has {controllers}, {dbds}, {computes})"
        )
    return {
        # Which of the role's parts each host runs, from ptc's groups.
        "slurm_roles": (
            f"{{{{ (['controller'] if inventory_hostname in groups['{CONTROLLER}'] else [])"
            f" + (['dbd'] if inventory_hostname in groups['{DBD}'] else [])"
            f" + (['exec'] if inventory_hostname in groups['{COMPUTE}'] else []) }}}}"
        ),
        "slurm_munge_key": str(munge_key),
        "slurm_nodes": [{"name": n, "State": "UNKNOWN"} for n in computes],
        "slurm_partitions": [
            {
                "name": "main",
                "Default": True,
                "Nodes": ",".join(computes),
                "State": "UP",
                "MaxTime": "INFINITE",
            }
        ],
        "slurm_config": {
            "SlurmctldHost": controllers[0],
            "AccountingStorageType": "accounting_storage/slurmdbd",
            "AccountingStorageHost": dbds[0],
        },
        "slurmdbd_config": {
            # The role's defaults put slurmctld's key in slurmdbd.conf, where slurmdbd stops
            # at it (unrecognized key); None leaves it out, PidFile is Debian's unit's own.
            "SlurmctldPidFile": None,
            "PidFile": "/run/slurmdbd.pid",
            "DbdHost": dbds[0],
            "StorageType": "accounting_storage/mysql",
            "StorageHost": "localhost",
            "StorageLoc": ACCOUNTING_DB,
            "StorageUser": "slurm",
        },
    }


def peer_playbook(vars_file: Path) -> list[dict[str, Any]]:
    """The peer's playbook: MariaDB with plain Ansible modules on the accounting host (the
    role leaves the database to its user), then the role on every Slurm node."""
    mysql = {"login_unix_socket": MARIADB_SOCKET}
    return [
        {
            "name": "MariaDB for slurmdbd (the benchmark's tasks, not the role's)",
            "hosts": DBD,
            "tasks": [
                {
                    "name": "Install MariaDB and the Python client of the mysql modules",
                    "ansible.builtin.apt": {
                        "name": ["mariadb-server", "python3-pymysql"],
                        "state": "present",
                    },
                },
                {
                    "name": "Run MariaDB",
                    "ansible.builtin.service": {
                        "name": "mariadb",
                        "state": "started",
                        "enabled": True,
                    },
                },
                {
                    "name": "Create the accounting database",
                    "community.mysql.mysql_db": {
                        "name": ACCOUNTING_DB,
                        "state": "present",
                        **mysql,
                    },
                },
                {
                    "name": "Let slurmdbd's Unix user in through the socket",
                    "community.mysql.mysql_user": {
                        "name": "slurm",
                        "host": "localhost",
                        "plugin": "unix_socket",
                        "priv": f"{ACCOUNTING_DB}.*:ALL",
                        "state": "present",
                        "column_case_sensitive": True,
                        **mysql,
                    },
                },
            ],
        },
        {
            "name": "Slurm (the peer's role)",
            "hosts": f"{CONTROLLER}:{DBD}:{COMPUTE}",
            "vars_files": [str(vars_file)],
            "roles": [{"role": PEER_ROLE}],
        },
    ]


# --- the peer's files, made per run ---------------------------------------------------------


def unpack_role(tarball: Path, roles_dir: Path) -> Path:
    """The role from ``tarball`` (one top-level directory) as roles_dir/galaxyproject.slurm."""
    with tarfile.open(tarball) as archive:
        members = archive.getmembers()
        # This Python's tarfile has no extraction filters: only plain files and directories
        # inside the target are let through.
        unsafe = [
            m.name
            for m in members
            if not (m.isfile() or m.isdir())
            or Path(m.name).is_absolute()
            or ".." in Path(m.name).parts
        ]
        if unsafe:
            raise ValueError(f"{tarball}: members outside plain files and folders: {unsafe[:3]}")
        tops = {Path(m.name).parts[0] for m in members if m.name.strip("./")}
        if len(tops) != 1:
            raise ValueError(f"{tarball}: expected one top-level directory, found {sorted(tops)}")
        archive.extractall(roles_dir, members=members)
    role = roles_dir / PEER_ROLE
    (roles_dir / tops.pop()).rename(role)
    if not (role / "tasks" / "main.yml").is_file():
        raise ValueError(f"{tarball}: no tasks/main.yml in its top-level directory")
    return role


def write_munge_key(path: Path) -> None:
    """A fresh random key, readable by its owner only from the moment it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(1024))


@contextlib.contextmanager
def peer_controller(roles_dir: Path) -> Iterator[None]:
    """Runs inside find only the peer's role, with facts as top-level variables (the role
    reads ansible_os_family and the like; ptc's ansible.cfg turns that off)."""
    original = runner._environment

    def environment(mitogen: bool = True) -> dict[str, str]:
        env = original(mitogen)
        env["ANSIBLE_ROLES_PATH"] = str(roles_dir)
        env["ANSIBLE_INJECT_FACT_VARS"] = "True"
        return env

    runner._environment = environment
    try:
        yield
    finally:
        runner._environment = original


# --- the runs -------------------------------------------------------------------------------


def _down(name: str, console: Console) -> None:
    if experiments.exists(name):
        console.print(f"taking down {name}")
        lifecycle.down(name)


def timed_deploy(
    exp: experiments.Experiment, row: Row, playbook: str | Path, mitogen: bool, console: Console
) -> None:
    console.print(f"1+{row.size} {row.image} {row.side}: {row.run} run ...")
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    started, began = time.monotonic(), time.time()
    run_dir: Path | None = None
    try:
        result = runner.deploy(Target.of_experiment(exp), playbook=playbook, mitogen=mitogen)
        run_dir = result.run_dir
        row.changed, row.failed, row.hosts = result.changed, result.failed, len(result.hosts)
    except DeployError as err:
        row.failed = -1
        run_dir = Path(err.run_dir) if err.run_dir else None
        console.print(f"[red]1+{row.size} {row.side} {row.run} failed[/]: {err}")
    finally:
        # ansible-runner takes Ctrl-C over for the run (it cancels the playbook); give it back.
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
    row.seconds = time.monotonic() - started
    if run_dir is not None:
        status = run_dir / "ansible" / "status"
        if status.is_file() and status.read_text().strip() == "canceled":
            raise KeyboardInterrupt
        events = read_events(run_dir)
        row.tasks = {h: asdict(c) for h, c in tasks_per_host(events).items()}
        if row.side == "ptc":
            row.scope_tasks = {
                h: asdict(c) for h, c in tasks_per_host(events, PTC_SCOPE_ROLES).items()
            }
        row.roles = role_split(run_dir, began, time.time())
        row.slowest = list(task_times(events).items())[:12]
    if row.failed < 0:
        raise RuntimeError(f"{row.side}'s {row.run} run failed")
    console.print(
        f"[bold]1+{row.size} {row.image} {row.side} {row.run}[/]: {row.seconds:.1f}s, "
        f"{row.changed} changed; tasks per node {node_kinds(row.tasks, 'head')}"
    )


def check_slurm(exp: experiments.Experiment) -> str:
    """What the head says after a deploy, a few seconds on: its Slurm and database services,
    Slurm's nodes and the clusters accounting knows."""
    time.sleep(5)
    command = (
        "systemctl is-active munge mariadb slurmdbd slurmctld | tr '\\n' ' '; "
        "sinfo -h -o '%D %t' | tr '\\n' ' '; sacctmgr -n -P list cluster format=cluster"
    )
    done = subprocess.run(
        ["ssh", "-F", str(exp.ssh_config_path), "head", command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return " ".join((done.stdout + done.stderr).split())[:300]


def measure(
    size: int, image: str, side: str, args: argparse.Namespace, rows: list[Row], console: Console
) -> None:
    name = f"{args.prefix}-{size}-{image}-{side}"
    with contextlib.ExitStack() as stack:
        stack.callback(_down, name, console)
        console.print(f"bringing up {name} (1+{size}, {image} image)")
        exp = lifecycle.up(
            PROFILE, {"computeNodeCount": str(size)}, name, "local", None, image=image
        )
        playbook: str | Path = "site.yml"
        if side == "peer":
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ptc-peer-")))
            roles_dir = work / "roles"
            unpack_role(args.tarball, roles_dir)
            key = work / "munge.key"
            write_munge_key(key)
            inventory = yaml.safe_load(exp.require_inventory().read_text()) or {}
            vars_file = work / "peer_vars.yml"
            vars_file.write_text(yaml.safe_dump(peer_vars(inventory, key), sort_keys=False))
            playbook = work / "peer.yml"
            playbook.write_text(yaml.safe_dump(peer_playbook(vars_file), sort_keys=False))
            stack.enter_context(peer_controller(roles_dir))
        for run in ("first", "no-op"):
            row = Row(size, image, side, run, 0, 0, 0, 0, os.getloadavg())
            rows.append(row)
            timed_deploy(exp, row, playbook, not args.no_mitogen, console)
            if run == "first":
                row.check = check_slurm(exp)
                console.print(f"  slurm on the head: {row.check}")


# --- the report -----------------------------------------------------------------------------


def _seconds(rows: list[Row], size: int, image: str, side: str, run: str) -> float | None:
    found = [
        r.seconds
        for r in rows
        if (r.size, r.image, r.side, r.run) == (size, image, side, run) and r.failed >= 0
    ]
    return found[0] if found else None


def scope_seconds(row: Row) -> float:
    """ptc's wall time in the roles of the peer's scope."""
    return sum(v for k, v in row.roles.items() if k in PTC_SCOPE_ROLES)


def markdown(rows: list[Row], note: str) -> str:
    out = ["# ptc's roles and the galaxyproject.slurm role, side by side (local testbed)", ""]
    out += [note, ""]
    out += [
        "| cluster | image | side | run | seconds | in munge/slurm roles | changed | failed "
        "| tasks: head | tasks: a compute node | load before |"
    ]
    out += ["|---|---|---|---|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        kinds = node_kinds(r.tasks, "head")
        scope = f"{scope_seconds(r):.1f}" if r.side == "ptc" else "all"
        load = " ".join(f"{x:.1f}" for x in r.load_before)
        out.append(
            f"| 1+{r.size} | {r.image} | {r.side} | {r.run} | {r.seconds:.1f} | {scope} "
            f"| {r.changed} | {r.failed} | {kinds.get('head', '')} "
            f"| {kinds.get('compute', '')} | {load} |"
        )
    out += ["", "Ratios ptc / peer (above 1: the peer is faster):", ""]
    sizes = sorted({r.size for r in rows})
    for size, image, run in itertools.product(sizes, IMAGES, ("first", "no-op")):
        a, b = (_seconds(rows, size, image, side, run) for side in SIDES)
        if a and b:
            out.append(f"- 1+{size} {image} {run}: ptc {a:.1f}s / peer {b:.1f}s = {a / b:.2f}")
    for image, side in itertools.product(IMAGES, SIDES):
        base = _seconds(rows, sizes[0], image, side, "first") if sizes else None
        for size in sizes[1:]:
            other = _seconds(rows, size, image, side, "first")
            if base and other:
                out.append(
                    f"- {side} ({image}): first deploy 1+{size} / 1+{sizes[0]} = {other / base:.2f}"
                )
    out += ["", "## ptc's tasks in the roles of the peer's scope (munge, slurm_accounting, slurm)"]
    out += [""]
    for r in (r for r in rows if r.scope_tasks):
        out.append(f"- 1+{r.size} {r.image} {r.run}: {node_kinds(r.scope_tasks, 'head')}")
    out += ["", "## Where each run's time went (wall seconds)", ""]
    for r in rows:
        top = ", ".join(f"{k} {v:.1f}" for k, v in list(r.roles.items())[:10])
        out.append(f"- 1+{r.size} {r.image} {r.side} {r.run} ({r.seconds:.1f}s), by role: {top}")
        slow = "; ".join(f"{k} {v:.1f}" for k, v in r.slowest)
        out.append(f"  - slowest tasks: {slow}")
        if r.check:
            out.append(f"  - Slurm on the head after it (sinfo; sacctmgr clusters): `{r.check}`")
    return "\n".join(out) + "\n"


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for image, side, (run, style) in itertools.product(
        IMAGES, SIDES, (("first", "-o"), ("no-op", "--s"))
    ):
        points = sorted(
            (r.size, r.seconds)
            for r in rows
            if (r.image, r.side, r.run) == (image, side, run) and r.failed >= 0
        )
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, style, label=f"{side} ({image} image), {run}")
    ax.set_xlabel("compute nodes N (cluster 1+N)")
    ax.set_ylabel("deploy wall time (s)")
    ax.set_title("ptc's roles and galaxyproject.slurm on the same nodes")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_png(fig, path)


def write(out: Path, rows: list[Row], note: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out / "results.json", {"note": note, "rows": [asdict(r) for r in rows]})
    atomic.write_text(out / "results.md", markdown(rows, note))
    plot(rows, out / "peer_deploy.png")


# --- the command ----------------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 16])
    parser.add_argument("--images", nargs="+", choices=IMAGES, default=["bare"])
    parser.add_argument("--tarball", type=Path, default=TARBALL, help="the peer role's source")
    parser.add_argument("--prefix", default="peer", help="experiment name prefix")
    parser.add_argument("--no-mitogen", action="store_true", help="Ansible's linear strategy")
    parser.add_argument("--out", type=Path, help="directory for results.md/.json and the PNG")
    args = parser.parse_args(argv)
    bad = [n for n in args.sizes if not 1 <= n <= MAX_SIZE]
    if bad:
        parser.error(f"--sizes: {bad} not between 1 and {MAX_SIZE} compute nodes")
    # Each cluster is a head and N nodes, one machine each, and runs alone.
    usage = capacity.usage()
    too_big = [n for n in args.sizes if n + 1 > usage.free]
    if too_big:
        parser.error(
            f"--sizes: 1+{max(too_big)} needs {max(too_big) + 1} machines; the local testbed "
            f"has {usage.free} free of {usage.machines} ({usage.describe_holders()}); see "
            "`ptc testbed show`"
        )
    if not args.tarball.is_file():
        parser.error(f"--tarball: no such file: {args.tarball}")
    taken = [f"{args.prefix}-{n}-{i}-{s}" for n in args.sizes for i in args.images for s in SIDES]
    if any(experiments.exists(name) for name in taken):
        parser.error(
            f"--prefix: experiments {[n for n in taken if experiments.exists(n)]} "
            "exist already; take them down or choose another prefix"
        )
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    os.environ.setdefault(
        "CONTAINERS_CONF", str(REPO / "elastic/testbed/backends/local/containers.conf")
    )

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    console = Console(stderr=True)
    rows: list[Row] = []
    started = (
        f"machine: {os.cpu_count()} CPUs, nodes are containers sharing them; strategy "
        f"{'linear' if args.no_mitogen else runner.STRATEGY} on both sides; started "
        f"{datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    note = started
    try:
        for size, image in itertools.product(args.sizes, args.images):
            for side in SIDES:
                try:
                    measure(size, image, side, args, rows, console)
                except (RuntimeError, PtcError) as err:
                    console.print(f"[red]1+{size} {image} {side}[/]: {err}")
                note = (
                    started
                    + "; load average after the last cluster "
                    + " ".join(f"{x:.2f}" for x in os.getloadavg())
                )
                if args.out and rows:
                    write(args.out, rows, note)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]: what it started is taken down")
        sys.exit(130)
    table = Table(title="ptc's roles and galaxyproject.slurm (local testbed, this machine)")
    for column in (
        "cluster",
        "image",
        "side",
        "run",
        "seconds",
        "changed",
        "tasks: head",
        "tasks: compute",
    ):
        table.add_column(column)
    for r in rows:
        kinds = node_kinds(r.tasks, "head")
        table.add_row(
            f"1+{r.size}",
            r.image,
            r.side,
            r.run,
            f"{r.seconds:.1f}",
            str(r.changed),
            kinds.get("head", ""),
            kinds.get("compute", ""),
        )
    Console().print(table)
    Console().print(note)


if __name__ == "__main__":
    main()
