"""``ptc sim run ... --on NAME``: the sweep as a Slurm job array on a cluster ptc built.

What goes where:

- **Python packages.** The tasks need numpy, pandas and pyarrow at exactly the versions this
  machine runs, so that every number comes out as in a local run. ptc downloads their wheels
  here once (``pip download`` for the head's Python version and architecture, into
  ``~/.cache/ptc/sim-wheels/DIGEST``), unpacks them on the head into ``SIM_SITE_ROOT/site-DIGEST``
  (``elastic.node_paths``: on the software share, so every node sees them; DIGEST names the
  pinned versions and the Python), and reuses that directory for every later run. Nodes need
  no access to PyPI, no pip and no virtualenv: the tasks put it on ``PYTHONPATH``.
- **Code and trace.** Each run gets a directory on the shared /home of the cluster user,
  ``/home/USER/ptc-sim/RUN``: this checkout's ``elastic`` package (so the nodes run the code
  that ran here, whatever commit the node's repository holds), the trace, and ``job.json``
  (the spec and the parts, ``elastic.sim.worker``).
- **Tasks.** One array task per part (``elastic.sim.parts.split``: blocks of policies x grace
  periods), each on one CPU, writes its samples into ``pieces/`` there.
- **Back here.** When every task has finished, the pieces come back in one SSH round trip, are
  merged (``elastic.sim.parts.merge``) and go through the same ``finish`` as a local run, so
  ``samples.parquet`` holds what a local run writes. The run directory is removed unless
  ``keep`` is set, or a task failed (then its log is quoted in the error and kept).

Events: topic ``sim`` (stages, as a local run) and ``sim-cluster`` (begin with the number of
tasks, progress as tasks finish, end).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from elastic import node_paths, paths
from elastic.bench import slurm_job
from elastic.errors import InputError, PtcError, RemoteError, RemoteTimeout
from elastic.events import OnEvent, Reporter
from elastic.sim.parts import Part, merge, split
from elastic.sim.results import read_result
from elastic.sim.run import RunResult, RunSpec, finish, schedule_workload, spec_dict
from elastic.sim.sweep import SweepResult
from elastic.sim.worker import JOB_FILE, PIECES, job_document

# What the tasks import, pinned to the versions installed here (those not installed are left
# to pip). matplotlib is not among them: plots are drawn here, after the merge.
RUNTIME_PACKAGES = ("numpy", "pandas", "pyarrow", "python-dateutil", "tzdata", "six")
RUN_ROOT = "ptc-sim"  # under the cluster user's home


class Target(Protocol):
    """What a cluster run needs of an experiment (``elastic.testbed.experiment.Experiment``)."""

    @property
    def name(self) -> str: ...

    @property
    def ssh_config_path(self) -> Path: ...


@dataclass(frozen=True)
class ClusterSpec:
    tasks: int | None = None  # None: one per policy
    user: str = "ptc"
    partition: str | None = None
    time_limit: str = "2:00:00"
    mem_mb: int | None = None  # per task; None: the partition's default
    keep: bool = False
    poll_s: float = 3.0
    timeout_s: float = 6 * 3600.0
    head: str = "head"

    def __post_init__(self) -> None:
        if self.tasks is not None and self.tasks < 1:
            raise InputError(f"--tasks must be >= 1, got {self.tasks}")
        if not re.fullmatch(r"[a-z_][a-z0-9_-]*", self.user):
            raise InputError(f"cluster user {self.user!r} is not a user name")
        if self.mem_mb is not None and self.mem_mb < 1:
            raise InputError(f"--mem-mb must be >= 1, got {self.mem_mb}")


@dataclass(frozen=True)
class Runtime:
    site: str  # directory on the cluster to put on PYTHONPATH
    pins: tuple[str, ...]
    built: bool  # this call unpacked it (else it was there)


def run_on(
    target: Target,
    spec: RunSpec,
    out: Path,
    cluster: ClusterSpec | None = None,
    on_event: OnEvent | None = None,
) -> RunResult:
    """Like ``elastic.sim.run.run``, with the sweep run as a job array on ``target``."""
    cluster = cluster or ClusterSpec()
    report = Reporter("sim", on_event)
    began = time.perf_counter()
    if not spec.workload.path.is_file():
        raise InputError(f"trace {spec.workload.path}: no such file")
    sim = schedule_workload(spec, on_event)  # here too: it checks the input before any upload
    parts = split(
        spec.sweep.policies, spec.sweep.grace_periods, cluster.tasks or len(spec.sweep.policies)
    )
    remote = slurm_job.Remote(target.ssh_config_path, cluster.head)
    runtime = ensure_runtime(remote, on_event)
    run_dir = (
        f"/home/{cluster.user}/{RUN_ROOT}/{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    )
    report.status(f"{target.name}: staging code, trace and {len(parts)} parts in {run_dir}")
    remote_spec = replace(
        spec, workload=replace(spec.workload, path=Path(f"{run_dir}/{spec.workload.path.name}"))
    )
    bundle = _run_bundle(spec.workload.path, job_document(spec_dict(remote_spec), parts))
    _ssh_bytes(
        remote,
        slurm_job.as_user(
            cluster.user, f"mkdir -p {_q(run_dir)}/{PIECES} && tar -x -C {_q(run_dir)}"
        ),
        bundle,
    )
    submitted = time.perf_counter()
    job_id = slurm_job.submit(
        remote, cluster.user, run_dir, job_script(run_dir, runtime.site, len(parts), cluster)
    )
    report.status(f"{target.name}: job array {job_id}, {len(parts)} tasks")
    _wait(remote, job_id, run_dir, parts, cluster, on_event)
    pieces = _fetch_pieces(remote, run_dir, len(parts))
    merged = merge(pieces, tuple(p.upper() for p in spec.sweep.policies), spec.sweep.grace_periods)
    sweep_s = time.perf_counter() - submitted
    report.status(
        f"{target.name}: {len(parts)} parts merged; sweep on the cluster took {sweep_s:.1f} s"
    )
    if not cluster.keep:
        parent = run_dir.rsplit("/", 1)[0]
        remote.run(
            slurm_job.as_user(
                cluster.user,
                f"rm -rf {_q(run_dir)} && rmdir --ignore-fail-on-non-empty {_q(parent)}",
            )
        )
    info: dict[str, object] = {
        "on": target.name,
        "job_id": job_id,
        "tasks": len(parts),
        "parts": [p.describe() for p in parts],
        "runtime": list(runtime.pins),
    }
    return finish(spec, out, sim, merged, sweep_s, began, on_event, info)


def job_script(run_dir: str, site: str, tasks: int, cluster: ClusterSpec) -> str:
    """The batch script: task i runs part i of the job in ``run_dir``."""
    lines = [
        "#!/bin/bash",
        "#SBATCH --job-name=ptc-sim",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --cpus-per-task=1",
        f"#SBATCH --time={cluster.time_limit}",
        f"#SBATCH --array=0-{tasks - 1}",
        f"#SBATCH --output={run_dir}/slurm-%A_%a.out",
    ]
    if cluster.partition:
        lines.append(f"#SBATCH --partition={cluster.partition}")
    if cluster.mem_mb:
        lines.append(f"#SBATCH --mem={cluster.mem_mb}M")
    lines += [
        "set -eu",
        f"export PYTHONPATH={_q(run_dir)}/code:{_q(site)}",
        "export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1",
        f'exec python3 -m elastic.sim.worker {_q(run_dir)} "$SLURM_ARRAY_TASK_ID"',
        "",
    ]
    return "\n".join(lines)


# --- the Python packages on the cluster ----------------------------------------------------


def runtime_pins() -> tuple[str, ...]:
    pins = []
    for name in RUNTIME_PACKAGES:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(pins)


def ensure_runtime(remote: slurm_job.Remote, on_event: OnEvent | None = None) -> Runtime:
    """The site directory with this machine's numpy/pandas/pyarrow for the head's Python."""
    report = Reporter("sim", on_event)
    python = remote.run(
        "python3 -c 'import platform, sys; print(\"%d.%d\" % sys.version_info[:2], platform.machine())'"
    ).split()
    if len(python) != 2:
        raise RemoteError(
            f"{remote.host}: cannot tell python3's version: {' '.join(python)!r}",
            host=remote.host,
            command="python3",
            returncode=0,
            output=" ".join(python),
        )
    version, machine = python
    pins = runtime_pins()
    digest = hashlib.sha256(json.dumps([version, machine, *pins]).encode()).hexdigest()[:12]
    site = f"{node_paths.SIM_SITE_ROOT}/site-{digest}"
    if remote.run(f"test -f {site}/.complete && echo yes || echo no").strip() == "yes":
        return Runtime(site, pins, built=False)
    wheels = _download_wheels(version, machine, pins, digest, on_event)
    report.status(f"{remote.host}: unpacking {len(wheels)} wheels into {site}")
    staging = f"{node_paths.SIM_SITE_ROOT}/.staging-{secrets.token_hex(4)}"
    unpack = (
        "import glob, sys, zipfile\n"
        "for wheel in sorted(glob.glob(sys.argv[1] + '/*.whl')):\n"
        "    zipfile.ZipFile(wheel).extractall(sys.argv[2])\n"
    )
    command = (
        f"set -e; mkdir -p {staging}/wheels {staging}/site; tar -x -C {staging}/wheels; "
        f"python3 -c {_q(unpack)} {staging}/wheels {staging}/site; "
        f"chmod -R a+rX {staging}/site; touch {staging}/site/.complete; "
        f"mv -T {staging}/site {site} 2>/dev/null || true; rm -rf {staging}; "
        f"test -f {site}/.complete"
    )
    _ssh_bytes(remote, command, _tar_files({w.name: w for w in wheels}), timeout=1800)
    return Runtime(site, pins, built=True)


def wheel_cache() -> Path:
    """Downloaded wheels, kept across experiments and ``$PTC_HOME``s (``$XDG_CACHE_HOME``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "ptc" / "sim-wheels"


def _download_wheels(
    version: str, machine: str, pins: Sequence[str], digest: str, on_event: OnEvent | None
) -> list[Path]:
    cache = wheel_cache() / digest
    if not (cache / ".complete").is_file():
        Reporter("sim", on_event).status(
            f"downloading wheels for Python {version} on {machine}: {', '.join(pins)}"
        )
        cache.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", version,
            "--platform", f"manylinux2014_{machine}", "--platform", f"manylinux_2_28_{machine}",
            "--dest", str(cache), *pins,
        ]  # fmt: skip
        proc = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise PtcError(f"pip download {' '.join(pins)} failed: {proc.stderr.strip()[-2000:]}")
        (cache / ".complete").touch()
    return sorted(cache.glob("*.whl"))


