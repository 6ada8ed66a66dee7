"""N sequential commands to one node, four ways: which transport the remote seam should use.

- ``openssh``: a fresh ``ssh -F SSH_CONFIG`` per command (``elastic.remote.ssh.run``, what the
  library does);
- ``openssh-mux``: the same with OpenSSH connection sharing (``ControlMaster=auto``,
  ``ControlPersist``): one login, then every command over it;
- ``fabric-fresh``: a new fabric Connection per command (as ``ptc run`` opens one per host);
- ``fabric-reused``: one fabric Connection for all commands.

Every command is ``true`` on the node; the first command of each way is included. Prints a
table (per command: mean, median, max, in ms) and, with ``--json FILE``, writes it. Asserts
nothing. Needs a running experiment (``ptc up`` is enough; no deploy):

    PTC_HOME=... .venv/bin/python benchmarks/ssh_seam.py --name EXP [--node head] [-n 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from elastic.remote import group, ssh
from elastic.testbed import experiment as experiments


def timed(n: int, one: Callable[[], object]) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        one()
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="a running experiment")
    parser.add_argument("--node", default="head")
    parser.add_argument("-n", type=int, default=50, help="commands per way")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    config = experiments.load(args.name).ssh_config_path
    node, n = args.node, args.n
    rows: dict[str, list[float]] = {}

    rows["openssh"] = timed(n, lambda: ssh.run(config, node, "true", timeout=30))

    with tempfile.TemporaryDirectory(prefix="ptc-mux-") as tmp:
        mux: dict[str, str | int] = {
            "ControlMaster": "auto",
            "ControlPath": f"{tmp}/%C",
            "ControlPersist": 60,
        }
        rows["openssh-mux"] = timed(
            n,
            lambda: ssh.check(ssh.execute(config, node, "true", timeout=30, options=mux)),
        )
        stop = ssh.argv(node, config=config, options=mux, extra=["-O", "exit"])
        subprocess.run(stop, capture_output=True, timeout=30, check=False)  # ends the master

    options = group.Options(config)

    def fresh() -> None:
        conn = group.connect(node, options)
        try:
            conn.run("true", hide=True, in_stream=False)
        finally:
            conn.close()

    rows["fabric-fresh"] = timed(n, fresh)
    conn = group.connect(node, options)
    try:
        rows["fabric-reused"] = timed(n, lambda: conn.run("true", hide=True, in_stream=False))
    finally:
        conn.close()

    figures = {
        way: {
            "n": len(t),
            "total_s": round(sum(t), 3),
            "mean_ms": round(1000 * statistics.mean(t), 1),
            "median_ms": round(1000 * statistics.median(t), 1),
            "max_ms": round(1000 * max(t), 1),
        }
        for way, t in rows.items()
    }
    print(f"{n} sequential `true` on {node} of {args.name}")
    print(f"{'way':<15}{'total s':>9}{'mean ms':>9}{'median ms':>11}{'max ms':>9}")
    for way, f in figures.items():
        print(f"{way:<15}{f['total_s']:>9}{f['mean_ms']:>9}{f['median_ms']:>11}{f['max_ms']:>9}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
