"""The campaign engine: a campaign's runs go to Slurm as job arrays, and every run becomes a row.

Runs of one shape (nodes, ranks per node, threads) share a job array, submitted with a bound on
how many of its tasks run at once (``%max_concurrent``). Each array task runs one run in its own
directory on the cluster's shared /home and records there the benchmark's output, its wall time
and the first node's facts. ptc then polls ``sacct`` and turns every finished task, failed or
not, into a dataset row.

A campaign can be run again: runs with a good row are skipped, arrays submitted by an
interrupted invocation (kept in ``NAME.state.json`` next to the dataset) are waited for and
collected rather than submitted twice, and failed runs are run again (their failed rows stay, as
evidence). Progress goes to ``on_event`` (topic ``campaign``): done, running, failed, queued.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from elastic import atomic
from elastic.bench import dataset, hpcc, hpgmg, slurm_job
from elastic.bench.spec import Campaign, Run
from elastic.errors import InputError, Interrupted, PtcError, RemoteError
from elastic.events import OnEvent, Reporter
from elastic.node_paths import HPCC_PREFIX, HPGMG_PREFIX
from elastic.paths import REPO_ROOT
from elastic.slurm_time import parse_duration

OUTPUT_LIMIT = 200_000  # bytes of a run's output read back
SETTLE_S = 30.0  # how long a finished job's step usage may take to reach sacct


class Target(Protocol):
    """What a campaign needs of an experiment (``elastic.testbed.experiment.Experiment``)."""

    @property
    def name(self) -> str: ...

    @property
    def testbed(self) -> str: ...

    @property
    def site(self) -> str | None: ...

    @property
    def ssh_config_path(self) -> Path: ...


@dataclass
class Tally:
    total: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    running: int = 0
    queued: int = 0

    def describe(self) -> str:
        return (
            f"done {self.done}, running {self.running}, failed {self.failed}, queued {self.queued}"
        )


@dataclass
class Result:
    """What a campaign invocation did: rows it added, and the counts."""

    dataset: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    jobs: list[str] = field(default_factory=list)
    wall_s: float = 0.0


@dataclass(frozen=True)
class Batch:
    """One submission: a job array (or a single job) and the runs of its tasks, by index."""

    job_id: str
    workdir: str
    run_ids: tuple[str, ...]
    array: bool = True

    def task_job_id(self, index: int) -> str:
        return f"{self.job_id}_{index}" if self.array else self.job_id


# --- what a run executes -------------------------------------------------------------------


def run_command(run: Run, campaign: Campaign) -> tuple[str, str]:
    """(preparation, benchmark command) for one run; the launcher prefixes the command."""
    config, opts = run.config, campaign.options
    if run.benchmark == "hpgmg-fe":
        return "", hpgmg.fe_command(f"{HPGMG_PREFIX}/bin/hpgmg-fe", config, opts)
    if run.benchmark == "hpgmg-fv":
        return "", hpgmg.fv_command(f"{HPGMG_PREFIX}/bin/hpgmg-fv", config, opts)
    if run.benchmark == "hpcc":
        n, nb = int(config["n"]), int(config.get("nb", 80))
        return hpcc.deck_command(HPCC_PREFIX, n, nb, run.ranks), "hpcc"
    raise InputError(f"{campaign.source}: benchmark: unknown {run.benchmark!r}")


def buildinfo_path(benchmark: str) -> str:
    return f"{HPGMG_PREFIX}/BUILDINFO.json" if benchmark.startswith("hpgmg") else ""


def job_script(campaign: Campaign, runs: Sequence[Run], *, array: bool) -> str:
    """One batch script for runs of one shape; task i runs ``runs[i]`` in ``$PWD/RUN_ID``."""
    nodes, rpn, threads = runs[0].shape
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=ptc-{campaign.name}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={rpn}",
        f"#SBATCH --cpus-per-task={threads}",
        f"#SBATCH --time={campaign.time_limit}",
        "#SBATCH --output=slurm-%A_%a.out" if array else "#SBATCH --output=slurm-%j.out",
        # Sample usage every second: with Slurm's default (30 s), runs shorter than that
        # report a MaxRSS of 0.
        "#SBATCH --acctg-freq=task=1",
    ]
    if campaign.partition:
        lines.append(f"#SBATCH --partition={campaign.partition}")
    if campaign.exclusive:
        lines.append("#SBATCH --exclusive")
    if campaign.singleton:
        lines.append("#SBATCH --dependency=singleton")
    if array:
        lines.append(f"#SBATCH --array=0-{len(runs) - 1}%{campaign.max_concurrent}")
    lines += ["set -u", 'task="${PTC_TASK:-${SLURM_ARRAY_TASK_ID:-0}}"', 'case "$task" in']
    for index, run in enumerate(runs):
        prepare, command = run_command(run, campaign)
        lines.append(
            f"  {index}) run={shlex.quote(run.run_id)}; prepare={shlex.quote(prepare)};"
            f" command={shlex.quote(command)};;"
        )
    lines += ['  *) echo "no task $task" >&2; exit 2;;', "esac"]
    info = buildinfo_path(runs[0].benchmark)
    lines += [
        'dir="$PWD/$run"; rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"',
        "{",
        '  echo "node_hostname=$(hostname)"',
        "  echo \"cpu_model=$(lscpu | sed -n 's/^Model name: *//p' | head -n1)\"",
        '  echo "cpu_cores=$(nproc --all)"',
        "  echo \"mem_total_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)\"",
        '  echo "kernel=$(uname -r)"',
        # slurm.conf: /etc/slurm, or slurmd's cache of it on configless nodes.
        '  for conf in "${SLURM_CONF:-}" /etc/slurm/slurm.conf /run/slurm/conf/slurm.conf; do',
        '    if [ -n "$conf" ] && [ -r "$conf" ]; then',
        '      echo "slurm_conf_sha256=$(sha256sum "$conf" | cut -d\' \' -f1)"; break',
        "    fi",
        "  done",
        "} > facts.txt",
        f"if [ -r {info} ]; then cp {info} buildinfo.json; fi" if info else ":",
        f"export OMP_NUM_THREADS={threads}",
        'if [ -n "$prepare" ]; then sh -c "$prepare" > prepare.txt 2>&1 || '
        '{ echo "command_exit=97" > meta.txt; exit 97; }; fi',
        "start=$(date +%s.%N)",
        f"{campaign.launcher} $command > out.txt 2> err.txt; rc=$?",
        "end=$(date +%s.%N)",
        'echo "command_exit=$rc start=$start end=$end" > meta.txt',
        "exit $rc",
        "",
    ]
    return "\n".join(lines)


# --- reading a finished run back -----------------------------------------------------------


def _keyvalues(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in text.replace("\n", " ").split(" "):
        key, sep, value = token.partition("=")
        if sep:
            out[key] = value
    return out


def _facts(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


MARK = "@@ptc-file "


def read_run_files(remote: slurm_job.Remote, workdir: str, run_id: str) -> dict[str, str]:
    """The run directory's small files in one SSH round trip."""
    d = shlex.quote(f"{workdir}/{run_id}")
    names = ["meta.txt", "facts.txt", "buildinfo.json", "out.txt", "err.txt", "hpccoutf.txt"]
    script = "; ".join(
        f"echo '{MARK}{n}'; tail -c {OUTPUT_LIMIT} {d}/{n} 2>/dev/null || true" for n in names
    )
    text = remote.run(script)
    files: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith(MARK):
            current = line[len(MARK) :].strip()
            files[current] = ""
        elif current is not None:
            files[current] += line
    return files


