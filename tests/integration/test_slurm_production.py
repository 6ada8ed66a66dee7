"""Acceptance for a production-grade Slurm on the local testbed.

One 1+2 experiment for the module, deployed once with a QOS, partition limits, a Prolog and an
Epilog set from variables (and deployed again to show nothing changes). Then, on real daemons:
a user without an association is refused; a QOS limit and a partition limit refuse jobs at
submission; memory and cores are enforced by the cgroup plugins; fair-share usage shows in
sshare and sprio; slurmrestd answers with a JWT (slurmctld and slurmdbd endpoints) and refuses
without; a node whose share breaks drains with the health check's reason and returns when the
share is repaired.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from naming import experiment_name
from remote import ssh

from elastic.testbed.backends.local import podman

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Overridable so that parallel developers' runs on one machine do not collide.
NAME = experiment_name("slurmprod", "PTC_TEST_SLURM_CLUSTER_NAME")
HOOK_LOG = "/var/log/slurm/ptc-hooks.log"
EXTRAVARS = {
    "slurm_accounting_qos": "[{name: small, MaxTRESPerJob: cpu=1, Flags: DenyOnLimit, Priority: 10}]",
    "slurm_accounting_account_qos": "[normal, small]",
    "slurm_partitions": "[{PartitionName: main, Nodes: ALL, Default: true, MaxTime: '1-00:00:00', State: UP}]",
    "slurm_prolog": f'"#!/bin/sh\\necho prolog $SLURM_JOB_ID >> {HOOK_LOG}\\n"',
    "slurm_epilog": f'"#!/bin/sh\\necho epilog $SLURM_JOB_ID >> {HOOK_LOG}\\n"',
}

Runner = Callable[..., subprocess.CompletedProcess[str]]


def extravars() -> list[str]:
    args: list[str] = []
    for key, value in EXTRAVARS.items():
        args += ["-e", f"{key}={value}"]
    return args


def as_ptc(command: str) -> str:
    return f"cd /home/ptc && runuser -u ptc -- sh -c {shlex.quote(command)}"


def last_summary(expdir: Path) -> dict[str, object]:
    runs = sorted((expdir / "runs").glob("*-site"))
    assert runs, f"no site run recorded under {expdir / 'runs'}"
    return dict(json.loads((runs[-1] / "summary.json").read_text()))


def job_fields(expdir: Path, job: str, *keys: str) -> list[str]:
    """Fields of a job as slurmctld holds it (it keeps finished jobs for MinJobAge seconds)."""
    out = ssh(expdir, "head", f"scontrol show job --oneliner {job}").stdout
    fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
    return [fields.get(key, f"<no {key}>") for key in keys]


def wait_for(check: Callable[[], str | None], timeout: float, what: str) -> str:
    """Poll until check() returns a value; fail naming what did not happen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last is not None:
            return last
        time.sleep(3)
    pytest.fail(f"{what} did not happen within {timeout:.0f}s")


@pytest.fixture(scope="module")
def cluster(experiment_factory: Callable[..., Path]) -> Path:
    return experiment_factory(NAME, "profiles/slurm_cluster.py", "computeNodeCount=2")


@pytest.fixture(scope="module")
def deployed(cluster: Path, ptc: Runner) -> Path:
    proc = ptc("deploy", NAME, *extravars())
    assert proc.returncode == 0, f"ptc deploy failed:\n{proc.stderr[-6000:]}"
    return cluster


def test_second_deploy_changes_nothing(deployed: Path, ptc: Runner) -> None:
    # --full: the playbook runs although the nodes are up to date with its inputs
    proc = ptc("deploy", NAME, *extravars(), "--full")
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = last_summary(deployed)
    changed = {h: c["changed"] for h, c in summary["hosts"].items()}  # type: ignore[attr-defined]
    assert summary["changed"] == 0, f"second run changed tasks: {changed}"


