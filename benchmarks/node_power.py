"""Node operations on one node of a local experiment: how long they take, what they free.

    python benchmarks/node_power.py EXPERIMENT [--node node-0]

On a running (ready) local experiment, for one node:

- ``podman stats --no-stream`` of the node's container (memory, CPU) and the host's
  MemAvailable, before the power-off;
- power-off seconds, then the same figures with the node off;
- power-on seconds, with its split as the testbed reports it (podman start, re-wiring the LAN
  and any shaping, sshd answering with the pinned host keys, ready);
- reload seconds (a fresh disk: the node's files are lost, so run it on a test experiment).

Host CPU is the share of one second of all cores not idle, from /proc/stat over ``--sample``
seconds. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elastic.events import Event, Kind, collect  # noqa: E402
from elastic.testbed import experiment as experiments  # noqa: E402
from elastic.testbed import nodeops  # noqa: E402
from elastic.testbed.backends.local import podman  # noqa: E402
from elastic.testbed.backends.local.backend import container_name  # noqa: E402


def container_stats(name: str) -> str:
    proc = podman.run("stats", "--no-stream", "--no-reset", "--format", "json", name, check=False)
    if proc.returncode != 0:
        return f"no figures ({proc.stderr.strip() or 'not running'})"
    [row] = json.loads(proc.stdout)
    return (
        f"mem {row.get('mem_usage', '?')}, cpu {row.get('cpu_percent', '?')} "
        f"(cpu time {row.get('cpu_time', '?')}), pids {row.get('pids', '?')}"
    )


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def host_cpu_busy(seconds: float) -> float:
    """Percent of all cores busy over ``seconds``."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # idle + iowait

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 100.0 * (1 - (idle1 - idle0) / max(1, total1 - total0))


def timed(operation: str, exp: experiments.Experiment, node: str) -> tuple[float, list[Event]]:
    events: list[Event] = []
    started = time.monotonic()
    getattr(nodeops, operation)(exp, [node], collect(events))
    return time.monotonic() - started, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("--node", default="node-0")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds of host CPU sampling")
    parser.add_argument("--no-reload", action="store_true", help="keep the node's disk")
    args = parser.parse_args()
    exp = experiments.load(args.experiment)
    name = container_name(exp.name, args.node)
    if nodeops.states(exp).get(args.node) != "running":
        sys.exit(f"{args.node} of {exp.name} is not running: `ptc node power-on` it first")

    print(f"experiment {exp.name}, node {args.node} ({name})")
    print(f"before power-off: {container_stats(name)}")
    print(f"  host MemAvailable {mem_available_mib():.0f} MiB, "
          f"CPU busy {host_cpu_busy(args.sample):.1f}% over {args.sample:g}s")  # fmt: skip
    off, _ = timed("power_off", exp, args.node)
    print(f"power-off: {off:.2f}s")
    print(f"after power-off: {container_stats(name)}")
    print(f"  host MemAvailable {mem_available_mib():.0f} MiB, "
          f"CPU busy {host_cpu_busy(args.sample):.1f}% over {args.sample:g}s")  # fmt: skip

    on, events = timed("power_on", exp, args.node)
    split = {
        str(e.data["step"]): float(e.data["seconds"])
        for e in events
        if e.kind is Kind.STATUS and e.data.get("node") == args.node and "step" in e.data
    }
    parts = ", ".join(f"{step} {seconds:.2f}s" for step, seconds in split.items())
    print(f"power-on: {on:.2f}s ({parts})")
    if not args.no_reload:
        again, _ = timed("reload", exp, args.node)
        print(f"reload: {again:.2f}s")


if __name__ == "__main__":
    main()
