"""`ptc verify`: the testinfra suite (tests/infra) against an experiment's inventory.

The suite runs in a pytest subprocess so its output, and a JUnit report, land in the
experiment's run directory; failures come back as one line per node and check.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from rich.console import Console

from elastic import paths
from elastic.deploy.runner import new_run_dir, require_inventory
from elastic.errors import PtcError
from elastic.testbed.experiment import Experiment

SUITE = paths.REPO_ROOT / "tests" / "infra"
# testinfra names a parametrised case test_x[ansible://node-0].
_CASE = re.compile(r"^test_(?P<check>[\w]+?)(?:\[(?:ansible://)?(?P<host>[^\]]+)\])?$")


@dataclass(frozen=True)
class CheckResult:
    node: str
    check: str
    outcome: str  # passed | failed | skipped
    message: str = ""


@dataclass(frozen=True)
class VerifyResult:
    run_dir: Path
    elapsed_s: float
    results: list[CheckResult]

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.outcome == "failed"]

    def describe(self) -> str:
        passed = sum(r.outcome == "passed" for r in self.results)
        return (
            f"{passed} passed, {len(self.failures)} failed, "
            f"{sum(r.outcome == 'skipped' for r in self.results)} not applicable "
            f"in {self.elapsed_s:.1f}s"
        )


def command(exp: Experiment, junit: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest", str(SUITE),
        "--hosts=ansible://all",
        f"--ansible-inventory={exp.inventory_dir / 'hosts.yml'}",
        f"--ssh-config={exp.ssh_config_path}",
        f"--junitxml={junit}",
        "-p", "no:cacheprovider",
        "-o", "addopts=",
        "-q", "-rf",
    ]  # fmt: skip


def verify(
    exp: Experiment, console: Console | None = None, raise_on_failure: bool = True
) -> VerifyResult:
    console = console or Console(stderr=True)
    require_inventory(exp)
    run_dir = new_run_dir(exp, "verify")
    junit = run_dir / "junit.xml"
    env = os.environ | {
        # testinfra calls ansible-inventory; ansible.cfg in the repository sets the SSH options.
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_CONFIG": str(paths.REPO_ROOT / "ansible.cfg"),
    }
    started = time.monotonic()
    with console.status(f"[bold]verify[/] {exp.name}: running tests/infra"):
        proc = subprocess.run(
            command(exp, junit), cwd=paths.REPO_ROOT, env=env,
            capture_output=True, text=True, check=False, timeout=1800,
        )  # fmt: skip
    (run_dir / "pytest.log").write_text(proc.stdout + proc.stderr)
    if not junit.is_file():
        raise PtcError(
            f"verify of {exp.name}: pytest produced no report (rc={proc.returncode}):\n"
            + (proc.stdout + proc.stderr)[-3000:]
        )
    result = VerifyResult(run_dir, time.monotonic() - started, parse_junit(junit))
    if not any(r.outcome == "passed" for r in result.results) and not result.failures:
        # Passing because nothing ran would hide a broken inventory or test selection.
        raise PtcError(f"verify of {exp.name}: no checks ran (pytest rc={proc.returncode})")
    if raise_on_failure and (result.failures or proc.returncode != 0):
        raise PtcError(failure_report(exp, result, proc.returncode))
    return result


def parse_junit(path: Path) -> list[CheckResult]:
    results: list[CheckResult] = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        match = _CASE.match(name)
        check = match.group("check") if match else name
        host = (match.group("host") if match else None) or "-"
        outcome, message = "passed", ""
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                outcome = "failed"
                message = _first_line(node.get("message") or node.text or "")
        if outcome == "passed" and case.find("skipped") is not None:
            outcome = "skipped"
        results.append(CheckResult(host, check, outcome, message))
    return results


def failure_report(exp: Experiment, result: VerifyResult, rc: int) -> str:
    lines = [f"verify of {exp.name} failed: {result.describe()}"]
    for failure in result.failures:
        lines.append(f"  {failure.node}: {failure.check}: {failure.message}")
    if not result.failures:
        lines.append(f"  pytest exited with {rc}")
    lines.append(f"  log: {result.run_dir / 'pytest.log'}")
    return "\n".join(lines)


def _first_line(text: str) -> str:
    # pytest's message is "AssertionError: <our message>\nassert ..."; keep our message.
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return re.sub(r"^(AssertionError|Failed): ", "", line)
    return "(no message)"
