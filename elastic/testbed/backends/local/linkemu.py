"""ptc's userspace stand-in for netem: delay and loss between two interfaces, per direction.

This kernel has no ``sch_netem`` (``tc qdisc add ... netem`` fails with "Specified qdisc kind
is unknown"), so where a profile asks for latency or packet loss on an interface, the local
testbed runs this small forwarding process instead. Where ``netem`` exists, the testbed uses
netem and never starts this (``elastic.testbed.backends.local.links``).

The process sits in the experiment's network namespace between two devices:

- ``--node DEV``: the namespace end of the node's veth (frames *from* the node arrive here, and
  frames *to* the node are sent here);
- ``--lan DEV``: one end of a second veth pair whose other end is a port of the LAN bridge.

It moves every Ethernet frame from one to the other with ``AF_PACKET`` sockets. Each direction
has a fixed one-way delay and a loss probability: a frame is dropped with that probability
(a seeded generator), otherwise it is sent once its due time on the monotonic clock has come.
The delay is the same for every frame of a direction, so due times only grow and a FIFO per
direction *is* the timer heap (O(1) per frame). A full queue (``--limit`` frames, netem's default
of 1000) drops the frame, as netem does.

The sockets use ``PACKET_VNET_HDR``: each frame carries the kernel's offload metadata (partial
checksums, GSO), so large TCP segments pass through whole and the kernel finishes checksums and
segmentation when the frame is sent on. A GSO frame is one frame here: its loss is all or
nothing. The testbed therefore limits the devices of a lossy interface to one segment per frame
(``gso_max_segs 1``), so loss is per packet as on a wire.

Stdlib only and run by path (``python3 -I linkemu.py ...``), so it starts fast and depends on
nothing of ptc. It prints ``ready`` on stdout once both sockets are bound, then logs to stderr.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import errno
import os
import random
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass, field

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_IGNORE_OUTGOING = 23
SO_SNDBUFFORCE = 32  # not in Python's socket module
SO_RCVBUFFORCE = 33
BUFFER = 256 * 1024  # a GSO frame (64 KiB, more with BIG TCP) plus the vnet header
SOCKET_BUFFER = 8 * 1024 * 1024
BATCH = 64  # frames read from one socket before timers are looked at again
# A device of ours went down or away (its node was removed, or someone set it down): the link
# it emulated is broken, so the emulator ends and `ptc status` says so.
GONE = (errno.ENETDOWN, errno.ENXIO, errno.ENODEV)


@dataclass
class Direction:
    """One way through the emulator: frames read from ``src`` are sent on ``dst``."""

    name: str
    src: socket.socket
    dst: socket.socket
    delay: float  # seconds
    loss: float  # probability
    limit: int
    rng: random.Random
    queue: collections.deque[tuple[float, bytes]] = field(default_factory=collections.deque)
    forwarded: int = 0
    lost: int = 0  # dropped by the configured loss
    overflow: int = 0  # dropped because the queue (or the device's qdisc) was full

    def receive(self, buf: bytearray, now: float) -> None:
        view = memoryview(buf)
        for _ in range(BATCH):
            try:
                n = self.src.recv_into(buf)
            except BlockingIOError:
                return
            except OSError as err:
                if err.errno in GONE:
                    raise DeviceGone(f"{self.name}: reading: {err}") from err
                raise
            if self.loss and self.rng.random() < self.loss:
                self.lost += 1
                continue
            frame = bytes(view[:n])
            if self.delay <= 0 and not self.queue:
                self._send(frame)
            elif len(self.queue) >= self.limit:
                self.overflow += 1
            else:
                self.queue.append((now + self.delay, frame))

    def release(self, now: float) -> float | None:
        """Send every frame that is due; return when the next one is."""
        queue = self.queue
        while queue and queue[0][0] <= now:
            self._send(queue.popleft()[1])
        return queue[0][0] if queue else None

    def _send(self, frame: bytes) -> None:
        try:
            self.dst.send(frame)
            self.forwarded += 1
        except (BlockingIOError, InterruptedError):
            self.overflow += 1  # the socket's buffer is full: a drop, as a full queue would
        except OSError as err:
            if err.errno in GONE:
                raise DeviceGone(f"{self.name}: sending: {err}") from err
            if err.errno not in (errno.ENOBUFS, errno.EMSGSIZE):
                raise
            self.overflow += 1


def open_socket(device: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)  # not the frames we send ourselves
    for option in (SO_RCVBUFFORCE, SO_SNDBUFFORCE):
        with contextlib.suppress(PermissionError):  # the defaults then; still correct
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
    sock.bind((device, ETH_P_ALL))
    sock.setblocking(False)
    return sock


def drain(sock: socket.socket, buf: bytearray) -> None:
    """Discard what arrived before the emulator was ready to forward it."""
    while True:
        try:
            sock.recv_into(buf)
        except BlockingIOError:
            return


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--node", required=True, help="namespace end of the node's veth")
    p.add_argument("--lan", required=True, help="veth whose peer is on the LAN bridge")
    p.add_argument("--label", default="", help="what this emulates, for logs and ptc status")
    p.add_argument("--from-node-delay-ms", type=float, default=0.0)
    p.add_argument("--from-node-loss", type=float, default=0.0)
    p.add_argument("--to-node-delay-ms", type=float, default=0.0)
    p.add_argument("--to-node-loss", type=float, default=0.0)
    p.add_argument("--limit", type=int, default=1000, help="frames queued per direction")
    p.add_argument("--seed", type=int, default=0, help="seed of the loss generator")
    args = p.parse_args(argv)
    for name in ("from_node_loss", "to_node_loss"):
        if not 0 <= getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be in [0, 1)")
    for name in ("from_node_delay_ms", "to_node_delay_ms"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must not be negative")
    return args


def run(args: argparse.Namespace) -> int:
    node, lan = open_socket(args.node), open_socket(args.lan)
    rng = random.Random(args.seed)
    directions = [
        Direction(
            "from-node", node, lan, args.from_node_delay_ms / 1000, args.from_node_loss,
            args.limit, rng,
        ),
        Direction(
            "to-node", lan, node, args.to_node_delay_ms / 1000, args.to_node_loss, args.limit, rng,
        ),
    ]  # fmt: skip
    by_fd = {d.src.fileno(): d for d in directions}
    poller = select.epoll()
    for fd in by_fd:
        poller.register(fd, select.EPOLLIN)

    def stop(signum: int, _frame: object) -> None:
        raise Stopped  # out of epoll's wait, which Python would otherwise resume (PEP 475)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    buf = bytearray(BUFFER)
    for d in directions:
        drain(d.src, buf)
    print("ready", flush=True)
    os.close(1)  # the launcher reads only that line
    log(args, "forwarding")

    status = 0
    try:
        forward(poller, by_fd, directions, buf)
    except Stopped:
        pass
    except DeviceGone as gone:
        log(args, f"a device is gone ({gone}); stopping")
        status = 1
    for d in directions:
        log(args, f"{d.name}: forwarded {d.forwarded}, lost {d.lost}, overflow {d.overflow}")
    return status


def forward(
    poller: select.epoll,
    by_fd: dict[int, Direction],
    directions: list[Direction],
    buf: bytearray,
) -> None:
    """Read what arrives, send what is due, sleep until the next frame is due or arrives."""
    next_due: float | None = None
    while True:
        timeout = -1.0 if next_due is None else max(0.0, next_due - time.monotonic())
        events = poller.poll(timeout)
        now = time.monotonic()
        for fd, _mask in events:
            by_fd[fd].receive(buf, now)
        now = time.monotonic()
        next_due = None
        for d in directions:
            due = d.release(now)
            if due is not None and (next_due is None or due < next_due):
                next_due = due


class Stopped(Exception):
    """SIGTERM or SIGINT: stop forwarding."""


class DeviceGone(Exception):
    """One of the two devices went down or was deleted."""


def log(args: argparse.Namespace, message: str) -> None:
    sys.stderr.write(f"linkemu {args.label or args.node}: {message}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        return run(args)
    except OSError as err:
        log(args, f"failed: {err}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
