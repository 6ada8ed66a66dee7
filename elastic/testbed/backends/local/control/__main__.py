"""``python -m elastic.testbed.backends.local.control serve EXP``: the service of one experiment, in the
foreground (what `ptc up` starts detached, and what a supervisor would run)."""

from __future__ import annotations

import argparse
import logging

from elastic.testbed.backends.local.control import service


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m elastic.testbed.backends.local.control")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve one experiment's nodes")
    serve.add_argument("experiment")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    service.serve(args.experiment)


if __name__ == "__main__":
    main()
