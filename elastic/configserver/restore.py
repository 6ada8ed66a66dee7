"""Restore an experiment's configuration server from a snapshot file.

Every member gets the snapshot, checked first with ``etcdctl snapshot status``. Then all members
stop, each keeps its old data directory aside, and ``etcdctl snapshot restore`` (which checks
etcd's own hash of the database) writes a fresh one with the member's name, peer URL and the
cluster's token, read from the member's /etc/default/etcd. The members start together and
form a new cluster holding exactly the snapshot's keys (users and roles included).

If any member fails before the members are started, every member gets its old data directory
back and runs again: nothing is left half-done. The snapshot may come from another experiment
(``ptc config restore NEW --cluster OLD``): once the new cluster has a quorum, its users get this
experiment's passwords (:mod:`elastic.configserver.rekey`), so this experiment's clients log in
to a server holding exactly the snapshot's keys.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from elastic.configserver import commands
from elastic.configserver.access import MemberAddress, members_of, open_experiment, pki_dir
from elastic.configserver.cluster import ClusterStatus, cluster_status
from elastic.configserver.errors import ConfigServerError
from elastic.configserver.rekey import Rekeyed, bundle, check, rekey
from elastic.errors import PtcError, RemoteError
from elastic.events import OnEvent, Reporter
from elastic.testbed import experiment as experiments
from elastic.testbed.experiment import Experiment

REMOTE_SNAPSHOT = "/var/lib/etcd/ptc-restore.db"
ENV_FILE = "/etc/default/etcd"
HEALTH_WAIT_S = 120.0


@dataclass(frozen=True)
class RestoreResult:
    members: list[str]
    revision: int
    elapsed_s: float
    status: ClusterStatus
    rekeyed: Rekeyed


def _member_settings(exp: Experiment, member: str) -> dict[str, str]:
    out = commands.run(exp, member, f"cat {ENV_FILE}")
    settings = {}
    for line in out.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            settings[k.strip()] = v.strip()
    for needed in (
        "ETCD_NAME",
        "ETCD_DATA_DIR",
        "ETCD_INITIAL_CLUSTER",
        "ETCD_INITIAL_CLUSTER_TOKEN",
        "ETCD_INITIAL_ADVERTISE_PEER_URLS",
        "ETCD_ADVERTISE_CLIENT_URLS",
    ):
        if needed not in settings:
            raise PtcError(f"{member}: {ENV_FILE} has no {needed}: was the etcd role deployed?")
    return settings


def _parallel(members: list[MemberAddress], work: Callable[[MemberAddress], object]) -> None:
    """``work`` on every member at once; the first failure is raised once all have finished."""
    with ThreadPoolExecutor(max_workers=max(1, len(members))) as pool:
        futures = [pool.submit(work, m) for m in members]
    for future in futures:
        future.result()


def restore(name: str, snapshot: Path, on_event: OnEvent | None = None) -> RestoreResult:
    """Replace experiment ``name``'s configuration server with the snapshot's contents."""
    report = Reporter("restore", on_event)
    exp = experiments.load(name)
    members = members_of(exp)
    started = time.monotonic()
    report.begin(f"restore {snapshot.name} onto {', '.join(m.name for m in members)}")

    # 1. Nothing changes until every member is reachable, configured and holds a sound copy,
    # and this machine holds what re-keying needs (the CA and the users' passwords).
    pki = pki_dir(exp)
    check(pki)
    settings = {m.name: _member_settings(exp, m.name) for m in members}
    for m in members:
        report.status(f"copying the snapshot to {m.name}")
        commands.copy(exp, m.name, snapshot, REMOTE_SNAPSHOT)
        commands.run(
            exp, m.name, f"ETCDCTL_API=3 etcdctl snapshot status {REMOTE_SNAPSHOT} -w json"
        )
    stamp = time.strftime("%Y%m%dT%H%M%S")

    # 2. Stop every member; keep each data directory aside.
    def stop(m: MemberAddress) -> None:
        data = shlex.quote(settings[m.name]["ETCD_DATA_DIR"])
        commands.run(exp, m.name, f"systemctl stop etcd && if [ -e {data} ]; then "
                                f"mv {data} {data}.replaced-{stamp}; fi")  # fmt: skip

    def put_back(m: MemberAddress) -> None:
        data = shlex.quote(settings[m.name]["ETCD_DATA_DIR"])
        commands.run(exp, m.name, f"if [ -e {data}.replaced-{stamp} ]; then rm -rf {data} && "
                                f"mv {data}.replaced-{stamp} {data}; fi; "
                                "systemctl start --no-block etcd")  # fmt: skip

    def rebuild(m: MemberAddress) -> None:
        s = settings[m.name]
        command = " ".join(
            [
                "ETCDCTL_API=3 etcdctl snapshot restore",
                REMOTE_SNAPSHOT,
                f"--name={shlex.quote(s['ETCD_NAME'])}",
                f"--data-dir={shlex.quote(s['ETCD_DATA_DIR'])}",
                f"--initial-cluster={shlex.quote(s['ETCD_INITIAL_CLUSTER'])}",
                f"--initial-cluster-token={shlex.quote(s['ETCD_INITIAL_CLUSTER_TOKEN'])}",
                f"--initial-advertise-peer-urls={shlex.quote(s['ETCD_INITIAL_ADVERTISE_PEER_URLS'])}",
                f"&& chown -R etcd:etcd {shlex.quote(s['ETCD_DATA_DIR'])}",
                f"&& chmod 700 {shlex.quote(s['ETCD_DATA_DIR'])}",
            ]
        )
        commands.run(exp, m.name, command)

    report.status("stopping every member")
    try:
        _parallel(members, stop)
        report.status("restoring each member's data from the snapshot")
        _parallel(members, rebuild)
    except PtcError:
        report.warning("restore failed: putting every member's old data back")
        _parallel(members, put_back)
        raise

    # 3. Start together (a new cluster forms only with a quorum of its members).
    report.status("starting every member")
    _parallel(members, lambda m: commands.run(exp, m.name, "systemctl start --no-block etcd"))
    for m in members:
        commands.run(exp, m.name, f"rm -f {REMOTE_SNAPSHOT}")
    deadline = time.monotonic() + HEALTH_WAIT_S
    first = members[0].name
    url = settings[first]["ETCD_ADVERTISE_CLIENT_URLS"].split(",")[0]
    report.status(f"setting this experiment's passwords on the restored users (via {first})")
    rekeyed = _rekey_when_up(exp, first, url, pki, deadline, stamp)
    if rekeyed.kept:
        report.warning(
            f"users of the snapshot with no password in {pki}/users keep theirs: "
            f"{', '.join(rekeyed.kept)}"
        )
    last = "no answer yet"
    with open_experiment(name) as client:
        while time.monotonic() < deadline:
            try:
                st = cluster_status(client)
                if st.healthy:
                    report.end(f"restored at revision {st.revision}")
                    return RestoreResult(
                        [m.name for m in members], st.revision, time.monotonic() - started, st,
                        rekeyed,
                    )  # fmt: skip
                last = st.quorum_error or "; ".join(
                    f"{x.name}: {x.error}" for x in st.members if not x.healthy
                )
            except ConfigServerError as err:
                last = str(err)
            time.sleep(1)
    raise PtcError(
        f"the restored configuration server did not become healthy in {HEALTH_WAIT_S:.0f} s: "
        f"{last} (the old data is kept as DATA_DIR.replaced-{stamp} on every member)"
    )


def _rekey_when_up(
    exp: Experiment, member: str, url: str, pki: Path, deadline: float, stamp: str
) -> Rekeyed:
    """Re-key as soon as the new cluster has a quorum (until then etcdctl cannot write)."""
    stream = bundle(pki)  # one certificate for every attempt: it outlives the deadline
    while True:
        try:
            return rekey(exp, member, url, stream)
        except RemoteError as err:
            if time.monotonic() >= deadline:
                raise PtcError(
                    f"the restored configuration server did not accept this experiment's "
                    f"passwords in {HEALTH_WAIT_S:.0f} s: {err} (the old data is kept as "
                    f"DATA_DIR.replaced-{stamp} on every member)"
                ) from err
            time.sleep(2)
