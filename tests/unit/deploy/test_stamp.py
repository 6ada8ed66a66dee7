"""A deploy's record on each node: what the fingerprint covers, and what the node-side scripts
(run here with this machine's python3, as ssh runs them there) find and write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elastic.deploy import stamp


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "roles" / "munge" / "tasks").mkdir(parents=True)
    (root / "roles" / "munge" / "tasks" / "main.yml").write_text("- name: one\n")
    (root / "elastic" / "__pycache__").mkdir(parents=True)
    (root / "elastic" / "a.py").write_text("x = 1\n")
    (root / "site.yml").write_text("- hosts: all\n")
    (root / "tests").mkdir()
    (root / "tests" / "t.py").write_text("pass\n")
    (root / "hosts.yml").write_text("all: {hosts: {head: {}}}\n")
    return root


def print_of(repo: Path, **extravars: object) -> str:
    return stamp.fingerprint(repo / "site.yml", repo / "hosts.yml", extravars, root=repo)


def test_the_fingerprint_covers_the_runs_inputs_and_nothing_else(repo: Path) -> None:
    first = print_of(repo, a=1)
    assert print_of(repo, a=1) == first
    # not inputs of a run: tests, compiled Python
    (repo / "tests" / "t.py").write_text("changed\n")
    (repo / "elastic" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert print_of(repo, a=1) == first
    # inputs: the variables, a role's file, the package the nodes run, the inventory
    assert print_of(repo, a=2) != first
    assert print_of(repo) != first
    for path, text in (
        (repo / "roles" / "munge" / "tasks" / "main.yml", "- name: two\n"),
        (repo / "elastic" / "a.py", "x = 2\n"),
        (repo / "hosts.yml", "all: {hosts: {head: {}, node-0: {}}}\n"),
        (repo / "group_vars" / "all" / "testbed.yml", "ptc_testbed: local\n"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        before = print_of(repo, a=1)
        path.write_text(text)
        assert print_of(repo, a=1) != before, path


def run_script(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-", *args],
        input=script,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return done.stdout


def probe_here(
    path: Path,
    watched: Path,
    wanted: str,
    playbook: str = "site.yml",
    env: dict[str, str] | None = None,
) -> str:
    return stamp.why_not_current(
        run_script(stamp.PROBE_SCRIPT, str(path), str(watched), env=env), wanted, playbook
    )


def record_here(
    path: Path,
    wanted: str,
    playbook: str = "site.yml",
    env: dict[str, str] | None = None,
    boot_files: tuple[Path, ...] = (),
    managed: tuple[Path, ...] = (),
) -> None:
    record = json.dumps(
        {
            "fingerprint": wanted,
            "playbook": playbook,
            "time": time.time(),
            "managed": [str(p) for p in managed],
        }
    )
    script = f"RECORD = {record!r}\n" + stamp.RECORD_SCRIPT
    run_script(script, str(path), *map(str, boot_files), env=env)


def fake_systemctl(tmp_path: Path, failed: list[str], active: list[str]) -> dict[str, str]:
    """An environment whose systemctl (a stand-in for the node's, on PATH) lists these units."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "systemctl"
    tool.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  *--state=failed*) for u in {" ".join(failed)}; do echo "$u loaded failed x"; done ;;\n'
        f'  *--state=active*) for u in {" ".join(active)}; do echo "$u loaded active x"; done ;;\n'
        "esac\n"
    )
    tool.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_a_unit_failed_at_the_deploy_is_the_nodes_normal_one_failing_after_it_is_not(
    tmp_path: Path,
) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    path = tmp_path / "deployed.json"
    # at the deploy's end a mount the container cannot make had failed; slurmd ran
    at_deploy = fake_systemctl(tmp_path, ["run-rpc_pipefs.mount"], ["slurmd.service"])
    record_here(path, "f", env=at_deploy)
    recorded = json.loads(path.read_text())
    assert recorded["failed"] == ["run-rpc_pipefs.mount"]
    assert recorded["services"] == ["slurmd.service"]
    assert probe_here(path, etc, "f", env=at_deploy) == ""
    later = fake_systemctl(tmp_path, ["run-rpc_pipefs.mount", "munge.service"], [])
    assert probe_here(path, etc, "f", env=later) == "failed since its last deploy: munge.service"
    stopped = fake_systemctl(tmp_path, ["run-rpc_pipefs.mount"], [])
    assert probe_here(path, etc, "f", env=stopped) == (
        "stopped since its last deploy: slurmd.service"
    )


