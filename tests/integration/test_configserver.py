"""The configuration server (issue 11), live, on one experiment with three etcd members
(`profiles/slurm_cluster.py computeNodeCount=1 configServerCount=3`).

Acceptance 1: `ptc deploy` gives a healthy TLS-only etcd cluster and `ptc verify` (with
tests/infra/test_etcd.py) passes. Then, through `ptc config`: status, roles, the cluster's
secrets kept in etcd; a head whose etcd data and secrets are wiped regains the same identity
(acceptance 4 as far as the testbed can replace a node: same munge key and database password,
compute nodes untouched); a snapshot to S3 survives the configuration server's destruction
(acceptance 5); and bad input is refused before anything changes (acceptance 6).

S3 is moto's server — a local fake of S3, since AWS cannot be reached — started by this module
on loopback; the snapshot travels through the workstation's SSH tunnel as it would to AWS.

The tests run in file order. While developing, PTC_TEST_CFG_REUSE=$PTC_HOME/experiments/NAME
runs them against an experiment already deployed (it is left up).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from naming import experiment_name
from remote import ssh

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = experiment_name("cfgit", "PTC_TEST_CFG_NAME")
MEMBERS = ["head", "cfg-1", "cfg-2"]
DATA_DIR = "/var/lib/etcd/ptc"
SECRETS = "/etc/ptc/secrets"


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
    proc = ptc("deploy", NAME)
    assert proc.returncode == 0, f"ptc deploy {NAME} failed:\n{proc.stderr[-6000:]}"
    return expdir


def keys(name: str) -> dict[str, bytes]:
    """Every key and value of the configuration server, read as root through the tunnel."""
    from elastic.configserver.access import open_experiment

    with open_experiment(name) as client:
        return {kv.key: kv.value for kv in client.range("/", prefix=True).kvs}


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


def test_the_cluster_secrets_are_kept_in_etcd(cluster: Path) -> None:
    held = keys(NAME)
    for name in ("munge.key", "slurmdbd-db-password"):
        value = held.get(f"/ptc/secrets/{name}")
        assert value, f"/ptc/secrets/{name} is not in the configuration server"
        assert hashlib.sha256(value).hexdigest() == sha(f"{SECRETS}/{name}", cluster, "head")


def test_a_wiped_head_regains_the_cluster_identity(cluster: Path, ptc: Any) -> None:
    """The head loses its etcd member data and every secret; a deploy of the head alone brings
    it back as a member with the same munge key and database password, and node-0, untouched,
    still runs its jobs."""
    munge_before = sha("/etc/munge/munge.key", cluster, "node-0")
    db_before = sha(f"{SECRETS}/slurmdbd-db-password", cluster, "head")
    ssh(
        cluster,
        "head",
        f"systemctl stop etcd && rm -rf {DATA_DIR} {SECRETS}/munge.key "
        f"{SECRETS}/slurmdbd-db-password /etc/munge/munge.key",
    )
    proc = ptc("deploy", NAME, "--limit", "head", timeout=2400)
    assert proc.returncode == 0, f"redeploy of the head failed:\n{proc.stderr[-6000:]}"
    assert sha("/etc/munge/munge.key", cluster, "head") == munge_before
    assert sha(f"{SECRETS}/slurmdbd-db-password", cluster, "head") == db_before
    assert sha("/etc/munge/munge.key", cluster, "node-0") == munge_before
    status = ptc("config", "status", NAME)
    assert status.returncode == 0 and "quorum: yes" in status.stdout, status.stdout
    job = ssh(cluster, "head", "srun -N1 -w node-0 --time=1 hostname", check=False)
    assert job.returncode == 0 and job.stdout.strip() == "node-0", job.stderr


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)
    assert not check or proc.returncode == 0, f"podman {' '.join(args)}: {proc.stderr}"
    return proc


def leader(name: str) -> str:
    from elastic.configserver.access import open_experiment
    from elastic.configserver.cluster import cluster_status

    with open_experiment(name) as client:
        found = cluster_status(client).leader
    assert found, f"{name}: no leader"
    return found


def test_faults_lose_no_acknowledged_write(cluster: Path) -> None:
    """Acceptance 2: three clients on node-0, ~1000 operations, while the leader's node is
    frozen, a minority member is cut off the LAN, and a member restarts."""
    from elastic.configserver.access import open_experiment
    from elastic.configserver.faults import check, final_state, load, unavailability

    creds = "/tmp/cfg-faults"
    pki = cluster / "inventory" / "pki" / "etcd"
    ssh(cluster, "node-0", f"rm -rf {creds} && mkdir -m 700 {creds}")
    files = [pki / "ca.crt", *(pki / "clients" / f"root.{e}" for e in ("crt", "key"))]
    files.append(pki / "users" / "root.password")
    subprocess.run(
        ["scp", "-q", "-F", str(cluster / "inventory" / "ssh_config"), *map(str, files),
         f"node-0:{creds}/"],
        check=True, timeout=60,
    )  # fmt: skip
    endpoints = " ".join(f"https://{m}:2379" for m in MEMBERS)
    ssh(cluster, "node-0", f"printf '%s\\n' {endpoints} > {creds}/endpoints")
    workload = subprocess.Popen(
        ["ssh", "-F", str(cluster / "inventory" / "ssh_config"), "node-0",
         f"cd /local/repository && python3 -m elastic.configserver.faults --credentials {creds}"
         " --ops 1000 --duration 50 --think 0.1 --timeout 2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
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
        podman("exec", container + minority, "ip", "link", "set", lan, "down")
        time.sleep(8)
        podman("exec", container + minority, "ip", "link", "set", lan, "up")
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


def test_snapshot_survives_the_destruction_of_the_configuration_server(
    cluster: Path, ptc: Any, s3: str
) -> None:
    s3args = ["--bucket", "snaps", "--endpoint-url", s3]
    before = keys(NAME)
    assert "/ptc/secrets/munge.key" in before
    snap = ptc("config", "snapshot", NAME, *s3args)
    assert snap.returncode == 0, snap.stderr
    # Destroy it: every member's data is gone.
    for member in MEMBERS:
        ssh(cluster, member, f"systemctl stop etcd && rm -rf {DATA_DIR}")
    restored = ptc("config", "restore", NAME, *s3args, timeout=900)
    assert restored.returncode == 0, restored.stderr
    assert "sha256 verified" in restored.stdout
    assert keys(NAME) == before


def test_bad_snapshots_and_buckets_change_nothing(cluster: Path, ptc: Any, s3: str) -> None:
    before = keys(NAME)
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
    assert keys(NAME) == before
