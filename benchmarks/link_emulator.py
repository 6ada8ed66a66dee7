"""RTT accuracy and TCP throughput through ptc's userspace stand-in for netem (linkemu.py).

    sudo .venv/bin/python benchmarks/link_emulator.py [--seconds 5] [--pings 200]

Builds, in scratch network namespaces of its own (``ptcbench-*``), the local testbed's layout of
one shaped interface: node A's veth -> emulator -> a veth pair on a bridge <- node B's veth.
For each case it measures, from A to B, the round-trip time of small UDP echoes (min, median,
99th percentile and max over ``--pings``) and the TCP throughput of one bulk stream for
``--seconds`` in each direction, with Python sockets. Cases: the plain bridge (no emulator),
the emulator with no delay, with 10 ms each way, and with 10 ms each way and 1 % loss each way
(frames limited to one segment, as the testbed does for lossy interfaces). Prints the figures;
asserts nothing. Removes its namespaces at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

EMULATOR = Path(__file__).resolve().parents[1] / "elastic/testbed/backends/local/linkemu.py"
NS_A, NS_B, NS_M = "ptcbench-a", "ptcbench-b", "ptcbench-m"

PEER = r"""
import socket, sys, time, statistics
mode = sys.argv[1]
if mode == "serve":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 9000))
    t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("0.0.0.0", 9001)); t.listen()
    import threading
    def echo():
        while True:
            d, a = u.recvfrom(2048); u.sendto(d, a)
    def sink():
        while True:
            c, _ = t.accept()
            while c.recv(1 << 20):
                pass
            c.close()
    def source():
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", 9002)); s.listen()
        while True:
            c, _ = s.accept(); secs = float(c.recv(64)); buf = b"\0" * 65536
            end = time.perf_counter() + secs
            while time.perf_counter() < end:
                c.sendall(buf)
            c.close()
    for f in (echo, sink, source):
        threading.Thread(target=f, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()
elif mode == "rtt":
    host, n = sys.argv[2], int(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
    s.connect((host, 9000)); rtts = []
    for i in range(n + 5):
        t = time.perf_counter(); s.send(b"x" * 56)
        try:
            s.recv(2048)
        except socket.timeout:
            continue
        if i >= 5:  # the first few pay for ARP
            rtts.append((time.perf_counter() - t) * 1000)
        time.sleep(0.01)
    rtts.sort()
    print(len(rtts), rtts[0], statistics.median(rtts), rtts[int(len(rtts) * 0.99) - 1], rtts[-1])
elif mode == "send":
    host, secs = sys.argv[2], float(sys.argv[3])
    c = socket.create_connection((host, 9001)); buf = b"\0" * 65536; sent = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < secs:
        sent += c.send(buf)
    c.shutdown(socket.SHUT_WR); c.recv(1)
    print(sent * 8 / (time.perf_counter() - t0) / 1e6)
elif mode == "receive":
    host, secs = sys.argv[2], float(sys.argv[3])
    c = socket.create_connection((host, 9002)); c.sendall(str(secs).encode()); got = 0
    t0 = time.perf_counter()
    while True:
        d = c.recv(1 << 20)
        if not d:
            break
        got += len(d)
    print(got * 8 / (time.perf_counter() - t0) / 1e6)
"""


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def setup() -> None:
    for ns in (NS_A, NS_B, NS_M):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "-n", NS_M, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", NS_M, "link", "set", "br0", "up")
    for dev, ns in (("pva", NS_A), ("pvb", NS_B)):
        sh(
            "ip",
            "-n",
            NS_M,
            "link",
            "add",
            dev,
            "type",
            "veth",
            "peer",
            "name",
            "eth1",
            "netns",
            ns,
        )
    sh("ip", "-n", NS_M, "link", "add", "pwa", "type", "veth", "peer", "name", "pba")
    for dev in ("pvb", "pba"):
        sh("ip", "-n", NS_M, "link", "set", dev, "master", "br0", "up")
    for dev in ("pva", "pwa"):
        sh("ip", "-n", NS_M, "link", "set", dev, "up")
    for ns, addr in ((NS_A, "10.99.0.1/24"), (NS_B, "10.99.0.2/24")):
        sh("ip", "-n", ns, "addr", "add", addr, "dev", "eth1")
        sh("ip", "-n", ns, "link", "set", "eth1", "up")


def teardown() -> None:
    for ns in (NS_A, NS_B, NS_M):
        pids = subprocess.run(
            ["ip", "netns", "pids", ns], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in pids:
            subprocess.run(["kill", pid], check=False)
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)


def plain_bridge(on: bool) -> None:
    """Without the emulator, join pva and pwa with a bridge (the kernel forwards)."""
    if on:
        sh("ip", "-n", NS_M, "link", "add", "ps0", "type", "bridge")
        sh("ip", "-n", NS_M, "link", "set", "ps0", "up")
        for dev in ("pva", "pwa"):
            sh("ip", "-n", NS_M, "link", "set", dev, "master", "ps0")
    else:
        sh("ip", "-n", NS_M, "link", "delete", "ps0")


def one_segment(on: bool) -> None:
    segs = "1" if on else "65535"
    sh("ip", "-n", NS_A, "link", "set", "eth1", "gso_max_segs", segs)
    sh("ip", "-n", NS_M, "link", "set", "pba", "gso_max_segs", segs)


def peer(ns: str, *args: str) -> str:
    return sh("ip", "netns", "exec", ns, sys.executable, "-I", "-c", PEER, *args).strip()


def measure(label: str, args: argparse.Namespace) -> None:
    n, lo, med, p99, hi = peer(NS_A, "rtt", "10.99.0.2", str(args.pings)).split()
    up = float(peer(NS_A, "send", "10.99.0.2", str(args.seconds)))
    down = float(peer(NS_A, "receive", "10.99.0.2", str(args.seconds)))
    print(
        f"{label:<34} {n:>4} {float(lo):8.3f} {float(med):8.3f} {float(p99):8.3f} "
        f"{float(hi):8.3f} {up:9.1f} {down:9.1f}",
        flush=True,
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--pings", type=int, default=200)
    args = p.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    teardown()
    setup()
    server = subprocess.Popen(
        ["ip", "netns", "exec", NS_B, sys.executable, "-I", "-c", PEER, "serve"],
        stdout=subprocess.PIPE,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
        print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        print(
            f"{'case':<34} {'n':>4} {'min':>8} {'median':>8} {'p99':>8} {'max':>8} "
            f"{'A->B':>9} {'B->A':>9}"
        )
        print(f"{'':<34} {'':>4} {'RTT ms':>8} {'':>8} {'':>8} {'':>8} {'Mbit/s':>9} {'Mbit/s':>9}")
        plain_bridge(True)
        measure("kernel bridge, no emulator", args)
        plain_bridge(False)
        cases = [
            ("emulator, 0 ms", ["--from-node-delay-ms", "0"], False),
            ("emulator, 10 ms each way", ["--from-node-delay-ms", "10", "--to-node-delay-ms", "10"], False),
            (
                "emulator, 10 ms + 1% loss each way",
                ["--from-node-delay-ms", "10", "--to-node-delay-ms", "10",
                 "--from-node-loss", "0.01", "--to-node-loss", "0.01"],
                True,
            ),
        ]  # fmt: skip
        for label, extra, lossy in cases:
            one_segment(lossy)
            emu = subprocess.Popen(
                ["ip", "netns", "exec", NS_M, sys.executable, "-I", str(EMULATOR),
                 "--node", "pva", "--lan", "pwa", *extra],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            assert emu.stdout is not None and emu.stdout.readline().strip() == b"ready"
            time.sleep(0.2)
            try:
                measure(label, args)
            finally:
                emu.terminate()
                _, err = emu.communicate(timeout=10)
                for line in err.decode().splitlines():
                    if "forwarded" in line:
                        print(f"{'':<34} {line.split(': ', 1)[1]}")
    finally:
        server.kill()
        teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
