"""Acceptance for the cluster roles on the local testbed (issue: `ptc deploy`, `ptc verify`).

One experiment for the whole module, to keep CI time down: 1+2 nodes are deployed and checked;
then `ptc modify` grows the experiment by a real new node (a new container wired into the LAN),
which `ptc deploy --limit node-2,head` brings into the running cluster, and shrinks it again.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from naming import experiment_name
from remote import containers, ssh, ssh_background

from elastic import node_paths
from elastic.bench import campaign as campaigns
from elastic.bench import spec
from elastic.deploy import runner, stamp
from elastic.deploy import verify as verifier
from elastic.deploy.target import Target
from elastic.events import Event, Kind, collect
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local import fileserver

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Overridable so that parallel developers' runs on one machine do not collide.
NAME = experiment_name("cl", "PTC_TEST_CLUSTER_NAME")
LATE_NODE = "node-2"
SERVER = fileserver.HOSTNAME  # the experiment's file server, which serves the shares
HPCC = f"{node_paths.HPCC_PREFIX}/hpcc.sbatch"
README = Path(__file__).resolve().parents[2] / "README.md"

Runner = Callable[..., subprocess.CompletedProcess[str]]


def last_summary(expdir: Path, playbook: str = "site") -> dict[str, object]:
    runs = sorted((expdir / "runs").glob(f"*-{playbook}"))
    assert runs, f"no {playbook} run recorded under {expdir / 'runs'}"
    return dict(json.loads((runs[-1] / "summary.json").read_text()))


def as_ptc(command: str) -> str:
    return f"cd /home/ptc && runuser -u ptc -- sh -c {shlex.quote(command)}"


def slurmd_identity(expdir: Path, node: str) -> str:
    out = ssh(expdir, node, "systemctl show slurmd -p MainPID -p ExecMainStartTimestampMonotonic")
    return out.stdout.strip()


def timed(ptc: Runner, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    proc = ptc(*args)
    elapsed = time.monotonic() - started
    sys.stderr.write(f"timing: ptc {' '.join(args)}: {elapsed:.1f}s\n")
    return proc, elapsed


@pytest.fixture(scope="module")
def cluster(experiment_factory: Callable[..., Path]) -> Path:
    # The bare image: every role installs its packages here, as on a testbed's stock image
    # (the other modules' nodes boot the prepared image, which carries them).
    return experiment_factory(NAME, "profiles/slurm_cluster.py", "computeNodeCount=2", image="bare")


@pytest.fixture(scope="module")
def deployed(cluster: Path, ptc: Runner) -> Path:
    proc, _ = timed(ptc, "deploy", NAME)
    assert proc.returncode == 0, f"ptc deploy failed:\n{proc.stderr[-6000:]}"
    return cluster


def test_deploy_keeps_events_and_summary(deployed: Path) -> None:
    summary = last_summary(deployed)
    assert summary["status"] == "successful"
    assert set(summary["hosts"]) == {"head", "node-0", "node-1"}  # type: ignore[arg-type]
    run_dir = Path(str(summary["run_dir"]))
    assert any((run_dir / "ansible" / "job_events").glob("*.json"))
    assert (run_dir / "ansible" / "stdout").stat().st_size > 0


def test_secrets_stay_secret(deployed: Path) -> None:
    """The database password and munge key exist only root-readable, and no run log has them."""
    secrets = ssh(deployed, "head", "stat -c '%a %U %n' /etc/ptc/secrets /etc/ptc/secrets/*").stdout
    assert "700 root /etc/ptc/secrets" in secrets
    assert "600 root /etc/ptc/secrets/slurmdbd-db-password" in secrets
    password = ssh(deployed, "head", "cat /etc/ptc/secrets/slurmdbd-db-password").stdout.strip()
    key = ssh(deployed, "head", "cat /etc/ptc/secrets/munge.key").stdout.strip()
    assert len(password) >= 32 and len(key) > 1000
    logged = "".join(
        p.read_text(errors="replace") for p in (deployed / "runs").rglob("*") if p.is_file()
    )
    assert password not in logged and key[:64] not in logged


def test_verify_passes(deployed: Path, ptc: Runner) -> None:
    proc, _ = timed(ptc, "verify", NAME)
    assert proc.returncode == 0, f"ptc verify failed:\n{proc.stderr[-4000:]}"


def test_campaign_from_python_reports_through_a_callback(deployed: Path, tmp_path: Path) -> None:
    events: list[Event] = []
    exp = experiments.load(NAME)
    plan = spec.hpcc_campaign(nodes=(2,), tasks_per_node=(1,), sizes=(1000,))
    result = campaigns.run(exp, plan, tmp_path / "hpcc.parquet", collect(events))
    assert [r["state"] for r in result.rows] == ["COMPLETED"], result.rows
    assert events[0].kind is Kind.BEGIN and events[-1].kind is Kind.END
    assert {e.topic for e in events} == {"campaign"}
    assert (tmp_path / "hpcc.parquet").is_file()


def tour_commands(readme: Path, name: str, home: Path) -> list[list[str]]:
    """The ptc commands of the README's first tour block, for experiment ``name`` and the state
    directory ``home`` (the README's ``demo`` and ``state/``), without their comments."""
    text = readme.read_text()
    tour = text[text.index("## After the demo") :]
    start = tour.index("```sh\n") + len("```sh\n")
    block = tour[start : tour.index("```", start)]
    commands = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        assert words[0] == "bin/ptc", line
        commands.append([_as_here(w, name, home) for w in words[1:]])
    return commands


def _as_here(word: str, name: str, home: Path) -> str:
    if word == "demo":
        return name
    if word.startswith("state/"):
        return str(home / word.removeprefix("state/").replace("/demo/", f"/{name}/"))
    return word


def test_the_readme_tour_and_the_demo_s_next_steps_work_as_printed(
    deployed: Path, ptc: Runner
) -> None:
    """What a newcomer runs after `make demo`, on a cluster deployed the same way."""
    from elastic.cli.bench import default_dataset
    from elastic.cli.demo import next_steps

    exp = experiments.load(NAME)
    plan = spec.hpcc_campaign(nodes=(2,), tasks_per_node=(1,), sizes=(1000,))
    dataset = default_dataset(exp)
    campaigns.run(exp, plan, dataset)
    home = Path(os.environ["PTC_HOME"])
    steps = [shlex.split(s)[1:] for s in next_steps(NAME, dataset) if " down " not in s]
    tour = tour_commands(README, NAME, home)
    assert ["status", NAME] in tour and any(c[:1] == ["bench"] for c in tour), tour
    for command in [*tour, *steps]:
        proc = ptc(*command)
        assert proc.returncode == 0, f"ptc {' '.join(command)}:\n{proc.stdout}\n{proc.stderr}"
    shown = ptc("bench", "show", str(dataset))
    assert "COMPLETED" in shown.stdout, shown.stdout


def test_file_written_on_one_node_is_seen_everywhere(deployed: Path) -> None:
    token = f"shared-{time.time_ns()}"
    ssh(deployed, "node-0", as_ptc(f"echo {token} > /home/ptc/from-node-0"))
    for node in ("node-1", "head"):
        assert ssh(deployed, node, "cat /home/ptc/from-node-0").stdout.strip() == token, node


def test_hpcc_job_across_both_nodes_lands_on_share_and_in_sacct(deployed: Path) -> None:
    out = ssh(deployed, "head", as_ptc(f"HPCC_PROBLEM_SIZE=1000 sbatch --parsable --wait {HPCC}"))
    job = out.stdout.strip().split(";")[0]
    assert job.isdigit(), out.stdout
    # Written by rank 0 on a compute node into /home/ptc; read here on the head.
    result = ssh(deployed, "head", f"cat /home/ptc/hpcc/{job}/hpccoutf.txt").stdout
    assert "End of HPC Challenge tests" in result
    assert "HPL_Tflops=" in result
    log = ssh(deployed, "head", f"cat /home/ptc/hpcc-{job}.out").stdout
    assert "node-[0-1]" in log, log
    sacct = ssh(
        deployed, "head", f"sacct -X -n -P -j {job} --format=JobID,User,NodeList,State"
    ).stdout.strip()
    assert sacct == f"{job}|ptc|node-[0-1]|COMPLETED", sacct


def test_mpi_through_srun_and_mpirun(deployed: Path) -> None:
    hello = "/opt/ptc/bin/mpi-hello"
    srun = ssh(deployed, "head", as_ptc(f"srun -N2 --ntasks-per-node=2 --mpi=pmix {hello}")).stdout
    assert "ring ok" in srun and "on node-0" in srun and "on node-1" in srun, srun
    mpirun = ssh(deployed, "head", as_ptc(f"salloc -N2 --ntasks-per-node=1 mpirun {hello}")).stdout
    assert "ring ok" in mpirun and "on node-1" in mpirun, mpirun


def test_exports_are_served_on_the_lan_only(deployed: Path) -> None:
    """The experiment's file server answers on the cluster LAN; nothing serves the exports on
    the control network (the head's eth0), the head least of all."""
    control = ssh(deployed, "head", "ip -4 -o addr show eth0").stdout.split()[3].split("/")[0]
    inside = ssh(deployed, "node-0", f"ptc-nfs-cat 'nfs://{SERVER}/home/.ptc-export?version=4'")
    outside = ssh(
        deployed, "node-0", f"ptc-nfs-cat 'nfs://{control}/home/.ptc-export?version=4'", check=False
    )
    assert "ptc NFS export /home" in inside.stdout
    assert outside.returncode != 0, f"the export is served to the control network ({control})"


def test_nfs_probes_in_lockstep_from_identical_nodes(deployed: Path) -> None:
    """libnfs names its NFSv4 client after its PID and the current second. Compute nodes wait on
    a file in the shared /home, then probe at once from fresh PID namespaces, so every nfs-cat has
    the same PID in the same second. Measured here: raw nfs-cat failed 1 of 10 such probes from
    two nodes (7 of 24 from four) with NFS4ERR_EXPIRED or NFS4ERR_STALE_CLIENTID; the role's
    ptc-nfs-cat, which deploy and verify use, must pass every one."""
    go = "/home/.ptc-lockstep"
    nodes = ("node-0", "node-1")
    probe = (
        f"while [ ! -e {go} ]; do sleep 0.005; done; "
        # A user namespace of its own lets root make the PID namespace: nodes lack SYS_ADMIN.
        "unshare --user --map-root-user --pid --fork "
        f"ptc-nfs-cat 'nfs://{SERVER}/home/.ptc-export?version=4'"
    )
    failures = []
    for attempt in range(8):
        ssh(deployed, "head", f"rm -f {go}")
        waiting = [ssh_background(deployed, node, probe) for node in nodes]
        time.sleep(1.5)  # both are polling for the file now
        ssh(deployed, "head", f"touch {go}")
        for node, proc in zip(nodes, waiting, strict=True):
            out, err = proc.communicate(timeout=120)
            if proc.returncode != 0 or "ptc NFS export /home" not in out:
                failures.append(f"round {attempt} {node}: rc={proc.returncode} {err.strip()}")
    ssh(deployed, "head", f"rm -f {go}")
    assert not failures, "\n".join(failures)


def _changed_tasks(run_dir: Path) -> list[str]:
    """Host and task of every change, from ansible-runner's event files."""
    found = []
    for path in sorted(run_dir.rglob("job_events/*.json")):
        data = json.loads(path.read_text(encoding="utf-8")).get("event_data", {})
        if data.get("res", {}).get("changed") and "task" in data:
            found.append(f"{data.get('host')}: {data['task']}")
    return found


def test_second_deploy_changes_nothing(deployed: Path) -> None:
    """Called as a Slurm hook or a service would: from Python, no terminal, events by callback."""
    events: list[Event] = []
    target = Target.of_experiment(experiments.load(NAME))
    result = runner.deploy(target, on_event=collect(events))
    summary = last_summary(deployed)
    changed = {h: c["changed"] for h, c in summary["hosts"].items()}  # type: ignore[attr-defined]
    assert summary["changed"] == result.changed == 0, (
        f"second run changed tasks: {changed}\n" + "\n".join(_changed_tasks(result.run_dir))
    )
    kinds = [e.kind for e in events]
    assert kinds[0] is Kind.BEGIN and kinds[-1] is Kind.END
    assert all(e.topic == "deploy" for e in events)
    assert any(e.kind is Kind.STATUS and "Install MUNGE" in e.message for e in events)
    last = events[-1].data["hosts"]
    assert set(last) == {"head", "node-0", "node-1"} and all(
        c["failed"] == 0 for c in last.values()
    )


def test_a_redeploy_with_nothing_changed_skips_ansible_and_a_stopped_service_is_seen(
    deployed: Path, ptc: Runner
) -> None:
    """After a deploy that succeeded everywhere, `ptc deploy` with the same inputs finds every
    node up to date and runs nothing; a service stopped by hand on one node is named, and the
    run it causes starts it again. A path a role made outside the trees the stamp watches whole
    (its record keeps each path a task named) is seen too, when its mode changes by hand."""
    again, _ = timed(ptc, "deploy", NAME)
    assert again.returncode == 0, again.stderr[-4000:]
    summary = last_summary(deployed)
    assert summary["up_to_date"] is True and summary["status"] == "up to date", summary
    assert "up to date" in again.stderr and "--full" in again.stderr, again.stderr[-2000:]
    kept = json.loads(ssh(deployed, "head", f"cat {stamp.STAMP}").stdout)["managed"]
    # slurmdbd's log directory, which its role makes: outside the trees watched whole
    moved = "/var/log/slurm"
    assert not any(moved.startswith(t + "/") for t in stamp.WATCHED)
    assert moved in kept and kept[moved][0] == stat.S_IFDIR, sorted(kept)
    ssh(deployed, "head", f"chmod {oct(kept[moved][1] ^ 0o005)[2:]} {moved}")
    ssh(deployed, "node-0", "systemctl stop slurmd")
    repaired = ptc("deploy", NAME)
    assert repaired.returncode == 0, repaired.stderr[-4000:]
    summary = last_summary(deployed)
    assert summary["up_to_date"] is False, summary
    assert summary["why_run"] == {  # type: ignore[comparison-overlap]
        "node-0": "stopped since its last deploy: slurmd.service",
        "head": f"{moved} changed after its last deploy",
    }, summary["why_run"]
    shown = " ".join(repaired.stderr.split())
    assert "ran for node-0: stopped since its last deploy: slurmd.service" in shown, shown[-2000:]
    assert ssh(deployed, "node-0", "systemctl is-active slurmd").stdout.strip() == "active"
    # the run that repaired it recorded the node again: the next deploy has nothing to do
    assert ptc("deploy", NAME).returncode == 0
    assert last_summary(deployed)["up_to_date"] is True


def test_verify_from_python_reports_through_a_callback(deployed: Path) -> None:
    events: list[Event] = []
    result = verifier.verify(Target.of_experiment(experiments.load(NAME)), collect(events))
    assert not result.failures and any(r.outcome == "passed" for r in result.results)
    assert [e.kind for e in events] == [Kind.BEGIN, Kind.END]
    assert events[-1].message == result.describe()


def test_head_runs_the_compute_playbook_by_itself(deployed: Path) -> None:
    """No workstation and no PTC_HOME: the head builds an inventory from `geni-get manifest`
    and runs site.yml from /local/repository against one compute node over the key mesh."""
    out = ssh(
        deployed,
        "head",
        "ptc-playbook --limit node-1 > /tmp/ptc-playbook.out 2>&1; rc=$?; "
        "grep -B2 -A12 'fatal:\\|FAILED\\|ERROR' /tmp/ptc-playbook.out | head -n 60; "
        "tail -n 20 /tmp/ptc-playbook.out; exit $rc",
        check=False,
    )
    assert out.returncode == 0, f"ptc-playbook on the head failed ({out.returncode}):\n{out.stdout}"
    assert "node-1" in out.stdout and "failed=0" in out.stdout, out.stdout
    assert "unreachable=0" in out.stdout, out.stdout
    recap = next(line for line in out.stdout.splitlines() if line.startswith("node-1 "))
    assert "changed=0" in recap, recap  # the workstation's deploy already did it all
    inventory = ssh(deployed, "head", "cat /var/lib/ptc/ansible/inventory/hosts.yml").stdout
    assert "ansible_host: 10.10.1.3" in inventory and "ansible_user: root" in inventory
    assert (
        "ptc_testbed: local"
        in ssh(
            deployed, "head", "cat /var/lib/ptc/ansible/inventory/group_vars/all/testbed.yml"
        ).stdout
        or "ptc_testbed: local" in inventory
    )


def test_verify_names_the_broken_node_and_check(deployed: Path, ptc: Runner) -> None:
    ssh(deployed, "node-1", "systemctl stop munge")
    try:
        proc = ptc("verify", NAME)
    finally:
        ssh(deployed, "node-1", "systemctl start munge")
    assert proc.returncode != 0
    assert "node-1: munge_active: node-1: munge is not running" in " ".join(proc.stderr.split())


def test_failed_service_shows_host_task_and_journal(deployed: Path, ptc: Runner) -> None:
    try:
        proc = ptc("deploy", NAME, "--playbook", "tests/integration/playbooks/broken_service.yml")
    finally:
        ssh(
            deployed,
            "node-0",
            "rm -f /etc/systemd/system/ptc-broken.service && systemctl daemon-reload "
            "&& systemctl reset-failed",
        )
    text = " ".join(proc.stderr.split())
    assert proc.returncode != 0
    assert "node-0: task 'Run ptc-broken' failed" in text
    assert "journalctl -u ptc-broken -n 30 on node-0" in text
    assert "ptc-broken: cannot open /etc/ptc-broken.conf" in text


def test_hpgmg_fails_clearly_without_its_source(
    deployed: Path, ptc: Runner, tmp_path: Path
) -> None:
    book = "tests/integration/playbooks/hpgmg.yml"
    proc = ptc("deploy", NAME, "--playbook", book)
    text = " ".join(proc.stderr.split())
    assert proc.returncode != 0
    assert "cannot fetch the HPGMG source from https://github.com/hpgmg/hpgmg.git" in text
    assert "hpgmg_source_path" in text and "hpgmg_source_archive" in text

    proc = ptc("deploy", NAME, "--playbook", book, "-e", f"hpgmg_source_archive={tmp_path}/no.tgz")
    assert "does not exist on the machine running Ansible" in " ".join(proc.stderr.split())

    # A mirror that is not HPGMG gets past the fetch and is refused before any build.
    tree = tmp_path / "not-hpgmg"
    tree.mkdir()
    (tree / "README").write_text("not HPGMG\n")
    archive = tmp_path / "not-hpgmg.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="not-hpgmg")
    proc = ptc("deploy", NAME, "--playbook", book, "-e", f"hpgmg_source_archive={archive}")
    assert proc.returncode != 0
    assert "has no hpgmgconf.py" in " ".join(proc.stderr.split())


def test_petsc_from_packages_solves_across_ranks(deployed: Path, ptc: Runner) -> None:
    book = "tests/integration/playbooks/petsc.yml"
    proc = ptc("deploy", NAME, "--playbook", book)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = ssh(deployed, "head", as_ptc("mpirun -np 2 /opt/ptc/bin/petsc-check -n 2000")).stdout
    assert "Release Version 3." in out and "ranks 2, unknowns 2000, KSP cg" in out, out
    error = float(out.rsplit("error", 1)[1])
    assert error < 1e-6, out  # the exact solution is known: all ones
    proc = ptc("deploy", NAME, "--playbook", book, "--full")
    assert proc.returncode == 0 and last_summary(deployed, "petsc")["changed"] == 0


def test_petsc_source_build_fails_clearly_without_its_release(deployed: Path, ptc: Runner) -> None:
    proc = ptc(
        "deploy", NAME, "--playbook", "tests/integration/playbooks/petsc.yml",
        "-e", "petsc_install_method=source",
    )  # fmt: skip
    text = " ".join(proc.stderr.split())
    assert proc.returncode != 0
    assert "petsc: cannot fetch PETSc" in text and "petsc_source_archive" in text


@pytest.fixture(scope="module")
def long_job(deployed: Path) -> str:
    """A job running on node-0 through the node addition and removal."""
    out = ssh(deployed, "head", as_ptc("sbatch --parsable -w node-0 -N1 --wrap 'sleep 1200'"))
    job = out.stdout.strip().split(";")[0]
    for _ in range(30):
        if ssh(deployed, "head", f"squeue -h -j {job} -o %T").stdout.strip() == "RUNNING":
            return job
        time.sleep(1)
    pytest.fail(f"job {job} did not start")


def test_add_compute_node_leaves_others_running(deployed: Path, ptc: Runner, long_job: str) -> None:
    before = {n: slurmd_identity(deployed, n) for n in ("node-0", "node-1")}
    proc, _ = timed(ptc, "modify", NAME, "--param", "computeNodeCount=3")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"--limit {LATE_NODE},head" in proc.stderr  # the next step, spelled out
    # The testbed told the running nodes about the new one, as CloudLab updates its manifest.
    assert f'client_id="{LATE_NODE}"' in ssh(deployed, "node-0", "geni-get manifest").stdout
    assert "(10.10.1.4)" in ssh(deployed, "node-0", f"ping -c1 -W2 {LATE_NODE}").stdout
    assert "groups: slurm_compute, nfs_client" in ssh(deployed, LATE_NODE, "cat /etc/motd").stdout

    proc, _ = timed(ptc, "deploy", NAME, "--limit", f"{LATE_NODE},head")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert {n: slurmd_identity(deployed, n) for n in before} == before, "slurmd restarted"
    assert ssh(deployed, "head", f"squeue -h -j {long_job} -o %T").stdout.strip() == "RUNNING"
    state = ssh(deployed, "head", f"sinfo -h -n {LATE_NODE} -o %T").stdout.strip()
    assert state == "idle", state
    hello = ssh(
        deployed,
        "head",
        as_ptc(
            "srun -w node-0,node-1,node-2 -N3 --ntasks-per-node=1 --mpi=pmix /opt/ptc/bin/mpi-hello"
        ),
    ).stdout
    assert "ring ok" in hello and f"on {LATE_NODE}" in hello, hello


def test_remove_compute_node_leaves_others_running(
    deployed: Path, ptc: Runner, long_job: str
) -> None:
    before = {n: slurmd_identity(deployed, n) for n in ("node-0", "node-1")}
    # Drain first, as an operator would, so Slurm stops placing work on the node.
    ssh(deployed, "head", f"scontrol update nodename={LATE_NODE} state=drain reason=removing")
    proc, _ = timed(ptc, "modify", NAME, "--param", "computeNodeCount=2")
    assert proc.returncode == 0, proc.stderr[-4000:]
    nodes = [f"ptc-{NAME}-{n}" for n in ("head", "node-0", "node-1")]
    assert containers(NAME) == sorted([*nodes, fileserver.container_name(NAME)])
    assert LATE_NODE not in (deployed / "inventory" / "hosts.yml").read_text()
    ports = subprocess.run(
        ["ip", "-n", f"ptc-{NAME}", "-o", "link", "show", "master", "lan0"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert len(ports.splitlines()) == 3, f"the removed node's LAN port is still there: {ports}"

    proc, _ = timed(ptc, "deploy", NAME, "--limit", "head")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert {n: slurmd_identity(deployed, n) for n in before} == before, "slurmd restarted"
    assert ssh(deployed, "head", f"squeue -h -j {long_job} -o %T").stdout.strip() == "RUNNING"
    nodes = ssh(deployed, "head", "sinfo -h -N -o %N").stdout.split()
    assert sorted(set(nodes)) == ["node-0", "node-1"], nodes
    ssh(deployed, "head", f"scancel {long_job}")


def test_modify_refuses_what_a_running_experiment_cannot_do(deployed: Path, ptc: Runner) -> None:
    manifest = (deployed / "manifest.xml").read_bytes()
    proc = ptc("modify", NAME, "--param", "lanBandwidth=100000")
    assert proc.returncode == 2
    refused = " ".join(proc.stderr.split())
    assert "link 'lan' would change" in refused and "100000 kbps" in refused, refused
    proc = ptc("modify", NAME, "--param", "computeNodeCount=0")
    assert proc.returncode == 2 and "computeNodeCount" in proc.stderr
    assert (deployed / "manifest.xml").read_bytes() == manifest
    assert ptc("status", NAME).stdout.count("running") == 3
