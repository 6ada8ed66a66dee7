"""Secrets stay out of a deploy's run directory and command lines (elastic.deploy.secrets).

The run test starts the real ansible-runner and ansible-playbook against this machine
(connection local) with a playbook that uses the secret, and samples every process's command
line while it runs."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from elastic.cli.cluster import parse_extravars
from elastic.deploy import runner, secrets
from elastic.deploy.target import Target
from elastic.errors import InputError

CANARY = "ptc-canary-7f3a9c"


def test_the_rule_covers_the_roles_no_log_variables_and_secret_names() -> None:
    no_log = secrets.no_log_variables()
    assert {"etcd_snapshot_aws_access_key_id", "munge_key_value"} <= no_log
    for name in [*no_log, "slurm_accounting_password_value", "elastic_partition_token"]:
        assert secrets.is_secret_variable(name), name
    for name in ["ptc_elastic", "etcd_snapshot_bucket", "munge_key_source", "slurm_nodes"]:
        assert not secrets.is_secret_variable(name), name


def test_the_environment_loses_aws_and_secret_names() -> None:
    env = {
        "PATH": "/bin",
        "AWS_SECRET_ACCESS_KEY": CANARY,
        "AWS_ACCESS_KEY_ID": CANARY,
        "GITHUB_TOKEN": CANARY,
        "DB_PASSWORD": CANARY,
        "ANSIBLE_CONFIG": "a.cfg",
        "ANSIBLE_VAULT_PASSWORD_FILE": "/root/.vault",
    }
    assert secrets.scrub_environment(env) == {
        "PATH": "/bin",
        "ANSIBLE_CONFIG": "a.cfg",
        "ANSIBLE_VAULT_PASSWORD_FILE": "/root/.vault",
    }


def test_redacted_keeps_names_and_plain_values() -> None:
    assert secrets.redacted(
        {"ptc_elastic": True, "etcd_snapshot_aws_secret_access_key": CANARY}
    ) == {
        "ptc_elastic": True,
        "etcd_snapshot_aws_secret_access_key": secrets.REDACTED,
    }


def test_the_private_vars_file_is_owner_only_and_removed() -> None:
    with secrets.private_vars_file({"k": CANARY}) as path:
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
        assert CANARY in path.read_text()
    assert not path.exists() and not path.parent.exists()


def test_the_scan_finds_files_and_command_lines(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "log").write_text(f"x {CANARY} y")
    (tmp_path / "clean").write_text("nothing")
    found = secrets.leaks_in_files([tmp_path], {"canary": CANARY})
    assert [(leak.where, leak.secret) for leak in found] == [
        (str(tmp_path / "a" / "b" / "log"), "canary")
    ]
    proc = tmp_path / "proc"
    for pid, argv in [(10, [b"sleep", b"1"]), (11, [b"tool", b"--key=" + CANARY.encode()])]:
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    leaks = secrets.leaks_in_command_lines({"canary": CANARY}, proc)
    assert [str(leak) for leak in leaks] == ["canary in pid 11 (tool)"]
    assert CANARY not in str(leaks[0])
    assert secrets.leaks_in_command_lines({"canary": CANARY}, proc, ignore=[11]) == []


def _process(proc: Path, pid: int, parent: int, argv: list[bytes]) -> None:
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    (proc / str(pid) / "stat").write_text(f"{pid} ({argv[0].decode()}) S {parent} 1 1 0\n")


def test_a_fork_of_an_ignored_process_is_ignored_until_it_execs(tmp_path: Path) -> None:
    """Between fork and exec a child shows its parent's command line: that is the parent's own
    (ignored) secret, not a leak; the same child after exec, or a stranger, is scanned."""
    proc = tmp_path / "proc"
    user = [b"ptc", b"deploy", b"-e", b"k=" + CANARY.encode()]
    _process(proc, 20, 1, user)
    _process(proc, 21, 20, user)  # forked by the ignored 20, not yet exec'd
    _process(proc, 22, 20, [b"helper", CANARY.encode()])  # exec'd with the secret: a leak
    _process(proc, 23, 1, user)  # the same command line, but no child of 20: a leak
    leaks = secrets.leaks_in_command_lines({"canary": CANARY}, proc, ignore=[20])
    assert sorted(leak.where for leak in leaks) == ["pid 22 (helper)", "pid 23 (ptc)"]


def test_extravars_from_a_vars_file(tmp_path: Path) -> None:
    (tmp_path / "v.yml").write_text(f"etcd_snapshot_aws_secret_access_key: {CANARY}\nn: 2\n")
    assert parse_extravars([f"@{tmp_path / 'v.yml'}", "m=1"]) == {
        "etcd_snapshot_aws_secret_access_key": CANARY,
        "n": 2,
        "m": 1,
    }
    (tmp_path / "list.yml").write_text("- 1\n")
    with pytest.raises(InputError, match=r"list\.yml: expected a mapping"):
        parse_extravars([f"@{tmp_path / 'list.yml'}"])
    with pytest.raises(InputError, match=r"-e @.*missing\.yml: cannot read"):
        parse_extravars([f"@{tmp_path / 'missing.yml'}"])


PLAYBOOK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: Use the secrets (as a role would, under no_log)
      ansible.builtin.copy:
        content: "{{ etcd_snapshot_aws_secret_access_key }}"
        dest: "{{ out }}"
        mode: "0600"
      no_log: true
    - name: Take a moment, so the sampler sees ansible-playbook running
      ansible.builtin.command: sleep 2
      changed_when: false
"""


def test_a_run_records_no_secret_and_shows_none_in_ps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_canary = CANARY + "-env"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env_canary)
    canaries = {"extravar": CANARY, "environment": env_canary}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        f"      ansible_python_interpreter: {sys.executable}\n"
    )
    book = tmp_path / "book.yml"
    book.write_text(PLAYBOOK)
    out = tmp_path / "written"
    target = Target("t", inventory, tmp_path / "ssh_config", tmp_path / "runs", tmp_path / "facts")

    seen: list[secrets.Leak] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.extend(secrets.leaks_in_command_lines(canaries, ignore=[os.getpid()]))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = runner.deploy(
            target, book, extravars={"etcd_snapshot_aws_secret_access_key": CANARY, "out": str(out)}
        )
    finally:
        stop.set()
        sampler.join()
    assert result.status == "successful"
    assert out.read_text() == CANARY  # the playbook did get the secret
    assert secrets.leaks_in_files([tmp_path / "runs"], canaries) == []
    assert seen == [], [str(leak) for leak in seen]
    recorded = (result.run_dir / "extravars.json").read_text()
    assert "etcd_snapshot_aws_secret_access_key" in recorded and secrets.REDACTED in recorded
    # What ansible-runner does record: the command, with the file's name only.
    command = (result.run_dir / "ansible" / "command").read_text()
    assert '"-e", "@' in command and "AWS_SECRET_ACCESS_KEY" not in command
