"""`ptc config`: the experiment's configuration server (etcd) — status, get/put/list, and
snapshots to S3 with restore.

Every command reaches the members through an SSH tunnel from this machine, with the
credentials the etcd role generated for the experiment (``--user`` picks the etcd user; root,
the administrator, by default).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic.cli.draw import progress
from elastic.configserver.access import open_experiment
from elastic.configserver.cluster import cluster_status, list_keys
from elastic.configserver.inventory import KEY as INVENTORY_KEY
from elastic.configserver.inventory import publish
from elastic.configserver.restore import restore
from elastic.configserver.snapshot import DEFAULT_PREFIX, S3Location, fetch, list_snapshots, take
from elastic.errors import InputError, PtcError
from elastic.testbed import experiment as experiments

app = typer.Typer(no_args_is_help=True)
console = Console()

Name = Annotated[str, typer.Argument(help="experiment name")]
User = Annotated[
    str, typer.Option("--user", "-u", help="etcd user to act as (root: the administrator)")
]
Members = Annotated[
    list[str] | None,
    typer.Option("--member", "-m", help="talk to this member only (repeatable)"),
]


def _size(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"


@app.command("status")
def status(name: Name, member: Members = None, user: User = "root") -> None:
    """Members, leader, health and revision."""
    with open_experiment(name, user, member or ()) as client:
        st = cluster_status(client)
    table = Table(title=f"configuration server of {name}")
    for column in ("member", "id", "health", "leader", "revision", "raft term", "db", "version"):
        table.add_column(column)
    for m in st.members:
        table.add_row(
            m.name,
            f"{m.id:x}" if m.id else "-",
            "[green]healthy[/]" if m.healthy else f"[red]unhealthy[/] {m.error}",
            "*" if m.leader else "",
            str(m.revision or "-"),
            str(m.raft_term or "-"),
            _size(m.db_size) if m.db_size else "-",
            m.version or "-",
        )
    console.print(table)
    console.print(
        f"leader: {st.leader or 'none'}   revision: {st.revision}   "
        + ("quorum: yes" if st.quorum else f"[red]quorum: no[/] ({st.quorum_error})")
    )
    if not st.healthy:
        raise typer.Exit(1)


@app.command("get")
def get(
    name: Name,
    key: Annotated[str, typer.Argument(help="the key, e.g. /ptc/partitions/ptc/x")],
    prefix: Annotated[bool, typer.Option("--prefix", help="every key under KEY")] = False,
    user: User = "root",
) -> None:
    """Print a key's value (with --prefix: every key under it, one `key = value` a line)."""
    _check_key(key)
    with open_experiment(name, user) as client:
        if prefix:
            _, kvs = list_keys(client, key)
            for kv in kvs:
                console.print(f"{kv.key} = {kv.value.decode(errors='replace')}", highlight=False)
            if not kvs:
                raise PtcError(f"no key under {key}")
            return
        found = client.get(key)
    if found is None:
        raise PtcError(f"{key}: no such key")
    sys.stdout.buffer.write(found.value + (b"" if found.value.endswith(b"\n") else b"\n"))


@app.command("put")
def put(
    name: Name,
    key: Annotated[str, typer.Argument(help="the key")],
    value: Annotated[str | None, typer.Argument(help="the value (or --file)")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="read the value from this file")
    ] = None,
    user: User = "root",
) -> None:
    """Store VALUE (or a file's contents) under KEY."""
    _check_key(key)
    if (value is None) == (file is None):
        raise InputError("give the value either as an argument or with --file, not both")
    if file is not None:
        if not file.is_file():
            raise InputError(f"--file: {file} does not exist")
        data = file.read_bytes()
    else:
        data = (value or "").encode()
    with open_experiment(name, user) as client:
        revision = client.put(key, data)
    console.print(f"{key}: {len(data)} bytes at revision {revision}")


@app.command("list")
def list_(
    name: Name,
    prefix: Annotated[str, typer.Argument(help="key prefix")] = "/",
    user: User = "root",
) -> None:
    """Keys under PREFIX with their revisions and sizes (values are not shown)."""
    _check_key(prefix)
    with open_experiment(name, user) as client:
        revision, kvs = list_keys(client, prefix)
    table = Table(title=f"{len(kvs)} keys under {prefix} at revision {revision}")
    for column in ("key", "bytes", "modified at", "version", "lease"):
        table.add_column(column)
    for kv in kvs:
        table.add_row(
            kv.key,
            str(len(kv.value)),
            str(kv.mod_revision),
            str(kv.version),
            f"{kv.lease:x}" if kv.lease else "",
        )
    console.print(table)