# --- staging, waiting, fetching ------------------------------------------------------------


def _run_bundle(trace: Path, job: dict[str, object]) -> bytes:
    """tar: code/elastic/**.py from this checkout, the trace, job.json."""
    files: dict[str, Path | bytes] = {}
    package = paths.REPO_ROOT / "elastic"
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" not in path.parts:
            files[f"code/elastic/{path.relative_to(package)}"] = path
    files[trace.name] = trace
    files[JOB_FILE] = json.dumps(job, indent=1).encode()
    return _tar_files(files)


def _tar_files(files: dict[str, Path | bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, source in files.items():
            data = source if isinstance(source, bytes) else source.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _wait(
    remote: slurm_job.Remote,
    job_id: str,
    run_dir: str,
    parts: Sequence[Part],
    cluster: ClusterSpec,
    on_event: OnEvent | None,
) -> None:
    report = Reporter("sim-cluster", on_event)
    total = len(parts)
    report.begin(f"job {job_id}: {total} tasks", total=total, job_id=job_id)
    deadline = time.monotonic() + cluster.timeout_s
    states: dict[int, str] = {}
    while True:
        for job, row in slurm_job.sacct(remote, [job_id]).items():
            index = job.partition("_")[2]
            if index.isdigit():
                states[int(index)] = row["State"]
        finished = [t for t, s in states.items() if s in slurm_job.TERMINAL]
        running = sum(1 for s in states.values() if s in slurm_job.RUNNING)
        report.progress(
            len(finished), total, f"job {job_id}: {len(finished)} done, {running} running"
        )
        if len(finished) == total:
            break
        if time.monotonic() > deadline:
            raise RemoteTimeout(
                f"{remote.host}: job array {job_id} not finished after {cluster.timeout_s:.0f} s "
                f"({len(finished)} of {total} tasks); it keeps running (scancel {job_id})",
                host=remote.host, command=f"sacct -j {job_id}", timeout_s=cluster.timeout_s,
            )  # fmt: skip
        time.sleep(cluster.poll_s)
    failed = sorted(t for t, s in states.items() if s != "COMPLETED")
    if failed:
        task = failed[0]
        log = remote.run(f"tail -n 30 {_q(run_dir)}/slurm-{job_id}_{task}.out 2>/dev/null || true")
        report.end(f"job {job_id}: {len(failed)} of {total} tasks failed", failed=failed)
        raise RemoteError(
            f"{remote.host}: job {job_id}_{task} ({parts[task].describe()}) ended "
            f"{states[task]}; {len(failed)} of {total} tasks failed; files kept in {run_dir}. "
            f"Its log ends:\n{log.strip()}",
            host=remote.host, command=f"sbatch (job {job_id})", returncode=1, output=log,
        )  # fmt: skip
    report.end(f"job {job_id}: {total} tasks done")


def _fetch_pieces(remote: slurm_job.Remote, run_dir: str, tasks: int) -> list[SweepResult]:
    data = _ssh_bytes(remote, f"tar -c -C {_q(run_dir)}/{PIECES} .", b"", timeout=1800)
    wanted = {f"part-{task}.parquet": task for task in range(tasks)}
    with tempfile.TemporaryDirectory(prefix="ptc-sim-pieces-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():  # only the expected regular files, by name
                name = Path(member.name).name
                source = tar.extractfile(member) if member.isfile() else None
                if name in wanted and source is not None:
                    (Path(tmp) / name).write_bytes(source.read())
        pieces = []
        for name in wanted:
            path = Path(tmp) / name
            if not path.is_file():
                raise PtcError(f"a task finished but left no {PIECES}/{name} in {run_dir}")
            pieces.append(read_result(path))
    return pieces


def _ssh_bytes(remote: slurm_job.Remote, command: str, data: bytes, timeout: float = 600) -> bytes:
    """Run ``command`` on the remote with ``data`` on stdin; its stdout, as bytes."""
    return remote.run_bytes(command, data, timeout=timeout)


def _q(text: str) -> str:
    return shlex.quote(text)
