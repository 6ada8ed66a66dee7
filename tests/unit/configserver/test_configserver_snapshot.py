"""Snapshots to S3 and back, against a real etcd and moto's server — a local fake of S3 (AWS
cannot be reached from here) — on loopback. The snapshot taken from one etcd is restored with
etcdctl into a new data directory and served by a new etcd: every key must be back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from etcd_env import EtcdServer, free_port, start_etcd

from elastic.configserver.snapshot import (
    CorruptSnapshot,
    S3Location,
    SnapshotError,
    check_bucket,
    fetch,
    list_snapshots,
    take,
)
from elastic.errors import InputError, NotFoundError


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server (a fake of AWS S3) on a loopback port, for this module."""
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    assert server, "moto_server is missing: pip install 'moto[server]' (make setup)"
    port = free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("wb")
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture(autouse=True)
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)


def bucket(endpoint: str, name: str, versioned: bool = True) -> S3Location:
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=name)
    if versioned:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return S3Location(bucket=name, endpoint_url=endpoint)


def test_snapshot_round_trip_restores_every_key(
    etcd: EtcdServer, s3_endpoint: str, tmp_path: Path
) -> None:
    loc = bucket(s3_endpoint, "snaps")
    with etcd.client() as c:
        for i in range(20):
            c.put(f"/ptc/manager/round-trip/{i}", f"value {i}")
        c.put("/ptc/secrets/round-trip", "kept")
        before = {kv.key: kv.value for kv in c.range("/", prefix=True).kvs}
        first = take(c, loc, "demo")
        c.put("/ptc/manager/round-trip/later", "not in the first snapshot")
        second = take(c, loc, "demo")
    assert first.version_id != second.version_id and first.revision < second.revision
    listed = list_snapshots(loc, "demo")
    assert [i.version_id for i in listed] == [second.version_id, first.version_id]
    assert listed[0].latest and listed[1].sha256 == first.sha256

    path = tmp_path / "snap.db"
    got = fetch(loc, "demo", path, version=first.version_id)
    assert got.sha256 == first.sha256 and got.revision == first.revision
    # etcd's own restore (checks etcd's hash), then a new etcd serving the restored data.
    data = tmp_path / "restored"
    peer = free_port()
    subprocess.run(
        ["etcdctl", "snapshot", "restore", str(path), f"--data-dir={data}", "--name=m1",
         f"--initial-cluster=m1=https://127.0.0.1:{peer}", "--initial-cluster-token=test",
         f"--initial-advertise-peer-urls=https://127.0.0.1:{peer}"],
        check=True, capture_output=True, env={**os.environ, "ETCDCTL_API": "3"},
    )  # fmt: skip
    restored = start_etcd(etcd.pki, data, tmp_path / "restored.log")
    try:
        with restored.client() as c:  # the users and passwords came back too
            after = {kv.key: kv.value for kv in c.range("/", prefix=True).kvs}
    finally:
        restored.stop()
    assert after == before


def test_corrupt_snapshot_is_refused(etcd: EtcdServer, s3_endpoint: str, tmp_path: Path) -> None:
    loc = bucket(s3_endpoint, "rot")
    with etcd.client() as c:
        info = take(c, loc, "demo")
    s3 = loc.client()
    good = s3.get_object(Bucket=loc.bucket, Key=info.key)
    body = bytearray(good["Body"].read())
    body[len(body) // 2] ^= 0xFF  # one flipped byte, the recorded checksum kept
    s3.put_object(Bucket=loc.bucket, Key=info.key, Body=bytes(body), Metadata=good["Metadata"])
    path = tmp_path / "snap.db"
    with pytest.raises(CorruptSnapshot, match="checksum mismatch"):
        fetch(loc, "demo", path)
    assert not path.exists()
    fetch(loc, "demo", path, version=info.version_id)  # the good version is still there


def test_unversioned_bucket_is_refused_before_anything_is_taken(
    etcd: EtcdServer, s3_endpoint: str
) -> None:
    loc = bucket(s3_endpoint, "flat", versioned=False)
    with etcd.client() as c, pytest.raises(InputError, match="'flat' does not have versioning"):
        take(c, loc, "demo")
    assert loc.client().list_objects_v2(Bucket="flat").get("KeyCount", 0) == 0


def test_missing_bucket_and_unreachable_endpoint(s3_endpoint: str) -> None:
    with pytest.raises(NotFoundError, match="'nowhere' does not exist"):
        check_bucket(S3Location(bucket="nowhere", endpoint_url=s3_endpoint))
    dead = S3Location(bucket="snaps", endpoint_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(SnapshotError, match="unreachable"):
        check_bucket(dead)
    with pytest.raises(InputError, match="--bucket"):
        S3Location(bucket="").client()


def test_timer_job_snapshots_from_the_leader(
    etcd: EtcdServer, s3_endpoint: str, tmp_path: Path
) -> None:
    """The job the members' timer runs, with a node's /etc/ptc/etcd layout."""
    loc = bucket(s3_endpoint, "timer")
    node_dir = tmp_path / "etc-ptc-etcd"
    node_dir.mkdir()
    shutil.copy(etcd.pki / "ca.crt", node_dir / "ca.crt")
    for ext, sub in (("crt", "clients"), ("key", "clients"), ("password", "users")):
        shutil.copy(etcd.pki / sub / f"root.{ext}", node_dir / f"root.{ext}")
    (node_dir / "endpoints").write_text(etcd.url + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "elastic.configserver.snapshot_job", "--only-leader",
         "--bucket", "timer", "--cluster", "demo", "--endpoint-url", s3_endpoint,
         "--credentials", str(node_dir), "--local-endpoint", etcd.url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    [info] = list_snapshots(loc, "demo")
    assert info.version_id in out.stdout and info.sha256 in out.stdout
