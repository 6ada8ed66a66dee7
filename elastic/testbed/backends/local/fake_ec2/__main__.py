"""``python -m elastic.testbed.backends.local.fake_ec2 serve NAME``: a FAKE EC2 region of one
experiment in the foreground (``ptc fake-ec2 start`` runs it detached)."""

from __future__ import annotations

import logging
import sys

from elastic.testbed.backends.local.fake_ec2 import service


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "serve":
        print(
            "usage: python -m elastic.testbed.backends.local.fake_ec2 serve NAME", file=sys.stderr
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    service.serve(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
