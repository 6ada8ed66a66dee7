"""`ptc verify`: the testinfra suite (tests/infra) against a target's inventory.

The suite runs in a pytest subprocess so its output, and a JUnit report, land in the
target's run directory; failures come back as one line per node and check.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from elastic import paths
from elastic.deploy.target import Target
from elastic.errors import PtcError, RemoteTimeout
from elastic.events import OnEvent, Reporter

SUITE = paths.REPO_ROOT / "tests" / "infra"
TIMEOUT_S = 1800


class VerifyError(PtcError):
    """Checks failed on nodes; ``result`` names each node and check."""

    def __init__(self, message: str, result: VerifyResult) -> None:
        super().__init__(message)
        self.result = result


# testinfra names a parametrised case test_x[ansible://node-0].
_CASE = re.compile(r"^test_(?P<check>[\w]+?)(?:\[(?:ansible://)?(?P<host>[^\]]+)\])?$")
# A check skipped because the node is outside the groups it is about (tests/infra's
# require_group words its reason so): it does not apply to that node at all, unlike a check
# that applies but cannot run here, which is shown with its reason.
_NOT_HERE = re.compile(r"^\S+ is not in \S+")


@dataclass(frozen=True)
class CheckResult:
    node: str
    check: str
    outcome: str  # passed | failed | skipped | known (an expected failure: a known hole)
    message: str = ""  # a failure's message, or why the check was skipped

    @property
    def applies(self) -> bool:
        """False when the check is not about this node (skipped for its groups)."""
        return not (self.outcome == "skipped" and _NOT_HERE.match(self.message))


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
        skipped = [r for r in self.results if r.outcome == "skipped"]
        not_here = sum(not r.applies for r in skipped)
        known = sum(r.outcome == "known" for r in self.results)
        return (
            f"{passed} passed, {len(self.failures)} failed, "
            + (f"{known} known to fail, " if known else "")
            + (f"{len(skipped) - not_here} skipped, " if len(skipped) > not_here else "")
            + f"{not_here} not applicable in {self.elapsed_s:.1f}s"
        )

    @property
    def skips(self) -> list[CheckResult]:
        """Checks that apply to their node but did not run, each with its reason."""
        return [r for r in self.results if r.outcome == "skipped" and r.applies]


POWERED_OFF_ENV = "PTC_VERIFY_POWERED_OFF"


def command(target: Target, junit: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest", str(SUITE),
        "--hosts=ansible://all",
        f"--ansible-inventory={target.inventory}",
        f"--ssh-config={target.ssh_config}",
        f"--junitxml={junit}",
        "-p", "no:cacheprovider",
        "-o", "addopts=",
        "-q", "-rf",
    ]  # fmt: skip


def verify(
    target: Target,
    on_event: OnEvent | None = None,
    raise_on_failure: bool = True,
    powered_off: Sequence[str] = (),
) -> VerifyResult:
    """tests/infra on every node of the target; ``powered_off`` nodes' checks are skipped,
    saying so (the suite reads them from the environment)."""
    report = Reporter("verify", on_event)
    run_dir = target.new_run_dir("verify")
    junit = run_dir / "junit.xml"
    env = os.environ | {
        # testinfra calls ansible-inventory; ansible.cfg in the repository sets the SSH options.
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_CONFIG": str(paths.REPO_ROOT / "ansible.cfg"),
        POWERED_OFF_ENV: ",".join(powered_off),
    }
    started = time.monotonic()
    report.begin(f"tests/infra on {target.name}")
    try:
        proc = subprocess.run(
            command(target, junit), cwd=paths.REPO_ROOT, env=env,
            capture_output=True, text=True, check=False, timeout=TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired as err:
        raise RemoteTimeout(
            f"verify of {target.name}: tests/infra did not finish within {TIMEOUT_S} s",
            host="all",
            command="pytest tests/infra",
            timeout_s=TIMEOUT_S,
        ) from err
    (run_dir / "pytest.log").write_text(proc.stdout + proc.stderr)
    if not junit.is_file():
        raise PtcError(
            f"verify of {target.name}: pytest produced no report (rc={proc.returncode}):\n"
            + (proc.stdout + proc.stderr)[-3000:]
        )
    result = VerifyResult(run_dir, time.monotonic() - started, parse_junit(junit))
    report.end(result.describe())
    if not any(r.outcome == "passed" for r in result.results) and not result.failures:
        # Passing because nothing ran would hide a broken inventory or test selection.
        raise PtcError(f"verify of {target.name}: no checks ran (pytest rc={proc.returncode})")
    if raise_on_failure and (result.failures or proc.returncode != 0):
        raise VerifyError(failure_report(target, result, proc.returncode), result)
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
        skipped = case.find("skipped")
        if outcome == "passed" and skipped is not None:
            # pytest reports an expected failure (xfail: a known hole the check shows) as a
            # skip of its own type
            outcome = "known" if skipped.get("type") == "pytest.xfail" else "skipped"
            message = _skip_reason(skipped.get("message") or skipped.text or "")
        results.append(CheckResult(host, check, outcome, message))
    return results


def failure_report(target: Target, result: VerifyResult, rc: int) -> str:
    lines = [f"verify of {target.name} failed: {result.describe()}"]
    for failure in result.failures:
        lines.append(f"  {failure.node}: {failure.check}: {failure.message}")
    if not result.failures:
        lines.append(f"  pytest exited with {rc}")
    lines.append(f"  log: {result.run_dir / 'pytest.log'}")
    return "\n".join(lines)


def _skip_reason(text: str) -> str:
    # pytest's junit message of a skip is "Skipped: <reason>" (older ones: the reason alone).
    return re.sub(r"^Skipped: ", "", _first_line(text))


def _first_line(text: str) -> str:
    # pytest's message is "AssertionError: <our message>\nassert ..."; keep our message.
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return re.sub(r"^(AssertionError|Failed): ", "", line)
    return "(no message)"
