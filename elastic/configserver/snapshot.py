"""Snapshots of the configuration server, kept off site in S3 (the thesis's cloud side).

Each snapshot is a new *version* of one object per cluster, ``PREFIX/CLUSTER/snapshot.db``, in a
bucket that must have versioning on, so every snapshot stays retrievable by its version id. The
object carries S3's own SHA-256 checksum and, as metadata, the SHA-256 of the bytes, the store's
revision the snapshot holds (at least), the cluster's name and when it was taken. Fetching one
checks both checksums before anything is restored; etcd checks its own hash again on restore.

The endpoint and credentials are boto3's ordinary settings (``--endpoint-url`` or
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, profiles), so the same
code talks to AWS on a real site. In the tests and the demo, the endpoint is moto's server, a
local fake of S3 on loopback.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic.configserver.client import EtcdClient
from elastic.errors import InputError, NotFoundError, PtcError
from elastic.events import OnEvent, Reporter

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

SNAPSHOT_NAME = "snapshot.db"
DEFAULT_PREFIX = "ptc-etcd/"


class SnapshotError(PtcError):
    """S3 could not be used: unreachable, refused, or no such object."""


class CorruptSnapshot(InputError):
    """A snapshot's bytes do not match its recorded checksum: it is refused."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str = DEFAULT_PREFIX
    endpoint_url: str | None = None  # None: AWS itself (or AWS_ENDPOINT_URL)
    region: str = "us-east-1"

    def key(self, cluster: str) -> str:
        prefix = self.prefix if not self.prefix or self.prefix.endswith("/") else self.prefix + "/"
        return f"{prefix}{cluster}/{SNAPSHOT_NAME}"

    def where(self) -> str:
        return f"s3://{self.bucket}" + (f" at {self.endpoint_url}" if self.endpoint_url else "")

    def client(self) -> S3Client:
        import boto3
        from botocore.config import Config

        if not self.bucket:
            raise InputError("--bucket: missing (the S3 bucket that keeps the snapshots)")
        config = Config(
            connect_timeout=5, read_timeout=60, retries={"max_attempts": 2, "mode": "standard"}
        )
        return boto3.client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region, config=config
        )


@dataclass(frozen=True)
class SnapshotInfo:
    cluster: str
    key: str
    version_id: str
    size: int
    sha256: str
    revision: int  # the store's revision when the snapshot began: it holds at least this
    taken_at: float
    latest: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _s3_error(err: Exception, loc: S3Location, what: str) -> PtcError:
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
    )

    if isinstance(err, EndpointConnectionError):
        return SnapshotError(f"{what}: the S3 endpoint {loc.endpoint_url or 'AWS'} is unreachable")
    if isinstance(err, NoCredentialsError):
        return InputError(
            f"{what}: no S3 credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
        )
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchBucket", "404") and "bucket" in what:
            return NotFoundError(f"{what}: bucket {loc.bucket!r} does not exist at {loc.where()}")
        if code in ("NoSuchKey", "NoSuchVersion", "404"):
            return NotFoundError(f"{what}: no such snapshot in {loc.where()}")
        return SnapshotError(f"{what}: S3 refused ({code}: {err})")
    return SnapshotError(f"{what}: {err}")


def check_bucket(loc: S3Location, s3: S3Client | None = None) -> None:
    """The bucket exists, answers, and keeps versions; otherwise an error naming what is wrong."""
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = s3 or loc.client()
    try:
        s3.head_bucket(Bucket=loc.bucket)
        status = s3.get_bucket_versioning(Bucket=loc.bucket).get("Status")
    except (BotoCoreError, ClientError) as err:
        raise _s3_error(err, loc, f"bucket {loc.bucket!r}") from err
    if status != "Enabled":
        raise InputError(
            f"--bucket: {loc.bucket!r} does not have versioning enabled (status: "
            f"{status or 'never enabled'}); snapshots need a versioned bucket"
        )


