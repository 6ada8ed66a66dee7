"""One set of tokens for every manager: kept in the configuration server, copied to each node.

With a manager on every configuration-server node, a client's token must open every one of
them, and a rebuilt node must get the tokens back. The elastic role runs, on each manager's
node before the manager starts (``TOKENS_DIR``: ``elastic.node_paths.ELASTIC_TOKENS_DIR``)::

    python -m elastic.manager.tokens --dir TOKENS_DIR admin slurm ref

For each name, the token under ``--prefix`` in etcd (``/ptc/secrets/elastic/``: the cluster's
secrets, which only etcd's root may read) wins; when etcd has none, the node's file (or a new
token) is stored with a create-only transaction, so nodes that race agree on the first one
stored. The file is then written (root-only) if it differs. It prints which files changed, as
JSON; never a token.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

from elastic.atomic import write_text
from elastic.configserver.client import (
    EtcdClient,
    compare_create_revision,
    op_get,
    op_put,
    parse_range,
)
from elastic.configserver.node import NODE_CLIENT_DIR, open_node
from elastic.errors import PtcError
from elastic.manager.auth import Tokens

DEFAULT_PREFIX = "/ptc/secrets/elastic/"


def sync(client: EtcdClient, tokens: Tokens, names: list[str], prefix: str) -> list[str]:
    """Make the token files match the configuration server's; the names whose file changed."""
    changed = []
    for name in names:
        path = tokens.path(name)
        key = prefix + path.name
        try:
            local = path.read_text().strip()
        except FileNotFoundError:
            local = ""
        kv = client.get(key)
        if kv is not None:
            value = kv.text.strip()
        else:
            mine = local or secrets.token_urlsafe(32)
            result = client.txn(
                [compare_create_revision(key, "=", 0)], [op_put(key, mine)], [op_get(key)]
            )
            if result.succeeded:
                value = mine
            else:
                kvs = parse_range(result.responses[0]["response_range"]).kvs
                if not kvs:
                    raise PtcError(f"etcd key {key}: neither created nor found")
                value = kvs[0].text.strip()
        if not value:
            raise PtcError(f"etcd key {key}: empty token")
        if value != local:
            tokens.directory.mkdir(parents=True, exist_ok=True)
            tokens.directory.chmod(0o700)
            write_text(path, value + "\n", mode=0o600)
            changed.append(name)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elastic.manager.tokens", description=__doc__.split("\n")[0]
    )
    parser.add_argument("names", nargs="+", help="admin, observer, or a partition's name")
    parser.add_argument("--dir", type=Path, required=True, help="the tokens directory")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX)
    parser.add_argument("--user", default="root", help="the etcd user (the secrets are root's)")
    parser.add_argument("--credentials", type=Path, default=NODE_CLIENT_DIR)
    args = parser.parse_args(argv)
    try:
        with open_node(args.user, args.credentials) as client:
            changed = sync(client, Tokens(args.dir), args.names, args.prefix)
    except PtcError as err:
        print(f"tokens: {err}", file=sys.stderr)
        return 1
    print(json.dumps({"changed": changed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