def _float(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "Unknown"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def make_row(
    run: Run,
    campaign: Campaign,
    target: Target,
    batch: Batch,
    index: int,
    acct: Mapping[str, str],
    usage: slurm_job.StepUsage | None,
    files: Mapping[str, str],
    provenance: Mapping[str, str],
    attempt: int,
) -> dict[str, Any]:
    meta = _keyvalues(files.get("meta.txt", ""))
    facts = _facts(files.get("facts.txt", ""))
    try:
        build = json.loads(files.get("buildinfo.json") or "{}")
    except json.JSONDecodeError:
        build = {}
    start, end = _float(meta.get("start")), _float(meta.get("end"))
    _, command = run_command(run, campaign)
    runtime = end - start if start is not None and end is not None else None
    row: dict[str, Any] = {
        "campaign": campaign.name,
        "run_id": run.run_id,
        "config_id": run.config_id,
        "repeat": run.repeat,
        "order": run.order,
        "attempt": attempt,
        "benchmark": run.benchmark,
        **{k: v for k, v in run.config.items()},
        "ranks": run.ranks,
        "cores": run.cores,
        "runtime_s": runtime,
        "cost_core_s": runtime * run.cores if runtime is not None else None,
        "command_exit": int(meta["command_exit"]) if "command_exit" in meta else None,
        "job_id": batch.task_job_id(index),
        "state": acct.get("State", "UNKNOWN"),
        "exit_code": acct.get("ExitCode", ""),
        "elapsed_s": _float(acct.get("ElapsedRaw")),
        "total_cpu_s": usage.total_cpu_s
        if usage is not None and usage.total_cpu_s is not None
        else parse_duration(acct.get("TotalCPU", "")),
        "max_rss_bytes": slurm_job.parse_size_bytes(
            (usage.max_rss if usage is not None else None) or acct.get("MaxRSS", "")
        ),
        "alloc_cpus": int(acct["AllocCPUS"]) if acct.get("AllocCPUS", "").isdigit() else None,
        "nodelist": acct.get("NodeList", ""),
        # sacct reads 0 when no acct_gather_energy plugin measures: that is "not measured".
        "consumed_energy_j": _float(acct.get("ConsumedEnergyRaw")) or None,
        "submit_time": acct.get("Submit", ""),
        "start_time": acct.get("Start", ""),
        "end_time": acct.get("End", ""),
        "node_hostname": facts.get("node_hostname", ""),
        "cpu_model": facts.get("cpu_model", ""),
        "cpu_cores": int(facts["cpu_cores"]) if facts.get("cpu_cores", "").isdigit() else None,
        "mem_total_kb": int(facts["mem_total_kb"])
        if facts.get("mem_total_kb", "").isdigit()
        else None,
        "kernel": facts.get("kernel", ""),
        "slurm_conf_sha256": facts.get("slurm_conf_sha256", ""),
        "benchmark_commit": str(build.get("hpgmg_commit", "")),
        "benchmark_cflags": str(build.get("cflags", "")),
        "command": f"{campaign.launcher} {command}",
        "petsc_version": str(build.get("petsc_version", "")),
        **provenance,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "experiment": target.name,
        "testbed": target.testbed,
        "site": target.site or "",
        "workdir": f"{batch.workdir}/{run.run_id}",
        "error": "",
    }
    try:
        if run.benchmark == "hpgmg-fe":
            row.update(hpgmg.parse_fe(files.get("out.txt", ""), row["workdir"] + "/out.txt"))
        elif run.benchmark == "hpgmg-fv":
            row.update(hpgmg.parse_fv(files.get("out.txt", ""), row["workdir"] + "/out.txt"))
        else:
            figures = hpcc.parse_summary(
                files.get("hpccoutf.txt", ""), row["workdir"] + "/hpccoutf.txt"
            )
            row.update(figures)
    except PtcError as err:
        tail = files.get("err.txt", "").strip().splitlines()[-3:]
        row["error"] = str(err) + (f" (stderr: {' | '.join(tail)})" if tail else "")
    if row["state"] != "COMPLETED" and not row["error"]:
        row["error"] = f"Slurm state {row['state']}, exit code {row['exit_code']}"
    return row


def is_good(row: Mapping[str, Any]) -> bool:
    return row.get("state") == "COMPLETED" and not row.get("error")


def ptc_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


# --- the engine ----------------------------------------------------------------------------


def state_path(out: Path) -> Path:
    return out.with_suffix(".state.json")


def _load_batches(out: Path) -> list[Batch]:
    path = state_path(out)
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    return [
        Batch(b["job_id"], b["workdir"], tuple(b["run_ids"]), bool(b.get("array", True)))
        for b in data.get("batches", [])
    ]


def _save_batches(out: Path, batches: Iterable[Batch]) -> None:
    atomic.write_json(
        state_path(out),
        {
            "batches": [
                {"job_id": b.job_id, "workdir": b.workdir, "run_ids": list(b.run_ids),
                 "array": b.array}
                for b in batches
            ]
        },
    )  # fmt: skip


def existing_rows(out: Path) -> pd.DataFrame:
    return dataset.load(out) if out.exists() else pd.DataFrame()


def plan(campaign: Campaign, out: Path) -> tuple[list[Run], list[Run]]:
    """(all runs, runs still missing a good row) in the campaign's order."""
    runs = campaign.runs()
    frame = existing_rows(out)
    good: set[str] = set()
    if len(frame):
        ok = frame[(frame["state"] == "COMPLETED") & (frame["error"].fillna("") == "")]
        good = set(ok["run_id"])
    return runs, [r for r in runs if r.run_id not in good]


def group_by_shape(runs: Sequence[Run]) -> list[list[Run]]:
    groups: dict[tuple[int, int, int], list[Run]] = {}
    for run in runs:
        groups.setdefault(run.shape, []).append(run)
    return list(groups.values())


def run(
    target: Target,
    campaign: Campaign,
    out: Path,
    on_event: OnEvent | None = None,
    *,
    poll_s: float = 3.0,
    timeout_s: float = 6 * 3600,
    only: Sequence[Run] | None = None,
) -> Result:
    """Run what is missing of ``campaign`` on ``target``'s cluster; rows go to ``out``.

    ``only`` restricts the invocation to the given runs (active learning submits one at a time).
    """
    started = time.monotonic()
    report = Reporter("campaign", on_event)
    remote = slurm_job.Remote(target.ssh_config_path, "head")
    all_runs, missing = plan(campaign, out)
    if only is not None:
        wanted = {r.run_id for r in only}
        missing = [r for r in only if r.run_id in wanted]
        all_runs = list(only)
    by_id = {r.run_id: r for r in all_runs}
    frame = existing_rows(out)
    attempts: dict[str, int] = (
        {str(k): int(v) for k, v in frame["run_id"].value_counts().items()} if len(frame) else {}
    )
    result = Result(out)
    tally = result.tally
    tally.total = len(all_runs)
    tally.skipped = tally.total - len(missing)
    provenance = {"ptc_commit": ptc_commit()}

    # Arrays an interrupted invocation submitted: collect them instead of submitting again.
    earlier = [b for b in _load_batches(out) if any(r in by_id for r in b.run_ids)]
    recorded = set(frame["run_id"]) if len(frame) else set()
    pending = [b for b in earlier if any(r not in recorded for r in b.run_ids)]
    in_flight = {r for b in pending for r in b.run_ids}
    to_submit = [r for r in missing if r.run_id not in in_flight]
    report.begin(
        f"{campaign.name}: {len(missing)} of {tally.total} runs to do "
        f"({tally.skipped} already in the dataset, {len(in_flight)} submitted earlier)",
        total=len(missing),
        campaign=campaign.name,
    )
    batches = list(pending)
    try:
        if to_submit:
            remote.run(slurm_job.as_user(campaign.user, f"mkdir -p {shlex.quote(_base(campaign))}"))
        if campaign.arrays:
            for group in group_by_shape(to_submit):
                batch = _submit(remote, campaign, group, array=True)
                batches.append(batch)
                _save_batches(out, [*earlier, *[b for b in batches if b not in earlier]])
                report.status(
                    f"submitted job array {batch.job_id}: {len(group)} runs of shape "
                    f"{group[0].nodes}N x {group[0].ranks_per_node} ranks x {group[0].threads} thr",
                    job_id=batch.job_id,
                )
            result.jobs = [b.job_id for b in batches]
            _collect(remote, campaign, target, batches, by_id, out, attempts, provenance,
                     result, report, poll_s, timeout_s)  # fmt: skip
        else:
            # One sbatch at a time (the baseline the arrays are measured against).
            _collect(remote, campaign, target, pending, by_id, out, attempts, provenance,
                     result, report, poll_s, timeout_s)  # fmt: skip
            for one in to_submit:
                batch = _submit(remote, campaign, [one], array=False)
                batches.append(batch)
                _save_batches(out, [*earlier, *[b for b in batches if b not in earlier]])
                result.jobs.append(batch.job_id)
                _collect(remote, campaign, target, [batch], by_id, out, attempts, provenance,
                         result, report, poll_s, timeout_s)  # fmt: skip
    except KeyboardInterrupt:
        # The arrays are Slurm's now: they keep running, and the state file lets the next
        # invocation collect them. Say so instead of ending as if the campaign were done.
        raise Interrupted(
            f"campaign {campaign.name} interrupted: {tally.done + tally.failed} of "
            f"{len(missing)} runs recorded; "
            + (
                f"Slurm jobs {', '.join(b.job_id for b in batches)} keep running and are "
                f"recorded in {state_path(out)}; run the same command again to collect them"
                if batches
                else "nothing was submitted"
            )
        ) from None
    result.wall_s = time.monotonic() - started
    report.end(
        f"{campaign.name}: {tally.done} done, {tally.failed} failed, {tally.skipped} skipped "
        f"in {result.wall_s:.0f}s",
        done=tally.done,
        failed=tally.failed,
    )
    return result


def _base(campaign: Campaign) -> str:
    return f"/home/{campaign.user}/ptc-campaigns/{campaign.name}"


def _submit(
    remote: slurm_job.Remote, campaign: Campaign, runs: Sequence[Run], *, array: bool
) -> Batch:
    script = job_script(campaign, runs, array=array)
    workdir = _base(campaign)
    job_id = slurm_job.submit(remote, campaign.user, workdir, script)
    return Batch(job_id, workdir, tuple(r.run_id for r in runs), array)


def _collect(
    remote: slurm_job.Remote,
    campaign: Campaign,
    target: Target,
    batches: Sequence[Batch],
    by_id: Mapping[str, Run],
    out: Path,
    attempts: dict[str, int],
    provenance: Mapping[str, str],
    result: Result,
    report: Reporter,
    poll_s: float,
    timeout_s: float,
) -> None:
    """Poll sacct until every task of ``batches`` ended; each ended task becomes a row."""
    waiting = {
        (b, i): b.task_job_id(i) for b in batches for i, r in enumerate(b.run_ids) if r in by_id
    }
    tally = result.tally
    deadline = time.monotonic() + timeout_s
    ended_at: dict[tuple[Batch, int], float] = {}
    missing_total = tally.total - tally.skipped
    while waiting:
        if time.monotonic() > deadline:
            raise PtcError(f"campaign {campaign.name}: {len(waiting)} runs still not finished")
        acct = slurm_job.sacct(remote, sorted({b.job_id for b, _ in waiting}))
        finished = [(key, acct[jid]) for key, jid in waiting.items()
                    if jid in acct and acct[jid]["State"] in slurm_job.TERMINAL]  # fmt: skip
        running = sum(
            1 for jid in waiting.values() if acct.get(jid, {}).get("State") in slurm_job.RUNNING
        )
        usage = slurm_job.sacct_steps(remote, [waiting[k] for k, _ in finished])
        # A job's usage reaches sacct shortly after its end: wait for it (a while at most).
        ended = []
        now = time.monotonic()
        for key, line in finished:
            first_seen = ended_at.setdefault(key, now)
            never_started = line.get("Start", "") in ("", "None", "Unknown")
            step = usage.get(waiting[key])
            if never_started or (step is not None and step.settled) or now - first_seen > SETTLE_S:
                ended.append((key, line))
        rows = []
        for (batch, index), line in ended:
            run = by_id[batch.run_ids[index]]
            try:
                files = read_run_files(remote, batch.workdir, run.run_id)
            except RemoteError as err:
                files = {"err.txt": str(err)}
            attempts[run.run_id] = attempts.get(run.run_id, 0) + 1
            row = make_row(run, campaign, target, batch, index, line,
                           usage.get(waiting[(batch, index)]), files, provenance,
                           attempts[run.run_id])  # fmt: skip
            rows.append(row)
            del waiting[(batch, index)]
            if is_good(row):
                tally.done += 1
            else:
                tally.failed += 1
        if rows:
            dataset.append(out, rows)
            result.rows.extend(rows)
        tally.running = running
        tally.queued = max(0, missing_total - tally.done - tally.failed - running)
        report.progress(
            tally.done + tally.failed,
            missing_total,
            f"{campaign.name}: {tally.describe()}",
            succeeded=tally.done,
            running=tally.running,
            failed=tally.failed,
            queued=tally.queued,
        )
        if waiting:
            time.sleep(poll_s)


Submit = Callable[[Campaign, Sequence[Run]], Result]