def take(
    client: EtcdClient, loc: S3Location, cluster: str, on_event: OnEvent | None = None
) -> SnapshotInfo:
    """Snapshot the cluster through ``client`` and upload it as a new version."""
    from botocore.exceptions import BotoCoreError, ClientError

    report = Reporter("snapshot", on_event)
    s3 = loc.client()
    report.begin(f"snapshot of {cluster} to {loc.where()}")
    check_bucket(loc, s3)  # before anything is taken: nothing is left half-done
    revision = client.range("/", keys_only=True, limit=1).revision
    started = time.time()
    with tempfile.TemporaryFile() as tmp:
        snap = client.snapshot(tmp)
        report.progress(snap.size, member=snap.member)
        tmp.seek(0)
        key = loc.key(cluster)
        try:
            put = s3.put_object(
                Bucket=loc.bucket,
                Key=key,
                Body=tmp,
                ChecksumAlgorithm="SHA256",
                Metadata={
                    "sha256": snap.sha256,
                    "revision": str(revision),
                    "cluster": cluster,
                    "taken-at": f"{started:.3f}",
                },
            )
        except (BotoCoreError, ClientError) as err:
            raise _s3_error(err, loc, f"upload of {key}") from err
    version = put.get("VersionId")
    if not version or version == "null":
        raise SnapshotError(f"{loc.where()} kept no version of {key}: is versioning suspended?")
    info = SnapshotInfo(cluster, key, version, snap.size, snap.sha256, revision, started, True)
    report.end(f"{key} version {version}: {snap.size} bytes, revision {revision}")
    return info


def list_snapshots(loc: S3Location, cluster: str) -> list[SnapshotInfo]:
    """Every version of the cluster's snapshot, newest first."""
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = loc.client()
    key = loc.key(cluster)
    try:
        listing = s3.list_object_versions(Bucket=loc.bucket, Prefix=key)
        out = []
        for v in listing.get("Versions", []):
            if v.get("Key") != key:
                continue
            head = s3.head_object(Bucket=loc.bucket, Key=key, VersionId=v["VersionId"])
            out.append(_info(cluster, key, v["VersionId"], head, bool(v.get("IsLatest"))))
    except (BotoCoreError, ClientError) as err:
        raise _s3_error(err, loc, f"listing {key}") from err
    return sorted(out, key=lambda i: i.taken_at, reverse=True)


def _info(cluster: str, key: str, version: str, head: Any, latest: bool) -> SnapshotInfo:
    meta = head.get("Metadata", {})
    return SnapshotInfo(
        cluster=meta.get("cluster", cluster),
        key=key,
        version_id=version,
        size=int(head.get("ContentLength", 0)),
        sha256=meta.get("sha256", ""),
        revision=int(meta.get("revision", 0) or 0),
        taken_at=float(meta.get("taken-at", 0) or 0),
        latest=latest,
    )


def fetch(loc: S3Location, cluster: str, out: Path, version: str | None = None) -> SnapshotInfo:
    """Download a snapshot (the latest, or ``version``) into ``out`` and check its checksum;
    :class:`CorruptSnapshot` when the bytes are not the ones recorded."""
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = loc.client()
    key = loc.key(cluster)
    what = f"snapshot {key}" + (f" version {version}" if version else "")
    try:
        args: dict[str, Any] = {"Bucket": loc.bucket, "Key": key}
        if version:
            args["VersionId"] = version
        got = s3.get_object(**args)
        digest = hashlib.sha256()
        with out.open("wb") as fh:
            for chunk in got["Body"].iter_chunks(1 << 20):
                fh.write(chunk)
                digest.update(chunk)
    except (BotoCoreError, ClientError) as err:
        out.unlink(missing_ok=True)
        raise _s3_error(err, loc, what) from err
    info = _info(cluster, key, str(got.get("VersionId") or version or ""), got, False)
    if not info.sha256:
        out.unlink(missing_ok=True)
        raise CorruptSnapshot(f"{what}: it records no sha256; not a ptc snapshot")
    if digest.hexdigest() != info.sha256:
        out.unlink(missing_ok=True)
        raise CorruptSnapshot(
            f"{what}: checksum mismatch (recorded sha256 {info.sha256[:16]}..., the bytes have "
            f"{digest.hexdigest()[:16]}...): the snapshot is corrupt and was not restored"
        )
    return info
