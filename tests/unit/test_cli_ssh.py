"""`ptc ssh NAME NODE COMMAND...`: whatever follows the node is the command's, its options too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from elastic.cli import experiment as experiment_cli
from elastic.profile import rspec
from elastic.profile.topology import Interface, Node, Topology


class _Exp:
    ssh_config_path = Path("/x/ssh_config")

    def manifest(self) -> bytes:
        node = Node(
            client_id="head",
            component_id="urn:publicid:IDN+ptc.local+node+e-head",
            sliver_id="urn:publicid:IDN+ptc.local+sliver+e-head",
            interfaces=[Interface("head:if0", "head", "10.10.1.1", "255.255.255.0")],
        )
        return rspec.write_manifest(Topology(nodes=[node], links=[]))


def test_the_command_keeps_its_own_options(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(experiment_cli.experiments, "load", lambda name: _Exp())

    def execvp(program: str, args: list[str]) -> Any:
        ran.append(args)

    monkeypatch.setattr(experiment_cli.os, "execvp", execvp)
    app = typer.Typer()
    experiment_cli.register(app)
    url = "http://127.0.0.1:9090/api/v1/query?query=up"
    result = CliRunner().invoke(app, ["ssh", "e", "head", "curl", "-s", url])
    assert result.exit_code == 0, result.output
    assert ran == [["ssh", "-F", "/x/ssh_config", "head", "curl", "-s", url]]
