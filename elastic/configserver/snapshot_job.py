"""``python3 -m elastic.configserver.snapshot_job``: the snapshot a member's systemd timer takes.

Every member runs the timer; only the member that is the leader when it fires takes the
snapshot, so a period gives one snapshot while a quorum exists, whichever members are up. It
runs with the node's system Python (python3-boto3) and root's credentials in /etc/ptc/etcd;
S3 settings come from its command line and boto3's environment (the unit's EnvironmentFile).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from elastic.configserver.client import Credentials, Endpoint, EtcdClient
from elastic.configserver.node import NODE_CLIENT_DIR, open_node
from elastic.configserver.snapshot import DEFAULT_PREFIX, S3Location, take
from elastic.errors import PtcError
from elastic.events import to_logger

log = logging.getLogger("ptc.etcd.snapshot")


def is_leader(local: Endpoint, credentials: Credentials) -> bool:
    with EtcdClient([local], credentials) as client:
        status = client.status(local)
    return status.member_id != 0 and status.member_id == status.leader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ptc-etcd-snapshot", description=__doc__.split("\n")[0])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--cluster", required=True, help="names the snapshot object")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX)
    parser.add_argument("--endpoint-url", default=None, help="S3 endpoint (default: AWS)")
    parser.add_argument("--credentials", type=Path, default=NODE_CLIENT_DIR)
    parser.add_argument(
        "--local-endpoint",
        default="https://127.0.0.1:2379",
        help="this member; with --only-leader, nothing happens unless it leads",
    )
    parser.add_argument("--only-leader", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        creds = Credentials.from_dir(args.credentials, "root")
        if args.only_leader:
            local = Endpoint(args.local_endpoint, "127.0.0.1", "local")
            if not is_leader(local, creds):
                log.info("this member is not the leader: the leader takes the snapshot")
                return 0
        loc = S3Location(args.bucket, args.prefix, args.endpoint_url or None)
        with open_node("root", args.credentials) as client:
            info = take(client, loc, args.cluster, on_event=to_logger(log))
    except PtcError as err:
        log.error("%s", err)
        return 1
    print(f"{info.key} version {info.version_id} sha256 {info.sha256} revision {info.revision}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