def test_a_node_is_current_until_a_watched_file_changes_after_its_record(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    (etc / "slurm").mkdir(parents=True)
    conf = etc / "slurm" / "slurm.conf"
    conf.write_text("ClusterName=a\n")
    past = time.time() - 60
    os.utime(conf, (past, past))
    path = tmp_path / "var" / "deployed.json"
    assert probe_here(path, etc, "f1") == "no record of a completed deploy"
    record_here(path, "f1")
    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text())["fingerprint"] == "f1"
    assert not list(path.parent.glob(".deployed-*")), "the temporary file stays behind"
    assert probe_here(path, etc, "f1") == ""
    assert probe_here(path, etc, "f2") == (
        "deployed from other inputs (roles, inventory or variables changed)"
    )
    assert probe_here(path, etc, "f2", "hpgmg.yml") == "last deployed with site.yml, not hpgmg.yml"
    later = path.stat().st_mtime + 5
    os.utime(conf, (later, later))
    assert probe_here(path, etc, "f1") == f"{conf} changed after its last deploy"


def test_a_file_every_boot_writes_again_counts_as_changed_only_when_its_contents_differ(
    tmp_path: Path,
) -> None:
    """A node powered off and on (an elastic pool's) gets its resolver file written again:
    same contents, still up to date; other contents, a run."""
    etc = tmp_path / "etc"
    etc.mkdir()
    resolv, hosts = etc / "resolv.conf", etc / "hosts"
    resolv.write_text("nameserver 10.88.0.1\n")
    hosts.write_text("10.10.1.1 head\n")
    past = time.time() - 60
    for f in (resolv, hosts):
        os.utime(f, (past, past))
    path = tmp_path / "deployed.json"
    record_here(path, "f", boot_files=(resolv, hosts))
    assert set(json.loads(path.read_text())["contents"]) == {str(resolv), str(hosts)}
    later = path.stat().st_mtime + 5
    resolv.write_text("nameserver 10.88.0.1\n")  # the boot's copy: the same
    os.utime(resolv, (later, later))
    assert probe_here(path, etc, "f") == ""
    hosts.write_text("10.10.1.1 head\n10.10.1.9 node-9\n")  # a node more: a run
    os.utime(hosts, (past, past))  # however old it looks
    assert probe_here(path, etc, "f") == f"{hosts} changed after its last deploy"


def test_a_managed_path_outside_the_watched_trees_is_kept_to_what_the_run_left(
    tmp_path: Path,
) -> None:
    """A spool directory a service fills, a file a role wrote, both outside /etc: new entries in
    the directory are the service's; the directory gone, its mode changed or the file rewritten
    after the deploy mean a run."""
    etc = tmp_path / "etc"
    etc.mkdir()
    spool, conf = tmp_path / "var" / "spool" / "slurmctld", tmp_path / "var" / "lib" / "x.conf"
    spool.mkdir(parents=True)
    spool.chmod(0o750)
    conf.parent.mkdir(parents=True)
    conf.write_text("a\n")
    past = time.time() - 60
    os.utime(conf, (past, past))
    never = tmp_path / "never-made"
    path = tmp_path / "deployed.json"
    record_here(path, "f", managed=(spool, conf, never))
    kept = json.loads(path.read_text())["managed"]
    assert sorted(kept) == sorted([str(spool), str(conf)])  # a path not there is not kept
    (spool / "job.state").write_text("state\n")  # the service at work
    assert probe_here(path, etc, "f") == ""
    spool.chmod(0o755)
    assert probe_here(path, etc, "f") == f"{spool} changed after its last deploy"
    spool.chmod(0o750)
    later = path.stat().st_mtime + 5
    os.utime(conf, (later, later))
    assert probe_here(path, etc, "f") == f"{conf} changed after its last deploy"
    os.utime(conf, (past, past))
    shutil.rmtree(spool)
    assert probe_here(path, etc, "f") == f"{spool} changed after its last deploy"


def test_an_unreadable_record_or_a_stopped_service_or_a_failed_unit_means_a_run() -> None:
    current = {"stamp": {"fingerprint": "f", "playbook": "site.yml"}, "newer": ""}
    assert stamp.why_not_current(json.dumps(current), "f", "site.yml") == ""
    assert stamp.why_not_current("not json", "f", "site.yml") == (
        "its deploy record could not be read"
    )
    odd = {**current, "stamp": ["f"]}
    assert stamp.why_not_current(json.dumps(odd), "f", "site.yml") == (
        "its deploy record is unreadable"
    )
    stopped = {**current, "inactive": ["slurmd.service"]}
    assert stamp.why_not_current(json.dumps(stopped), "f", "site.yml") == (
        "stopped since its last deploy: slurmd.service"
    )
    failed = {**current, "failed": ["munge.service"]}
    assert stamp.why_not_current(json.dumps(failed), "f", "site.yml") == (
        "failed since its last deploy: munge.service"
    )


def test_a_corrupt_record_on_the_node_reads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "deployed.json"
    path.write_text('{"fingerprint": ')
    assert probe_here(path, tmp_path, "f") == "no record of a completed deploy"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's client")
def test_an_unreachable_host_is_named_not_current(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    # a port on loopback nothing listens on: refused at once
    config.write_text("Host ghost\n  HostName 127.0.0.1\n  Port 9\n  ConnectTimeout 2\n")
    why = stamp.probe(config, ["ghost"], "f", "site.yml")
    assert why["ghost"].startswith("not checked ("), why
