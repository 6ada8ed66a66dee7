"""A FAKE instance metadata service (IMDSv2) for one machine of a FAKE EC2 region: an emulation
of what EC2 serves an instance at 169.254.169.254, not AWS's service.

It serves the files the realiser writes under ``<root>/latest/meta-data/`` over HTTP the way
IMDSv2 does, so the user data and the programs of an instance ask it exactly as they ask EC2:

- ``PUT /latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds: N`` (1 to 21600) gives a
  session token (text/plain); a missing or bad TTL is a 400, and a request that came through a
  proxy (``X-Forwarded-For``) a 403, as on EC2.
- ``GET /latest/meta-data/<key>`` with ``X-aws-ec2-metadata-token: <token>`` gives the file's
  bytes as they are; without a valid, unexpired token it is a 401 (IMDSv2 required), a key
  with no file a 404, a directory the list of its keys (subdirectories with a trailing ``/``),
  as EC2 lists them. A path that leaves the directory (``..``, a link out of it) is a 404.
- Only the machine itself is answered (a peer address that is not its own gets a 403): on EC2
  no other host reaches an instance's metadata.

Standard library only, and nothing of ``elastic``: the realiser copies this file into the
machine, where the image's ``python3`` runs it as a script (``machines.start_imds``).
"""

from __future__ import annotations

import argparse
import http.server
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ADDRESS = "169.254.169.254"
PORT = 80
# The realiser's METADATA_DIR is ROOT + META_PATH (a unit test holds them together).
ROOT = "/run/ptc-fake-ec2"
TOKEN_PATH = "/latest/api/token"
META_PATH = "/latest/meta-data"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
MAX_TTL_S = 21600
# A token request carries no body worth reading; a bigger one is no client of the service.
MAX_BODY = 4096


class Tokens:
    """The session tokens given out and when each expires, by ``clock`` (seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._expires: dict[str, float] = {}
        self._lock = threading.Lock()

    def issue(self, ttl_s: int) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            now = self._clock()
            # Expired tokens are forgotten here, so a long-lived machine does not pile them up.
            self._expires = {t: e for t, e in self._expires.items() if e > now}
            self._expires[token] = now + ttl_s
        return token

    def valid(self, token: str | None) -> bool:
        if not token:
            return False
        with self._lock:
            expires = self._expires.get(token)
            return expires is not None and self._clock() < expires


def own_address(address: str) -> bool:
    """Whether ``address`` is one of this host's own: binding to it succeeds only then."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def parse_ttl(value: str | None) -> int | None:
    """The TTL a token request asks for, or None when it is missing or out of EC2's range."""
    if value is None or not value.strip().isdigit():
        return None
    ttl = int(value.strip())
    return ttl if 1 <= ttl <= MAX_TTL_S else None


def lookup(root: Path, key: str) -> bytes | None:
    """What ``GET /latest/meta-data/<key>`` answers from ``root``: a file's bytes, a directory's
    keys, or None (no such key, or a path that leaves the metadata directory)."""
    parts = [p for p in key.split("/") if p]
    if any(p in (".", "..") or "\x00" in p for p in parts):
        return None
    base = (root / META_PATH.lstrip("/")).resolve()
    target = base.joinpath(*parts).resolve()
    # A link may lead out of the directory where ``..`` is refused above.
    if target != base and base not in target.parents:
        return None
    try:
        if target.is_dir():
            names = sorted(c.name + ("/" if c.is_dir() else "") for c in target.iterdir())
            return "\n".join(names).encode()
        return target.read_bytes()
    except OSError:
        return None


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        root: Path,
        tokens: Tokens,
        own: Callable[[str], bool] = own_address,
    ) -> None:
        self.root = root
        self.tokens = tokens
        self.own = own
        super().__init__(address, Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ptc-fake-imds"
    sys_version = ""
    timeout = 30  # an idle kept-alive connection does not hold its thread for ever

    def _server(self) -> Server:
        assert isinstance(self.server, Server)
        return self.server

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _refused(self) -> bool:
        """Answers (and True) when the peer is not this machine itself."""
        if self._server().own(self.client_address[0]):
            return False
        self._reply(403, b"Forbidden")
        return True

    def _drain(self) -> bool:
        """Reads the request's body, so the next request on the connection starts right."""
        length = self.headers.get("Content-Length", "0").strip() or "0"
        if not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            self._reply(400, b"Bad Request")
            return False
        self.rfile.read(int(length))
        return True

    def do_PUT(self) -> None:
        if not self._drain() or self._refused():
            return
        if self.path.split("?", 1)[0] != TOKEN_PATH:
            self._reply(404, b"Not Found")
            return
        if self.headers.get("X-Forwarded-For") is not None:
            self._reply(403, b"Forbidden")
            return
        ttl = parse_ttl(self.headers.get(TTL_HEADER))
        if ttl is None:
            self._reply(400, b"Bad Request")
            return
        token = self._server().tokens.issue(ttl)
        self._reply(200, token.encode(), {TTL_HEADER: str(ttl)})

    def do_GET(self) -> None:
        if not self._drain() or self._refused():
            return
        path = self.path.split("?", 1)[0]
        if path == TOKEN_PATH:
            self._reply(405, b"Method Not Allowed")
            return
        if not self._server().tokens.valid(self.headers.get(TOKEN_HEADER)):
            self._reply(401, b"Unauthorized")
            return
        if path != META_PATH and not path.startswith(META_PATH + "/"):
            self._reply(404, b"Not Found")
            return
        body = lookup(self._server().root, path[len(META_PATH) :])
        if body is None:
            self._reply(404, b"Not Found")
            return
        self._reply(200, body)

    def log_message(self, format: str, *args: object) -> None:
        # One line a request, to stderr (the unit's journal adds the time); no token is in it.
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A FAKE EC2 instance metadata service (IMDSv2)")
    parser.add_argument("--address", default=ADDRESS)
    parser.add_argument("--port", type=int, default=PORT, help="0: any free port")
    parser.add_argument("--root", type=Path, default=Path(ROOT))
    args = parser.parse_args(argv)
    server = Server((args.address, args.port), args.root, Tokens())
    host, port = server.server_address[:2]
    # The port actually bound, for whoever asked for any (--port 0).
    print(f"FAKE IMDSv2: serving {args.root}{META_PATH} at http://{host!s}:{port}",
          file=sys.stderr, flush=True)  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