def test_jwt_key_stays_secret(deployed: Path) -> None:
    stat = ssh(
        deployed,
        "head",
        "stat -c '%a %U %n' /etc/ptc/secrets/slurm-jwt.key /etc/slurm/jwt_hs256.key",
    )
    assert "600 root /etc/ptc/secrets/slurm-jwt.key" in stat.stdout
    assert "400 slurm /etc/slurm/jwt_hs256.key" in stat.stdout
    key = ssh(deployed, "head", "cat /etc/ptc/secrets/slurm-jwt.key").stdout.strip()
    assert len(key) >= 64
    logged = "".join(
        p.read_text(errors="replace") for p in (deployed / "runs").rglob("*") if p.is_file()
    )
    assert key not in logged and key[:32] not in logged


def test_user_without_association_is_refused(deployed: Path) -> None:
    out = ssh(deployed, "head", "cd /tmp && runuser -u nobody -- sbatch --wrap true", check=False)
    assert out.returncode != 0
    assert "Invalid account or account/partition combination specified" in out.stderr, out.stderr


def test_qos_limit_from_variables_is_enforced(deployed: Path) -> None:
    qos = ssh(
        deployed, "head", "sacctmgr -n -P show qos where name=small format=name,maxtres,flags"
    )
    assert qos.stdout.strip() == "small|cpu=1|DenyOnLimit", qos.stdout
    over = ssh(deployed, "head", as_ptc("sbatch --qos=small -n2 --wrap true"), check=False)
    assert over.returncode != 0
    assert "Job violates accounting/QOS policy" in over.stderr, over.stderr
    within = ssh(deployed, "head", as_ptc("sbatch --qos=small -n1 --parsable --wait --wrap true"))
    job = within.stdout.strip().split(";")[0]
    assert job_fields(deployed, job, "QOS", "JobState") == ["small", "COMPLETED"]


def test_job_beyond_partition_limits_is_rejected_at_submission(deployed: Path) -> None:
    before = ssh(deployed, "head", "squeue -h -o %i").stdout.split()
    out = ssh(deployed, "head", as_ptc("sbatch --time=2-00:00:00 --wrap true"), check=False)
    assert out.returncode != 0
    assert "Requested time limit is invalid (missing or exceeds some limit)" in out.stderr, (
        out.stderr
    )
    assert ssh(deployed, "head", "squeue -h -o %i").stdout.split() == before


def test_a_job_no_partition_could_hold_is_refused_with_the_reason(deployed: Path) -> None:
    sizes = [
        line.split() for line in ssh(deployed, "head", "sinfo -h -N -o '%c %m'").stdout.splitlines()
    ]
    nodes, cpus = len(sizes), sum(int(c) for c, _ in sizes)
    largest_cpus, largest_mb = max(int(c) for c, _ in sizes), max(int(m) for _, m in sizes)
    before = ssh(deployed, "head", "squeue -h -o %i").stdout.split()
    for options, why in [
        (f"-N{nodes + 1}", f"it asks for {nodes + 1} nodes and partition main has {nodes} in all"),
        (f"-n{cpus + 1}", f"it asks for {cpus + 1} CPUs and partition main has {cpus} in all"),
        (
            f"-c{largest_cpus + 1}",
            f"it asks for {largest_cpus + 1} CPUs on one node and the largest node has "
            f"{largest_cpus}",
        ),
        (
            f"--mem={largest_mb + 1}",
            f"it asks for {largest_mb + 1} MB on one node and the largest node has {largest_mb} MB",
        ),
    ]:
        out = ssh(deployed, "head", as_ptc(f"sbatch {options} --wrap true"), check=False)
        assert out.returncode != 0, f"sbatch {options} was admitted: {out.stdout}"
        assert f"ptc: this job can never run: {why}" in out.stderr, out.stderr
    assert ssh(deployed, "head", "squeue -h -o %i").stdout.split() == before
    script = ssh(deployed, "head", "stat -c '%U %a' /etc/slurm/job_submit.lua").stdout.split()
    assert script == ["root", "644"], script