def _check_key(key: str) -> None:
    if not key.startswith("/"):
        raise InputError(f"key {key!r}: keys start with '/' (e.g. /ptc/manager/)")


Bucket = Annotated[
    str,
    typer.Option("--bucket", envvar="PTC_SNAPSHOT_BUCKET", help="S3 bucket (versioning on)"),
]
EndpointUrl = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        envvar="AWS_ENDPOINT_URL",
        help="S3 endpoint (default: AWS; locally, moto's server — a fake of S3)",
    ),
]
Prefix = Annotated[str, typer.Option("--prefix", help="key prefix in the bucket")]
Cluster = Annotated[
    str | None,
    typer.Option("--cluster", help="whose snapshots (default: the experiment's own name)"),
]


def _location(bucket: str, endpoint_url: str | None, prefix: str) -> S3Location:
    return S3Location(bucket=bucket, prefix=prefix, endpoint_url=endpoint_url)


@app.command("snapshot")
def snapshot(
    name: Name,
    bucket: Bucket = "",
    endpoint_url: EndpointUrl = None,
    prefix: Prefix = DEFAULT_PREFIX,
) -> None:
    """Snapshot the configuration server into a new version of its S3 object."""
    loc = _location(bucket, endpoint_url, prefix)
    with open_experiment(name) as client, progress(console) as on_event:
        info = take(client, loc, name, on_event=on_event)
    console.print(
        f"{info.key} version {info.version_id}: {info.size} bytes, sha256 {info.sha256}, "
        f"revision {info.revision}",
        highlight=False,
    )


@app.command("snapshots")
def snapshots(
    name: Name,
    bucket: Bucket = "",
    endpoint_url: EndpointUrl = None,
    prefix: Prefix = DEFAULT_PREFIX,
    cluster: Cluster = None,
) -> None:
    """The snapshots kept for a cluster, newest first."""
    found = list_snapshots(_location(bucket, endpoint_url, prefix), cluster or name)
    table = Table(title=f"snapshots of {cluster or name}")
    for column in ("version", "taken (UTC)", "bytes", "revision", "sha256"):
        table.add_column(column)
    for info in found:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(info.taken_at))
        table.add_row(
            info.version_id + (" (latest)" if info.latest else ""),
            when,
            str(info.size),
            str(info.revision),
            info.sha256[:16],
        )
    console.print(table)


@app.command("restore")
def restore_(
    name: Name,
    bucket: Bucket = "",
    endpoint_url: EndpointUrl = None,
    prefix: Prefix = DEFAULT_PREFIX,
    cluster: Cluster = None,
    version: Annotated[
        str | None, typer.Option("--version", help="S3 version id (default: the latest)")
    ] = None,
) -> None:
    """Replace the configuration server's data with a snapshot from S3 (checksum checked)."""
    loc = _location(bucket, endpoint_url, prefix)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.db"
        info = fetch(loc, cluster or name, path, version)
        console.print(
            f"{info.key} version {info.version_id}: sha256 verified, revision {info.revision}",
            highlight=False,
        )
        with progress(console) as on_event:
            result = restore(name, path, on_event=on_event)
    console.print(
        f"restored {', '.join(result.members)} in {result.elapsed_s:.1f} s; "
        f"revision now {result.revision}"
    )
    keyed = result.rekeyed
    console.print(
        f"passwords from this experiment's PKI: {', '.join(keyed.set) or 'none'}", highlight=False
    )
    if keyed.missing:
        console.print(
            f"users this experiment has and the snapshot lacks: {', '.join(keyed.missing)} "
            f"(`ptc deploy {name}` adds them)",
            highlight=False,
        )


@app.command("publish")
def publish_(name: Name) -> None:
    """Publish the experiment's inventory (hosts, groups, host variables) in the configuration
    server, where the ptc_etcd inventory plugin reads it on any node."""
    exp = experiments.load(name)
    with open_experiment(name) as client:
        revision = publish(client, exp.inventory_path)
    console.print(f"{INVENTORY_KEY} published at revision {revision}", highlight=False)
