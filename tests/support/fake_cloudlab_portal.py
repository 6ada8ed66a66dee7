"""A FAKE of CloudLab's Portal API, for tests only: not CloudLab, not recorded from it.

It answers the calls a head's ``PortalControl`` makes, shaped as the portal's published OpenAPI
description shapes them, and carries out each node operation on the local testbed's machine of
the same name through the experiment's control service: a ``start`` here really starts a stopped
container, so a Slurm resume through the CloudLab path brings a real node up.

- ``GET /tokens/this``: the presented token's ``scope``, ``scope_value`` and ``expires_at``; an
  unknown token is 401. A token past its ``expires_at`` is refused (401) on every other call.
- ``GET /experiments/{id}`` (the UUID or ``project,name``): the experiment, with one aggregate
  whose nodes carry ``client_id``, ``state`` (``started``/``stopped``) and ``status``
  (``ready``, or ``changing`` while an operation runs). Another experiment's id is 404; a token
  scoped to another experiment is 403.
- ``POST /experiments/{id}/node/{client_id}/start|stop``: accepted (202) and carried out in the
  background; a node with an operation under way, or while ``busy`` answers are left, is 409.
  A start of a started node, or a stop of a stopped one, is 400, as the aggregate refuses it.

The fake runs where the head reaches it and holds the control service's socket: on the head
itself, on loopback (``--listen 127.0.0.1:PORT``). Its configuration (tokens, experiment, busy
answers) is a root-only JSON file read at start; every operation it carries out is appended to
``--log`` as a JSON line, so a test can see what the head asked for.

    python tests/support/fake_cloudlab_portal.py --config FILE --log FILE --listen HOST:PORT
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from elastic.testbed.backends.local.control.client import ControlClient, ControlError

_NODE_OP = re.compile(r"^/experiments/(?P<exp>[^/]+)/node/(?P<node>[^/]+)/(?P<op>start|stop)$")
_EXPERIMENT = re.compile(r"^/experiments/(?P<exp>[^/]+)$")
_STATE = {"running": "started", "stopped": "stopped"}


class FakePortal:
    """FAKE portal state: the experiment, the tokens, operations under way, busy answers."""

    def __init__(self, config: dict[str, Any], control: Any, log: Path) -> None:
        self.experiment: dict[str, str] = config["experiment"]
        self.tokens: dict[str, dict[str, Any]] = config["tokens"]
        self.busy = int(config.get("busy", 0))
        self.control = control
        self.log = log
        self.changing: dict[str, str] = {}  # node -> operation under way
        self.failed: dict[str, str] = {}
        self.lock = threading.Lock()

    def _ids(self) -> set[str]:
        e = self.experiment
        return {e["id"], f"{e['project']},{e['name']}"}

    def token(self, presented: str) -> tuple[int, dict[str, Any]]:
        info = self.tokens.get(presented)
        if info is None:
            return 401, {"code": 401, "error": "Invalid token"}
        expires = info.get("expires_at")
        if expires and dt.datetime.fromisoformat(expires) <= dt.datetime.now(dt.UTC):
            return 401, {"code": 401, "error": "Token has expired"}
        return 200, info

    def allowed(self, presented: str, exp: str) -> tuple[int, dict[str, Any]] | None:
        status, info = self.token(presented)
        if status != 200:
            return status, info
        if exp not in self._ids():
            return 404, {"code": 404, "error": "No such experiment"}
        if info.get("scope") == "experiment" and info.get("scope_value") not in self._ids():
            return 403, {"code": 403, "error": "Token not valid for this experiment"}
        return None

    def status(self) -> dict[str, Any]:
        states = self.control.nodes()
        nodes = []
        for name, state in sorted(states.items()):
            under_way = self.changing.get(name)
            nodes.append({
                "client_id": name,
                "state": _STATE.get(state, state),
                "status": "failed" if name in self.failed
                else "changing" if under_way else "ready",
                "rawstate": "SHUTDOWN" if under_way else "ISUP" if state == "running" else "OFF",
                "startup_status": None,
                "urn": "urn:publicid:IDN+fake.cloudlab.invalid+authority+cm",
            })  # fmt: skip
        return {
            **self.experiment,
            "status": "ready",
            "aggregates": {
                "urn:publicid:IDN+fake.cloudlab.invalid+authority+cm": {
                    "urn": "urn:publicid:IDN+fake.cloudlab.invalid+authority+cm",
                    "status": "ready",
                    "nodes": nodes,
                }
            },
        }

    def operate(self, node: str, op: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            if self.busy > 0:
                self.busy -= 1
                return 409, {"code": 409, "error": "Experiment is busy, try again later"}
            if node in self.changing:
                return 409, {"code": 409, "error": f"Node {node} is busy"}
            states = self.control.nodes()
            if node not in states:
                return 404, {"code": 404, "error": f"No such node {node}"}
            now = _STATE.get(states[node], states[node])
            if (op, now) in (("start", "started"), ("stop", "stopped")):
                return 400, {"code": 400, "error": f"Node is already {now}"}
            self.changing[node] = op
            self.failed.pop(node, None)
        self._record(node, op)
        threading.Thread(target=self._carry_out, args=(node, op), daemon=True).start()
        return 202, {}

    def _carry_out(self, node: str, op: str) -> None:
        call = self.control.power_on if op == "start" else self.control.power_off
        try:
            call([node], f"fake-portal-{op}-{node}-{time.time_ns()}")
        except ControlError as err:
            self.failed[node] = str(err)
        finally:
            with self.lock:
                self.changing.pop(node, None)

    def _record(self, node: str, op: str) -> None:
        line = json.dumps({"time": time.time(), "node": node, "operation": op})
        with self.log.open("a") as fh:
            fh.write(line + "\n")


def handler(portal: FakePortal) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            presented = self.headers.get("X-Api-Token", "")
            if self.path == "/tokens/this":
                self._answer(*portal.token(presented))
                return
            m = _EXPERIMENT.match(self.path)
            if not m:
                self._answer(404, {"code": 404, "error": "No such path"})
                return
            refused = portal.allowed(presented, unquote(m["exp"]))
            self._answer(*(refused or (200, portal.status())))

        def do_POST(self) -> None:
            m = _NODE_OP.match(self.path)
            if not m:
                self._answer(404, {"code": 404, "error": "No such path"})
                return
            refused = portal.allowed(self.headers.get("X-Api-Token", ""), unquote(m["exp"]))
            self._answer(*(refused or portal.operate(unquote(m["node"]), m["op"])))

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the token is in no line, but the operations log says what matters

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--listen", default="127.0.0.1:8790")
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    portal = FakePortal(json.loads(args.config.read_text()), ControlClient(), args.log)
    ThreadingHTTPServer((host, int(port)), handler(portal)).serve_forever()


if __name__ == "__main__":
    main()
