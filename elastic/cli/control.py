"""``ptc control``: the host's control service of an experiment (status, start, stop,
metrics)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from elastic.errors import InputError
from elastic.testbed import experiment as experiments
from elastic.testbed import lifecycle
from elastic.testbed.backends.local.control import service
from elastic.testbed.backends.local.control.client import ControlClient
from elastic.testbed.experiment import Experiment

app = typer.Typer(no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

Name = Annotated[str, typer.Argument(help="experiment name")]


def _served(name: str) -> Experiment:
    exp = experiments.load(name)
    if not service.serves(exp):
        raise InputError(
            f"experiment {name!r} is on the {exp.testbed} testbed"
            + (" (adopted)" if exp.adopted else "")
            + ": only the local testbed's experiments have a control service on this host"
        )
    return exp


def ensure(exp: Experiment) -> None:
    """Restart the experiment's control service if it died (saying so), and the testbed's other
    services of it (the local file server); quiet otherwise."""
    if service.ensure_running(exp):
        err_console.print(f"control service of {exp.name} was not running: started it")
    lifecycle.start_services(exp)


@app.command()
def status(name: Name) -> None:
    """Whether the experiment's control service runs and answers, and where."""
    st = service.status(_served(name))
    state = "running" if st.running else ("not answering" if st.pid else "stopped")
    console.print(f"{st.experiment}: {state}" + (f" (pid {st.pid})" if st.pid else ""))
    console.print(f"  socket {st.socket}  log {st.log}", highlight=False)
    if not st.running:
        raise typer.Exit(1)


@app.command()
def metrics(name: Name) -> None:
    """The service's metrics in Prometheus's text format (operations, refusals, node states)."""
    places = service.Places.of(_served(name))
    text = ControlClient(places.socket, places.credential, 10.0).metrics()
    console.print(text, end="", markup=False, highlight=False, soft_wrap=True)


@app.command()
def start(name: Name) -> None:
    """Start the control service (nothing if it runs)."""
    st = service.start(_served(name))
    console.print(f"{st.experiment}: running (pid {st.pid})")


@app.command()
def stop(name: Name) -> None:
    """Stop the control service; the nodes can no longer ask for operations."""
    stopped = service.stop(_served(name))
    console.print(f"{name}: {'stopped' if stopped else 'was not running'}")