def test_memory_and_cores_are_enforced(deployed: Path) -> None:
    grab = "python3 -c 'x = bytearray(300 << 20); print(len(x))'"
    over = ssh(deployed, "head", as_ptc(f"srun -w node-0 -n1 --mem=100M {grab}"), check=False)
    assert over.returncode != 0 and "Out Of Memory" in over.stderr, over.stderr
    within = ssh(deployed, "head", as_ptc(f"srun -w node-0 -n1 --mem=500M {grab}"))
    assert within.stdout.strip() == str(300 << 20)
    # Two one-core tasks are bound to different cores (task/affinity + task/cgroup).
    bound = ssh(
        deployed, "head", as_ptc("srun -w node-1 -n2 -c1 grep Cpus_allowed_list /proc/self/status")
    ).stdout.split()
    cpus = sorted(bound[1::2])
    assert cpus == ["0", "1"], bound
    # A job without --mem gets DefMemPerCPU per CPU, not the whole node.
    conf = ssh(deployed, "head", "scontrol show config").stdout
    per_cpu = int(re.search(r"DefMemPerCPU\s*=\s*(\d+)", conf).group(1))  # type: ignore[union-attr]
    job = ssh(deployed, "head", as_ptc("sbatch --parsable -n1 --wait --wrap true")).stdout.strip()
    assert job_fields(deployed, job, "MinMemoryCPU", "NumCPUs") == [f"{per_cpu}M", "1"]


def test_fairshare_usage_and_priority_factors(deployed: Path) -> None:
    """ptc's usage shows in sshare; a pending job's sprio line has real fair-share and age."""
    ssh(deployed, "head", as_ptc("srun -N2 -n4 sleep 5"))

    def used() -> str | None:
        out = ssh(
            deployed,
            "head",
            "sshare -n -P -l -u ptc -o Account,User,RawUsage,EffectvUsage,LevelFS,FairShare",
        ).stdout
        row = next((r.split("|") for r in out.splitlines() if "|ptc|" in r), None)
        # RawUsage grows as jobs end; EffectvUsage once the next PriorityCalcPeriod has run.
        return "|".join(row) if row and int(row[2]) > 0 and float(row[3]) > 0.0 else None

    row = wait_for(used, 180, "ptc's usage counted in sshare")
    _, _, _, effective, level_fs, fairshare = row.split("|")
    # Usage counts against ptc's share: LevelFS (shares over usage) is finite once there is
    # usage. Fair Tree then ranks the users: FairShare is ptc's rank, in (0, 1].
    assert float(effective) <= 1.0 and level_fs != "inf" and float(level_fs) > 0.0, row
    assert 0.0 < float(fairshare) <= 1.0, row

    blocker = ssh(deployed, "head", as_ptc("sbatch --parsable -N2 --exclusive --wrap 'sleep 300'"))
    waiting = ssh(deployed, "head", as_ptc("sbatch --parsable -N1 --wrap true"))
    jobs = [blocker.stdout.strip(), waiting.stdout.strip()]
    try:

        def factors() -> str | None:
            out = ssh(deployed, "head", f"sprio -h -j {jobs[1]} -o '%i %Y %A %F %J %P %Q'")
            fields = out.stdout.split()
            return out.stdout if len(fields) == 7 and int(fields[1]) > 0 else None

        line = wait_for(factors, 180, "sprio showing the pending job's priority")
        _, priority, _age, fair, size, partition, _qos = line.split()
        assert int(fair) > 0 and int(size) > 0 and int(partition) > 0, line
        assert int(priority) >= int(fair), line
        weights = ssh(deployed, "head", "sprio -w -h").stdout.split()
        assert "10000" in weights, weights  # PriorityWeightFairshare from the role's defaults
    finally:
        ssh(deployed, "head", f"scancel {' '.join(jobs)}")


