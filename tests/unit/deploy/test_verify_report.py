"""Turning testinfra's JUnit report into node/check lines for `ptc verify`."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.deploy.target import Target
from elastic.deploy.verify import VerifyResult, failure_report, parse_junit

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="test_munge" name="test_munge_active[ansible://node-1]" time="0.1">
  <failure message="AssertionError: node-1: munge is not running&#10;assert False">trace</failure>
</testcase>
<testcase classname="test_munge" name="test_munge_active[ansible://node-0]" time="0.1"/>
<testcase classname="test_slurm" name="test_slurmdbd_active[ansible://node-0]" time="0.1">
  <skipped message="node-0 is not in slurm_dbd"/>
</testcase>
</testsuite></testsuites>
"""


def test_parse_junit_names_node_and_check(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    results = parse_junit(path)
    assert [(r.node, r.check, r.outcome) for r in results] == [
        ("node-1", "munge_active", "failed"),
        ("node-0", "munge_active", "passed"),
        ("node-0", "slurmdbd_active", "skipped"),
    ]
    assert results[0].message == "node-1: munge is not running"


def test_failure_report_lists_each_failure(tmp_path: Path) -> None:
    result = verified(tmp_path, JUNIT)
    report = failure_report(target(tmp_path), result, 1)
    assert "node-1: munge_active: node-1: munge is not running" in report
    assert "1 passed, 1 failed, 1 not applicable" in report


def test_run_directories_never_collide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTC_HOME", str(tmp_path))
    t = target(tmp_path)
    first, second = t.new_run_dir("site"), t.new_run_dir("site")
    assert first != second and first.is_dir() and second.is_dir()


def verified(tmp_path: Path, junit: str) -> VerifyResult:
    """What ``ptc verify`` makes of a JUnit report with the text ``junit``."""
    path = tmp_path / "junit.xml"
    path.write_text(junit)
    return VerifyResult(tmp_path, 1.0, parse_junit(path))


def target(root: Path) -> Target:
    return Target("x", root / "hosts.yml", root / "ssh_config", root / "runs", root / "facts")


SKIPS = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="test_slurm" name="test_accounting_knows_cluster[ansible://head]" time="0.1">
  <skipped type="pytest.skip" message="Skipped: no accounting daemon in this cluster">x</skipped>
</testcase>
<testcase classname="test_slurm" name="test_slurmdbd_active[ansible://node-0]" time="0.1">
  <skipped type="pytest.skip" message="Skipped: node-0 is not in slurm_dbd">x</skipped>
</testcase>
<testcase classname="test_munge" name="test_munge_active[ansible://node-0]" time="0.1"/>
</testsuite></testsuites>
"""


def test_skips_keep_their_reason_and_are_not_counted_as_passed(tmp_path: Path) -> None:
    result = verified(tmp_path, SKIPS)
    assert [(r.check, r.outcome, r.message, r.applies) for r in result.results] == [
        ("accounting_knows_cluster", "skipped", "no accounting daemon in this cluster", True),
        ("slurmdbd_active", "skipped", "node-0 is not in slurm_dbd", False),
        ("munge_active", "passed", "", True),
    ]
    assert [r.check for r in result.skips] == ["accounting_knows_cluster"]
    assert result.describe().startswith("1 passed, 0 failed, 1 skipped, 1 not applicable")


KNOWN = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="2">
<testcase classname="test_isolation" name="test_escape[ansible://head]" time="0.1">
  <skipped type="pytest.xfail" message="head: known, the NFS server reaches the host">x</skipped>
</testcase>
<testcase classname="test_isolation" name="test_escape[ansible://node-0]" time="0.1"/>
</testsuite></testsuites>
"""


def test_an_expected_failure_is_a_known_hole_with_its_reason_not_a_pass(tmp_path: Path) -> None:
    result = verified(tmp_path, KNOWN)
    assert [(r.node, r.outcome, r.message) for r in result.results] == [
        ("head", "known", "head: known, the NFS server reaches the host"),
        ("node-0", "passed", ""),
    ]
    assert result.failures == [] and result.skips == []
    assert result.describe().startswith("1 passed, 0 failed, 1 known to fail, 0 not applicable")
