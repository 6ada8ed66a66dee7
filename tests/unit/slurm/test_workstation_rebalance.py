"""A rebalancing round from the workstation: the sites file staged on the head, made current
only once a round accepted it; refusals name the workstation's file."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from elastic import node_paths
from elastic.errors import InputError, RemoteError
from elastic.remote import ssh
from elastic.remote.ssh import Completed
from elastic.slurm import workstation

# The name a workstation stages its sites file under on the head, beside the current one.
STAGED = re.escape(node_paths.ELASTIC_CONFIG_DIR) + r"/\.sites-[0-9a-f]{12}\.yml"

REPORT = {
    "time": 1000.0,
    "policy": "AP-100",
    "live_before": {"cheap": 2, "dear": 2},
    "terminated": [],
    "drained": [],
    "undrained": [],
    "launch": {},
    "requeued": [],
    "excess_cost": 0.0,
    "discarded_s": 0.0,
}
SITES = "sites:\n  - {name: cheap, price: 1, desired: 2, nodes: 'node-[0-1]'}\n"


@dataclass
class Head:
    """The head as the round sees it: each command it was sent, and what the round answers."""

    round_exit: int = 0
    round_stdout: str = json.dumps(REPORT)
    round_stderr: str = ""
    commands: list[str] = field(default_factory=list)
    stdin: list[Any] = field(default_factory=list)

    def execute(self, config: Path | None, host: str, command: str, **kw: Any) -> Completed:
        assert host == "head"
        self.commands.append(command)
        self.stdin.append(kw.get("stdin"))
        if "-m elastic.slurm rebalance" in command:
            staged = command.split("--sites ")[1].split()[0]  # the head's error names it
            return Completed(
                host,
                command,
                self.round_exit,
                self.round_stdout.encode(),
                self.round_stderr.replace("{staged}", staged).encode(),
            )
        return Completed(host, command, 0, b"", b"")

    def run(self, config: Path, host: str, command: str, **kw: Any) -> str:
        done = self.execute(config, host, command, **kw)
        if done.returncode:
            raise RemoteError(
                f"{host}: exit {done.returncode}",
                host=host,
                command=command,
                returncode=done.returncode,
            )
        return done.text


@pytest.fixture
def head(monkeypatch: pytest.MonkeyPatch) -> Head:
    fake = Head()
    monkeypatch.setattr(ssh, "execute", fake.execute)
    monkeypatch.setattr(ssh, "run", fake.run)
    return fake


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    slurm_controller:\n      hosts:\n        head:\n")
    sites = tmp_path / "sites.yml"
    sites.write_text(SITES)
    return inventory, sites


def test_an_accepted_file_becomes_the_heads_sites_file_after_the_round(
    head: Head, files: tuple[Path, Path], tmp_path: Path
) -> None:
    inventory, sites = files
    report = workstation.rebalance(inventory, tmp_path / "ssh_config", sites, "AP-100")
    assert report == REPORT
    _upload, round_, current = head.commands
    assert head.stdin[0] == SITES  # the file's text on standard input, not a command line
    staged = re.search(rf"--sites ({STAGED}) ", round_)
    assert staged is not None and "--policy AP-100" in round_, round_
    assert current == f"mv -f {staged.group(1)} {node_paths.SITES_FILE}"


def test_without_a_file_the_round_runs_over_the_heads_current_sites(
    head: Head, files: tuple[Path, Path], tmp_path: Path
) -> None:
    inventory, _ = files
    assert workstation.rebalance(inventory, tmp_path / "ssh_config", None, "FO") == REPORT
    (round_,) = head.commands  # nothing staged, nothing moved
    assert f"--sites {node_paths.SITES_FILE} --policy FO" in round_, round_
    head.round_exit = InputError.exit_code
    head.round_stderr = (
        "rebalance: sites file {staged}: sites[0] (cheap): field desired is missing\n"
    )
    with pytest.raises(InputError, match=rf"sites file {node_paths.SITES_FILE}: sites\[0\]"):
        workstation.rebalance(inventory, tmp_path / "ssh_config", None, "FO")


def test_a_refused_file_names_the_workstations_file_and_leaves_the_current_one(
    head: Head, files: tuple[Path, Path], tmp_path: Path
) -> None:
    inventory, sites = files
    head.round_exit = InputError.exit_code
    head.round_stderr = (
        "rebalance: sites file {staged}: sites[0]: field desired: 3 is more than its 2 nodes\n"
    )
    with pytest.raises(InputError, match=rf"sites file {sites}: sites\[0\]: field desired"):
        workstation.rebalance(inventory, tmp_path / "ssh_config", sites, "FO")
    assert re.fullmatch(rf"rm -f {STAGED}", head.commands[-1])
    assert not any(node_paths.SITES_FILE in c for c in head.commands)


def test_a_wrong_policy_or_a_missing_file_is_refused_before_the_head_is_asked(
    head: Head, files: tuple[Path, Path], tmp_path: Path
) -> None:
    inventory, sites = files
    with pytest.raises(InputError, match=r"--policy AP-200: threshold_pct: 200\.0 must be within"):
        workstation.rebalance(inventory, tmp_path / "ssh_config", sites, "AP-200")
    with pytest.raises(InputError, match=r"--policy LIFO: policy: 'LIFO' is not OI, FO or AP-X"):
        workstation.rebalance(inventory, tmp_path / "ssh_config", sites, "LIFO")
    with pytest.raises(InputError, match=r"--sites .*nowhere\.yml: cannot read it"):
        workstation.rebalance(inventory, tmp_path / "ssh_config", tmp_path / "nowhere.yml", "FO")
    assert head.commands == []


def test_a_round_that_fails_on_the_head_says_so_and_keeps_the_current_file(
    head: Head, files: tuple[Path, Path], tmp_path: Path
) -> None:
    inventory, sites = files
    head.round_exit = 1
    head.round_stderr = "rebalance: sinfo: slurmctld not responding\n"
    with pytest.raises(workstation.RoundFailed, match=r"exit 1.*slurmctld not responding"):
        workstation.rebalance(inventory, tmp_path / "ssh_config", sites, "FO")
    assert not any(node_paths.SITES_FILE in c for c in head.commands)
    assert re.fullmatch(rf"rm -f {STAGED}", head.commands[-1])


def test_the_cli_shows_each_reclamation_with_its_cost_and_prints_json_on_request(
    monkeypatch: pytest.MonkeyPatch, files: tuple[Path, Path]
) -> None:
    import typer
    from typer.testing import CliRunner

    from elastic.cli import elastic as elastic_cli

    inventory, sites = files
    report = {
        **REPORT,
        "terminated": [
            {
                "node": "node-2",
                "site": "dear",
                "job_id": "17",
                "discarded_s": 95.0,
                "up_s": 300.0,
                "excess_cost": 2.0,
            }
        ],
        "requeued": ["17"],
        "excess_cost": 2.0,
        "discarded_s": 95.0,
    }
    asked: list[tuple[str, str]] = []

    def fake_round(inv: Path, config: Path, path: Path, policy: str) -> dict[str, Any]:
        asked.append((str(path), policy))
        return report

    class Exp:
        inventory_path = inventory
        ssh_config_path = inventory.parent / "ssh_config"

    monkeypatch.setattr(workstation, "rebalance", fake_round)
    monkeypatch.setattr(elastic_cli.experiments, "load", lambda name: Exp())
    app = typer.Typer()
    app.add_typer(elastic_cli.app, name="elastic")
    runner = CliRunner()
    shown = runner.invoke(
        app, ["elastic", "rebalance", "x", "--sites", str(sites), "--policy", "AP-100"]
    )
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "node-2 │ dear │ 17 │ 95 │ 2" in text and "requeued: 17" in text
    assert "excess cost 2, discarded work 95 s" in text
    as_json = runner.invoke(app, ["elastic", "rebalance", "x", "--sites", str(sites), "--json"])
    assert json.loads(as_json.output) == report
    assert asked == [(str(sites), "AP-100"), (str(sites), "FO")]