def test_slurmrestd_with_and_without_token(deployed: Path) -> None:
    url = "http://10.10.1.1:6820"
    token = ssh(deployed, "head", "scontrol token username=ptc lifespan=120").stdout.strip()
    token = token.split("=", 1)[1]
    auth = f"-H 'X-SLURM-USER-NAME: ptc' -H 'X-SLURM-USER-TOKEN: {token}'"
    code = ssh(
        deployed, "node-0", f"curl -s -o /dev/null -w '%{{http_code}}' {url}/slurm/v0.0.38/ping"
    )
    assert code.stdout.strip() == "401"
    ping = json.loads(ssh(deployed, "node-0", f"curl -s {auth} {url}/slurm/v0.0.38/ping").stdout)
    assert ping["pings"][0]["ping"] == "UP" and not ping["errors"], ping
    # slurmdbd accepts the token too: a job from the accounting database, as JSON (Debian 12's
    # slurmrestd 22.05 serves openapi/dbv0.0.38; its /jobs has no user filter, /job/{id} is exact).
    job = ssh(deployed, "head", as_ptc("sbatch --parsable -n1 --wait --wrap true")).stdout.strip()

    def recorded() -> str | None:
        out = ssh(deployed, "node-0", f"curl -s {auth} {url}/slurmdb/v0.0.38/job/{job}").stdout
        answer = json.loads(out)
        done = [j for j in answer.get("jobs", []) if j["state"]["current"] == "COMPLETED"]
        return out if done and not answer["errors"] else None

    record = json.loads(wait_for(recorded, 60, f"job {job} in slurmdbd through slurmrestd"))
    assert [(j["job_id"], j["user"]) for j in record["jobs"]] == [(int(job), "ptc")], record
    # Not reachable on the control network: it listens on the cluster LAN address only.
    control = ssh(deployed, "head", "ip -4 -o addr show eth0").stdout.split()[3].split("/")[0]
    outside = ssh(
        deployed, "head", f"curl -s -m 5 -o /dev/null http://{control}:6820/", check=False
    )
    assert outside.returncode != 0


def test_prolog_and_epilog_run(deployed: Path) -> None:
    job = ssh(deployed, "head", as_ptc("sbatch --parsable -w node-0 -n1 --wait --wrap true"))
    job_id = job.stdout.strip()

    def logged() -> str | None:
        log = ssh(deployed, "node-0", f"cat {HOOK_LOG}", check=False).stdout
        return log if f"epilog {job_id}" in log else None

    log = wait_for(logged, 60, f"the Epilog of job {job_id}")
    assert f"prolog {job_id}" in log, log


def test_broken_share_drains_node_and_repair_returns_it(deployed: Path) -> None:
    def node_state() -> tuple[str, str]:
        out = ssh(deployed, "head", "sinfo -h -N -n node-1 -o '%T|%E'").stdout.strip()
        state, _, reason = out.partition("|")
        return state, reason

    # The testbed owns the share's mount (nodes may not mount): break and repair it from the host.
    info = podman.inspect(podman.container_name(deployed.name, "node-1"))
    assert info is not None, "node-1 has no container"
    in_node = ["nsenter", "--target", str(info["State"]["Pid"]), "--mount", "--"]
    subprocess.run([*in_node, "umount", "/home"], check=True)
    try:
        drained = wait_for(
            lambda: "|".join(s) if "drain" in (s := node_state())[0] else None,
            150,
            "node-1 draining after /home was unmounted",
        )
        assert drained.split("|")[1] == "ptc-health: /home is not mounted", drained
    finally:
        if ssh(deployed, "node-1", "mountpoint -q /home", check=False).returncode != 0:
            subprocess.run(
                [
                    *in_node,
                    "mount",
                    "--bind",
                    "-o",
                    "nodev,nosuid",
                    "/ptc-testbed/shared/home",
                    "/home",
                ],
                check=True,
            )
    back = wait_for(
        lambda: "|".join(s) if (s := node_state())[0] == "idle" else None,
        150,
        "node-1 returning to idle after /home was mounted again",
    )
    assert back == "idle|none", back
