"""Wall time of `ptc up` / `ptc down` on the local testbed.

Measures, with the real CLI:
- `ptc up` of profiles/slurm_cluster.py with 1+3 nodes, cold (node image removed first, so it is
  rebuilt) and warm (image cached);
- `ptc down` of that experiment;
- how `ptc up` grows from 1+1 to 1+7 nodes (warm);
- `ptc modify` of a running 1+3 experiment: one node added, then removed again.

Prints figures; asserts nothing. Run: .venv/bin/python benchmarks/testbed_times.py [--no-cold]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILE = "profiles/slurm_cluster.py"


def ptc(*args: str) -> float:
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "elastic.cli", *args],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-cold", action="store_true", help="skip the image rebuild")
    parser.add_argument("--max-compute", type=int, default=7)
    args = parser.parse_args()
    os.environ["PTC_HOME"] = tempfile.mkdtemp(prefix="ptc-bench-")
    os.environ.setdefault(
        "CONTAINERS_CONF", str(REPO / "elastic/testbed/backends/local/containers.conf")
    )

    from elastic.testbed.backends.local import image, podman

    rows: list[tuple[str, float]] = []
    if not args.no_cold:
        ref = image.default_recipe().ref
        if podman.run("rmi", ref, check=False).returncode != 0 and podman.image_exists(ref):
            sys.exit(f"cannot measure a cold start: {ref} is in use by containers")
        rows.append(
            (
                "up 1+3 cold (image build)",
                ptc("up", PROFILE, "--name", "cold", "-p", "computeNodeCount=3"),
            )
        )
        rows.append(("down 1+3", ptc("down", "cold")))
    rows.append(("up 1+3 warm", ptc("up", PROFILE, "--name", "warm", "-p", "computeNodeCount=3")))
    rows.append(("modify 1+3 -> 1+4", ptc("modify", "warm", "-p", "computeNodeCount=4")))
    rows.append(("modify 1+4 -> 1+3", ptc("modify", "warm", "-p", "computeNodeCount=3")))
    rows.append(("down 1+3", ptc("down", "warm")))
    for n in range(1, args.max_compute + 1):
        rows.append(
            (f"up 1+{n} warm", ptc("up", PROFILE, "--name", f"s{n}", "-p", f"computeNodeCount={n}"))
        )
        ptc("down", f"s{n}")
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:7.1f} s")


if __name__ == "__main__":
    main()
