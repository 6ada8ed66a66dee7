"""The configuration server (etcd), live, on one experiment with three etcd members
(`profiles/slurm_cluster.py computeNodeCount=1 configServerCount=3`).

Acceptance 1: `ptc deploy` gives a healthy TLS-only etcd cluster and `ptc verify` (with
tests/infra/test_etcd.py) passes. Then, through `ptc config`: status, roles, the cluster's
secrets kept in etcd; the elastic manager fails over by itself when the active one's node
dies in the middle of a reclamation (acceptance 3: the experiment is deployed with elastic
partitions, so a manager runs on every member and compute nodes start outside Slurm's
partition: `srun -w node-0` resumes node-0 through the hooks); a head whose etcd data and secrets are wiped regains the same identity
(acceptance 4 as far as the testbed can replace a node: same munge key and database password,
compute nodes untouched); a snapshot to S3 survives the configuration server's destruction
and restores onto a new experiment's configuration server (acceptance 5); and bad input is
refused before anything changes (acceptance 6).

S3 is moto's server — a local fake of S3, since AWS cannot be reached — started by this module
on loopback; the snapshot travels through the workstation's SSH tunnel as it would to AWS.

The tests run in file order. While developing, PTC_TEST_CFG_REUSE=$PTC_HOME/experiments/NAME
runs them against an experiment already deployed (it is left up).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from naming import experiment_name
from remote import ssh, ssh_background, wait_for

from elastic import node_paths
from elastic.deploy import secrets
from elastic.testbed import experiment as experiments
from elastic.testbed import nodeops

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = experiment_name("cfgit", "PTC_TEST_CFG_NAME")
# Where the snapshot is restored as the issue asks, on a new experiment: its head alone runs a
# configuration server, deployed by itself (config_server.yml), with its own CA and passwords.
RECOVERY = experiment_name("cfgdr")
MEMBERS = ["head", "cfg-1", "cfg-2"]
DATA_DIR = "/var/lib/etcd/ptc"
SECRETS = "/etc/ptc/secrets"
# Elastic partitions with short times (as tests/integration/test_elastic.py): every deploy of
# this experiment passes them, or the elastic role is skipped and Slurm loses its power saving.
ELASTIC_VARS = [
    "ptc_elastic=true",
    "slurm_power_save_suspend_time=20",
    "slurm_power_save_resume_timeout=90",
    "elastic_pv_interval=5",
    "elastic_notify_interval=10",
    "elastic_max_pv_age=60",
]
ELASTIC = [arg for var in ELASTIC_VARS for arg in ("-e", var)]
PROBE = f"{node_paths.REPOSITORY}/tests/support/probe.py"
REPO = Path(__file__).resolve().parents[2]
PTC = [sys.executable, "-m", "elastic.cli"]


@pytest.fixture(scope="module")
def cluster(experiment_factory: Callable[..., Path], ptc: Any) -> Path:
    reuse = os.environ.get("PTC_TEST_CFG_REUSE")
    if reuse:
        expdir = Path(reuse).resolve()
        os.environ["PTC_HOME"] = str(expdir.parents[1])
        global NAME
        NAME = expdir.name
        return expdir
    expdir = experiment_factory(
        NAME, "profiles/slurm_cluster.py", "computeNodeCount=1", "configServerCount=3"
    )
    proc = ptc("deploy", NAME, *ELASTIC)
    assert proc.returncode == 0, f"ptc deploy {NAME} failed:\n{proc.stderr[-6000:]}"
    return expdir


def keys(name: str) -> dict[str, bytes]:
    """Every key and value of the configuration server, read as root through the tunnel."""
    from elastic.configserver.access import open_experiment

    with open_experiment(name) as client:
        return {kv.key: kv.value for kv in client.range("/", prefix=True).kvs}


def durable_keys(name: str) -> dict[str, bytes]:
    """:func:`keys` without those bound to a lease (the manager's leader key): such a key lives
    only while its holder renews the lease, and after a restore nobody does, so it expires on
    the lease's own clock, sooner or later than a comparison, whatever the restore did."""
    from elastic.configserver.access import open_experiment

    with open_experiment(name) as client:
        return {kv.key: kv.value for kv in client.range("/", prefix=True).kvs if not kv.lease}


def sha(node_file: str, expdir: Path, node: str) -> str:
    return ssh(expdir, node, f"sha256sum {node_file}").stdout.split()[0]


def test_deploy_gives_a_healthy_tls_only_cluster(cluster: Path, ptc: Any) -> None:
    proc = ptc("verify", NAME, timeout=1200)
    assert proc.returncode == 0, f"ptc verify {NAME}:\n{proc.stdout[-4000:]}{proc.stderr[-3000:]}"
    status = ptc("config", "status", NAME)
    assert status.returncode == 0, status.stderr
    assert "quorum: yes" in status.stdout
    for member in MEMBERS:
        assert member in status.stdout


def test_roles_and_bad_input(cluster: Path, ptc: Any) -> None:
    put = ptc("config", "put", NAME, "/ptc/partitions/ptc/motd", "hello")
    assert put.returncode == 0, put.stderr
    got = ptc("config", "get", NAME, "/ptc/partitions/ptc/motd", "--user", "partition-ptc")
    assert got.returncode == 0 and got.stdout.strip() == "hello", got.stderr
    denied = ptc("config", "list", NAME, "/ptc/secrets/", "--user", "partition-ptc")
    assert denied.returncode == 1 and "permission denied" in denied.stderr
    unknown = ptc("config", "status", NAME, "--member", "cfg-9")
    assert unknown.returncode == 2 and "cfg-9" in unknown.stderr
    cert = cluster / "inventory" / "pki" / "etcd" / "clients" / "manager.crt"
    cert.rename(cert.with_suffix(".away"))
    try:
        missing = ptc("config", "status", NAME, "--user", "manager")
    finally:
        cert.with_suffix(".away").rename(cert)
    assert missing.returncode == 2 and "manager.crt" in missing.stderr


# -- acceptance 3: the elastic manager fails over by itself -----------------------------------
def manager_urls(expdir: Path) -> dict[str, str]:
    """{member: its manager's URL}, from the head's manager configuration."""
    conf = yaml.safe_load(ssh(expdir, "head", f"cat {node_paths.MANAGER_CONFIG}").stdout)
    by_address = {url.split("//")[1].split(":")[0]: url for url in conf["peers"]}
    addresses = {m: ssh(expdir, m, "hostname -I").stdout.split() for m in MEMBERS}
    return {m: next(by_address[a] for a in addresses[m] if a in by_address) for m in MEMBERS}


def manager_health(expdir: Path, urls: dict[str, str], via: str = "head") -> dict[str, Any]:
    """{member: /v1/health of its manager} as seen from ``via``."""
    out = ssh(expdir, via, f"python3 {PROBE} --health --urls {','.join(urls.values())}").stdout
    health = json.loads(out)
    return {m: health[url] for m, url in urls.items()}


def active_member(expdir: Path, urls: dict[str, str]) -> str | None:
    actives = [m for m, h in manager_health(expdir, urls).items() if h.get("active")]
    assert len(actives) <= 1, f"more than one active manager: {actives}"
    return actives[0] if actives else None


def elastic_manager(expdir: Path) -> Any:
    from elastic.manager.workstation import open_manager

    return open_manager(expdir / "inventory" / "hosts.yml", expdir / "inventory" / "ssh_config")


def test_the_manager_fails_over_when_its_node_dies_mid_reclamation(cluster: Path, ptc: Any) -> None:
    """The active manager's node (a cfg member: the head runs slurmctld and the Slurm client)
    freezes during a reclamation; a standby takes over, the reclamation completes at its
    deadline, and the event log has every event exactly once. A frozen container is what a
    dead node looks like to the network (no answer, no reset) and can come back afterwards, as
    the etcd fault test does; thawed, the old manager must not act."""
    from support.probe import failover

    urls = manager_urls(cluster)
    assert wait_for("one active manager", lambda: active_member(cluster, urls), 60)
    # Steer activeness to a cfg node: a restarted manager resigns, and a standby takes over.
    for _ in range(5):
        if active_member(cluster, urls) != "head":
            break
        ssh(cluster, "head", "systemctl restart ptc-elastic-manager")
        wait_for("a manager to take over", lambda: active_member(cluster, urls), 60)
    victim = active_member(cluster, urls)
    assert victim in ("cfg-1", "cfg-2"), f"the active manager stays on {victim}"

    # Slurm takes node-0 for a long job (resumed through the hooks, the manager and the playbook).
    job = (
        ssh(
            cluster,
            "head",
            "cd /home/ptc && runuser -u ptc -- sbatch --parsable -w node-0 -t 30 -o /dev/null "
            "--wrap 'sleep 900'",
        )
        .stdout.strip()
        .split(";")[0]
    )
    try:
        wait_for(
            "the job to run on node-0",
            lambda: "RUNNING" in ssh(cluster, "head", f"squeue -h -j {job} -o %T").stdout,
            300,
            poll=3,
        )

        def fresh_pv() -> bool:
            with elastic_manager(cluster) as m:
                part = next(p for p in m.status()["partitions"] if p["name"] == "slurm")
            pv = part["pv"]
            return bool(pv) and "node-0" in pv["values"] and not pv["stale"]

        wait_for("a preemption vector covering node-0", fresh_pv, 120, poll=3)

        probe = ssh_background(
            cluster,
            "head",
            f"python3 {PROBE} --urls {','.join(urls.values())} --duration 45 "
            f"--token-file {node_paths.ELASTIC_TOKENS_DIR}/admin.token",
        )
        with elastic_manager(cluster) as m:
            rec = m.reclaim("slurm", 1, 30)
            wait_for(
                "NotifyDeletePending to the Slurm client",
                lambda: m.reclamation(rec["id"])["notifications"] >= 1,
                20,
                poll=0.5,
            )
            before = m.events(limit=10000)
        paused = f"ptc-{NAME}-{victim}"
        pausing = time.time()
        podman("pause", paused)
        killed_at = time.time()  # frozen for sure from here (pausing takes a while under load)
        try:
            out, err = probe.communicate(timeout=120)
            assert probe.returncode == 0, err[-2000:]
            took = failover(json.loads(out)["samples"], killed_at, urls[victim])
            print(f"\nmanager failover: {victim} frozen (podman pause took "
                  f"{killed_at - pausing:.2f} s), next request served after "
                  f"{'none' if took is None else f'{took:.2f} s'}")  # fmt: skip
            assert took is not None, "no request was served after the active manager died"

            def finished() -> dict[str, Any] | None:
                with elastic_manager(cluster) as m:
                    got: dict[str, Any] = m.reclamation(rec["id"])
                return got if got["state"] == "done" else None

            done = wait_for(
                "the reclamation to finish", finished, rec["deadline"] - time.time() + 90, poll=3
            )
            with elastic_manager(cluster) as m:
                after = m.events(limit=10000)
            new_active = active_member(cluster, {k: v for k, v in urls.items() if k != victim})
        finally:
            podman("unpause", paused)
        print(f"reclamation {rec['id']}: finished {done['finished_at'] - rec['deadline']:+.2f} s "
              f"from its deadline under {new_active} ({done['notifications']} notifications, "
              f"released {sorted(done['released'])}, forced {done['forced']})")  # fmt: skip
        # Pending when the manager died; finished by the next one: the Slurm client requeues
        # and lets go of the node just before the deadline, or the manager takes it at it.
        assert done["finished_at"] > killed_at
        assert set(done["forced"]) | set(done["released"]) == {"node-0"}
        assert new_active and new_active != victim
        # Nothing lost, nothing doubled.
        assert after[: len(before)] == before
        assert [e["seq"] for e in after] == list(range(1, len(after) + 1))
        mine = [e for e in after if e["data"].get("reclamation") == rec["id"]]
        assert [e["kind"] for e in mine].count("reclamation-started") == 1
        assert [e["kind"] for e in mine].count("reclamation-finished") == 1

        # Thawed, the old manager stands by; the CLI finds the active one by itself.
        def one_active_not_the_victim() -> bool:
            health = manager_health(cluster, urls)
            actives = [m for m, h in health.items() if h.get("active")]
            return (
                actives == [new_active] and health[victim].get("active_manager") == urls[new_active]
            )

        wait_for("the thawed manager to stand by", one_active_not_the_victim, 60)
        status = ptc("elastic", "status", NAME)
        assert status.returncode == 0, status.stderr
    finally:
        ssh(cluster, "head", f"scancel {job}", check=False)


def test_the_cluster_secrets_are_kept_in_etcd(cluster: Path) -> None:
    held = keys(NAME)
    for name in ("munge.key", "slurmdbd-db-password"):
        value = held.get(f"/ptc/secrets/{name}")
        assert value, f"/ptc/secrets/{name} is not in the configuration server"
        assert hashlib.sha256(value).hexdigest() == sha(f"{SECRETS}/{name}", cluster, "head")


def host_keys(container: str) -> list[str]:
    """The base64 of each public host key of a node, read from its container."""
    out = podman("exec", container, "sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub").stdout
    return [line.split()[1] for line in out.splitlines() if len(line.split()) >= 2]


@pytest.fixture
def pool_awake(cluster: Path) -> Iterator[Path]:
    """The experiment's nodes powered on and held up for the test: node-0 is a pool node,
    powered off at rest under the elastic partition's default (power)."""
    with nodeops.awake(experiments.load(NAME), "test"):
        yield cluster


def test_a_replaced_head_regains_the_cluster_identity(pool_awake: Path, ptc: Any) -> None:
    """Acceptance 4, as in 001 §4.6.4: the head's container and disks are removed, a fresh head
    starts in its place, and a deploy gives it the same munge key and database password from
    the configuration server; node-0 (held powered on throughout) keeps its key and munged, and
    runs jobs for the new head."""
    cluster = pool_awake
    munge_before = sha("/etc/munge/munge.key", cluster, "node-0")
    db_before = sha(f"{SECRETS}/slurmdbd-db-password", cluster, "head")
    munged_since = ssh(
        cluster, "node-0", "systemctl show -p ActiveEnterTimestampMonotonic --value munge"
    ).stdout.strip()
    old_id = podman("inspect", "--format", "{{.Id}}", f"ptc-{NAME}-head").stdout.strip()
    old_keys = host_keys(f"ptc-{NAME}-head")

    proc = ptc("replace", NAME, "head")
    assert proc.returncode == 0, f"ptc replace failed:\n{proc.stderr[-4000:]}"
    assert podman("inspect", "--format", "{{.Id}}", f"ptc-{NAME}-head").stdout.strip() != old_id
    # The new head's host keys replace the old ones on purpose: pinned, and checked strictly
    # by every ssh below.
    pinned = (cluster / "inventory" / "known_hosts").read_text()
    new_keys = host_keys(f"ptc-{NAME}-head")
    assert new_keys and all(key in pinned for key in new_keys)
    assert not any(key in pinned for key in old_keys)
    fresh = ssh(cluster, "head", f"test -e {SECRETS}/munge.key || test -e {DATA_DIR}", check=False)
    assert fresh.returncode != 0, "the new head still has the old one's secrets or etcd data"

    proc = ptc("deploy", NAME, *ELASTIC, "--limit", "head", timeout=2400)
    assert proc.returncode == 0, f"deploy of the new head failed:\n{proc.stderr[-6000:]}"
    assert sha("/etc/munge/munge.key", cluster, "head") == munge_before
    assert sha(f"{SECRETS}/slurmdbd-db-password", cluster, "head") == db_before
    assert sha("/etc/munge/munge.key", cluster, "node-0") == munge_before
    assert (
        ssh(
            cluster, "node-0", "systemctl show -p ActiveEnterTimestampMonotonic --value munge"
        ).stdout.strip()
        == munged_since
    ), "node-0's munged was restarted"
    status = ptc("config", "status", NAME)
    assert status.returncode == 0 and "quorum: yes" in status.stdout, status.stdout
    job = ssh(cluster, "head", "srun -N1 -w node-0 --time=2 hostname", check=False)
    assert job.returncode == 0 and job.stdout.strip() == "node-0", job.stderr
    # slurmctld hands finished jobs to slurmdbd asynchronously; the new database gets them
    for _ in range(30):
        accounted = ssh(cluster, "head", "sacct -X -n -P -o JobName,State -S now-10minutes")
        if "hostname|COMPLETED" in accounted.stdout:
            break
        time.sleep(2)
    assert "hostname|COMPLETED" in accounted.stdout, "the new head's accounting lacks the job"


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)
    assert not check or proc.returncode == 0, f"podman {' '.join(args)}: {proc.stderr}"
    return proc


