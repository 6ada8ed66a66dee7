"""A real control service process (uvicorn on the experiment's socket) over a FAKE of nodeops
that appends every call to a file, so a test can kill it mid-operation and count the calls
across restarts. With ``--hang`` every operation blocks once it is recorded as called.

    python fake_control_service.py EXPERIMENT CALLS_FILE [--hang]
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from elastic.events import OnEvent, Reporter
from elastic.testbed import experiment as experiments
from elastic.testbed.backends.local.control import credential, service
from elastic.testbed.backends.local.control.app import Settings, create_app
from elastic.testbed.backends.local.control.journal import Journal
from elastic.testbed.backends.local.control.names import Resolver, home_nodes
from elastic.testbed.experiment import Experiment


class FileNodeOps:
    def __init__(self, calls: Path, hang: bool) -> None:
        self.calls, self.hang = calls, hang

    def _do(self, action: str, nodes: Sequence[str], on_event: OnEvent | None) -> None:
        with self.calls.open("a") as out:
            out.write(f"{action} {' '.join(nodes)}\n")
        if self.hang:
            threading.Event().wait()
        for node in nodes:
            Reporter("nodeops", on_event).status(f"{node}: {action}", node=node, step="fake")

    def power_on(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None:
        self._do("power_on", nodes, on_event)

    def power_off(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None:
        self._do("power_off", nodes, on_event)

    def reload(
        self, exp: Experiment, nodes: Sequence[str], on_event: OnEvent | None = None
    ) -> None:
        self._do("reload", nodes, on_event)

    def states(self, exp: Experiment) -> dict[str, str]:
        return {}


def main() -> None:
    name, calls = sys.argv[1], Path(sys.argv[2])
    exp = experiments.load(name)
    places = service.Places.of(exp)
    digest = credential.digest(credential.read(places.credential))
    ops = FileNodeOps(calls, "--hang" in sys.argv)
    app = create_app(Settings(name, digest, Journal(places.journal), ops, Resolver(home_nodes)))
    sock = service._bind(places.socket)
    uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False)).run(sockets=[sock])


if __name__ == "__main__":
    main()