def link(container: str, device: str, state: str) -> None:
    """``ip link set DEVICE STATE`` in the container's network namespace, from the host."""
    pid = podman("inspect", "--format", "{{.State.Pid}}", container).stdout.strip()
    subprocess.run(
        ["nsenter", "--target", pid, "--net", "--", "ip", "link", "set", device, state],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def leader(name: str) -> str:
    from elastic.configserver.access import open_experiment
    from elastic.configserver.cluster import cluster_status

    with open_experiment(name) as client:
        found = cluster_status(client).leader
    assert found, f"{name}: no leader"
    return found


def test_faults_lose_no_acknowledged_write(pool_awake: Path) -> None:
    """Acceptance 2: three clients on node-0, ~1000 operations, while the leader's node is
    frozen, a minority member is cut off the LAN, and a member restarts."""
    cluster = pool_awake
    from support.faults import check, final_state, linearizable, load, unavailability

    from elastic.configserver.access import open_experiment
    from elastic.remote.ssh import copy_to

    creds = "/tmp/cfg-faults"
    pki = cluster / "inventory" / "pki" / "etcd"
    ssh(cluster, "node-0", f"rm -rf {creds} && mkdir -m 700 {creds}")
    files = [pki / "ca.crt", *(pki / "clients" / f"root.{e}" for e in ("crt", "key"))]
    files.append(pki / "users" / "root.password")
    for file in files:
        copy_to(cluster / "inventory" / "ssh_config", "node-0", file, f"{creds}/", timeout=60)
    endpoints = " ".join(f"https://{m}:2379" for m in MEMBERS)
    ssh(cluster, "node-0", f"printf '%s\\n' {endpoints} > {creds}/endpoints")
    workload = ssh_background(
        cluster,
        "node-0",
        f"cd /local/repository && PYTHONPATH=. python3 tests/support/faults.py --credentials {creds}"
        " --ops 1000 --duration 50 --think 0.1 --timeout 2",
    )
    faults: list[tuple[str, float]] = []
    container = f"ptc-{NAME}-"
    paused = ""
    try:
        time.sleep(5)
        victim = leader(NAME)
        faults.append((f"leader {victim} frozen", time.time()))
        podman("pause", container + victim)
        paused = victim
        time.sleep(8)
        podman("unpause", container + victim)
        paused = ""
        time.sleep(6)
        minority = next(m for m in MEMBERS if m != leader(NAME))
        lan = ssh(cluster, minority, "ip -o -4 addr show to 10.10.1.0/24").stdout.split()[1]
        faults.append((f"{minority} cut off the LAN", time.time()))
        # from the host, in the node's network namespace: a node holds no NET_ADMIN
        link(container + minority, lan, "down")
        time.sleep(8)
        link(container + minority, lan, "up")
        time.sleep(6)
        restarted = leader(NAME)
        faults.append((f"{restarted} restarted", time.time()))
        ssh(cluster, restarted, "systemctl restart etcd")
    finally:
        if paused:
            podman("unpause", container + paused, check=False)
        out, err = workload.communicate(timeout=300)
    assert workload.returncode == 0, err[-2000:]
    history = load(out.strip().splitlines()[-1])
    with open_experiment(NAME) as client:
        final = final_state(client)
    result = check(history, final["value"], final["revision"], final["keys"])
    refused = unavailability(history, faults)
    report = ", ".join(f"{k}: writes refused {v:.1f} s" for k, v in refused.items())
    print(f"\n{result.ops} ops ({result.acknowledged} ok, {result.indeterminate} indeterminate, "
          f"{result.failed} failed); register {final['value']}; {report}")  # fmt: skip
    assert result.valid, result.problems
    assert result.acknowledged > 0 and len(faults) == 3
    found = linearizable(history)
    print(f"linearizability: {found.valid} after {found.steps} search steps")
    assert found.valid is True, (found.stuck, found.prefix[-5:])


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server — a fake of AWS S3 — on loopback, with fake credentials."""
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    assert server, "moto_server is missing (pip install 'moto[server]')"
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("wb")
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        s3c = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
        for bucket in ("snaps", "flat"):
            s3c.create_bucket(Bucket=bucket)
        s3c.put_bucket_versioning(Bucket="snaps", VersioningConfiguration={"Status": "Enabled"})
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def elastic_stopped(expdir: Path) -> Iterator[None]:
    """The elastic services write their state to etcd (a preemption vector every few
    seconds): stopped, the keys hold still while a test compares them."""
    ssh(expdir, "head", "systemctl stop ptc-elastic-slurm-client")
    for member in MEMBERS:
        ssh(expdir, member, "systemctl stop ptc-elastic-manager")
    try:
        yield
    finally:
        for member in MEMBERS:
            ssh(expdir, member, "systemctl start ptc-elastic-manager", check=False)
        ssh(expdir, "head", "systemctl start ptc-elastic-slurm-client", check=False)


@contextlib.contextmanager
def command_line_sampler(
    canaries: dict[str, str], ignore: list[int]
) -> Iterator[list[secrets.Leak]]:
    """Every process's command line, sampled in a thread while the block runs."""
    seen: list[secrets.Leak] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.extend(secrets.leaks_in_command_lines(canaries, ignore=[os.getpid(), *ignore]))
            stop.wait(0.1)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def test_no_secret_leaks_from_a_deploy_or_a_snapshot(
    cluster: Path, s3: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A canary secret given each way a user can (the environment, -e, a vars file) reaches
    no file of the experiment's state or logs and no process's command line, through a
    deploy (config_server.yml, on the deployed cluster) and a snapshot to the fake S3."""
    tag = os.urandom(6).hex()
    canaries = {
        "environment": f"canary-env-{tag}",
        "-e": f"canary-e-{tag}",
        "vars file": f"canary-file-{tag}",
    }
    vars_file = Path(tempfile.mkdtemp(prefix="ptc-test-secrets-")) / "secret-vars.yml"
    vars_file.write_text(f"etcd_snapshot_aws_access_key_id: {canaries['vars file']}\n")
    env = os.environ | {"COLUMNS": "200", "AWS_SECRET_ACCESS_KEY": canaries["environment"]}
    deploy = [
        *PTC, "deploy", NAME, "--playbook", "config_server.yml",
        "-e", f"etcd_snapshot_aws_secret_access_key={canaries['-e']}", "-e", f"@{vars_file}",
    ]  # fmt: skip
    snapshot = [*PTC, "config", "snapshot", NAME, "--bucket", "snaps", "--endpoint-url", s3]
    outputs: list[str] = []
    for argv in (deploy, snapshot):
        proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        # The user's own `ptc deploy -e NAME=SECRET` shows the secret: that one is theirs.
        with command_line_sampler(canaries, ignore=[proc.pid]) as seen:
            out, err = proc.communicate(timeout=1800)
        assert proc.returncode == 0, f"{argv[1:4]}: {err[-4000:]}"
        assert seen == [], f"{argv[1:4]}: a secret on a command line: {sorted(map(str, seen))}"
        outputs += [out, err]
    assert not [n for n, v in canaries.items() if any(v in text for text in outputs)]
    state = Path(os.environ["PTC_HOME"])
    runs = sorted((cluster / "runs").glob("*-config_server"))
    assert runs and (runs[-1] / "ansible" / "command").is_file()  # the run did record itself
    # The state, the session's temporary files (moto's log among them), Ansible's own
    # temporary files and what is left of the runs' private variable files.
    places = [state, tmp_path_factory.getbasetemp(), Path.home() / ".ansible"]
    places += Path(tempfile.gettempdir()).glob("ptc-vars-*")
    try:
        found = secrets.leaks_in_files([p for p in places if p.exists()], canaries)
        assert found == [], sorted(map(str, found))
    finally:
        shutil.rmtree(vars_file.parent)


def test_snapshot_survives_the_destruction_of_the_configuration_server(
    cluster: Path, ptc: Any, s3: str
) -> None:
    s3args = ["--bucket", "snaps", "--endpoint-url", s3]
    with elastic_stopped(cluster):
        before = durable_keys(NAME)
        assert "/ptc/secrets/munge.key" in before
        snap = ptc("config", "snapshot", NAME, *s3args)
        assert snap.returncode == 0, snap.stderr
        # Destroy it: every member's data is gone.
        for member in MEMBERS:
            ssh(cluster, member, f"systemctl stop etcd && rm -rf {DATA_DIR}")
        restored = ptc("config", "restore", NAME, *s3args, timeout=900)
        assert restored.returncode == 0, restored.stderr
        assert "sha256 verified" in restored.stdout
        assert durable_keys(NAME) == before


def test_a_snapshot_restores_onto_a_new_experiment(
    cluster: Path, ptc: Any, s3: str, experiment_factory: Callable[..., Path]
) -> None:
    s3args = ["--bucket", "snaps", "--endpoint-url", s3]
    with elastic_stopped(cluster):
        before = durable_keys(NAME)
        snap = ptc("config", "snapshot", NAME, *s3args)
        assert snap.returncode == 0, snap.stderr
    experiment_factory(RECOVERY, "profiles/slurm_cluster.py", "computeNodeCount=1")
    deployed = ptc("deploy", RECOVERY, "--playbook", "config_server.yml")
    assert deployed.returncode == 0, f"ptc deploy {RECOVERY}:\n{deployed.stderr[-4000:]}"
    assert set(keys(RECOVERY)) == set(), "a new configuration server starts empty"
    restored = ptc("config", "restore", RECOVERY, "--cluster", NAME, *s3args, timeout=900)
    assert restored.returncode == 0, restored.stderr
    assert "sha256 verified" in restored.stdout
    # The snapshot's users now log in with the new experiment's passwords: root reads every key,
    # and the manager its own prefix, as on the source.
    assert "passwords from this experiment's PKI: manager, partition-ptc, root" in restored.stdout
    assert durable_keys(RECOVERY) == before
    manager = ptc("config", "list", RECOVERY, "/ptc/manager/", "--user", "manager")
    assert manager.returncode == 0 and "/ptc/manager/state" in manager.stdout, manager.stderr
    denied = ptc("config", "get", RECOVERY, "/ptc/secrets/munge.key", "--user", "manager")
    assert denied.returncode != 0 and "permission denied" in denied.stderr


def test_bad_snapshots_and_buckets_change_nothing(cluster: Path, ptc: Any, s3: str) -> None:
    with elastic_stopped(cluster):
        bad_snapshots_and_buckets(ptc, s3)


def bad_snapshots_and_buckets(ptc: Any, s3: str) -> None:
    before = durable_keys(NAME)
    s3c = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    key = f"ptc-etcd/{NAME}/snapshot.db"
    good = s3c.get_object(Bucket="snaps", Key=key)
    body = bytearray(good["Body"].read())
    body[len(body) // 2] ^= 0xFF
    s3c.put_object(Bucket="snaps", Key=key, Body=bytes(body), Metadata=good["Metadata"])
    corrupt = ptc("config", "restore", NAME, "--bucket", "snaps", "--endpoint-url", s3)
    assert corrupt.returncode == 2 and "checksum mismatch" in corrupt.stderr
    flat = ptc("config", "snapshot", NAME, "--bucket", "flat", "--endpoint-url", s3)
    assert flat.returncode == 2 and "versioning" in flat.stderr
    dead = ptc(
        "config", "snapshot", NAME, "--bucket", "snaps", "--endpoint-url", "http://127.0.0.1:9"
    )
    assert dead.returncode == 1 and "unreachable" in dead.stderr
    assert durable_keys(NAME) == before
