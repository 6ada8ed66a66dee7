"""Host keys are checked: the experiment's known_hosts (pinned or recorded at first contact),
the ssh_config and Ansible arguments that use it, and a real ssh client refusing a changed key.

The SSH server is paramiko's, on loopback: it shows its host key and refuses every login,
which is all a host key check needs (the client checks the key before it authenticates)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
import yaml

from elastic.deploy import first_contact, runner
from elastic.deploy.target import Target
from elastic.errors import DeployError, RemoteError, TestbedError
from elastic.manager.workstation import ssh_run
from elastic.profile.topology import Login, Node, Topology
from elastic.testbed import known_hosts
from elastic.testbed.inventory import build_inventory

PING = Path(__file__).resolve().parents[3] / "tests/integration/playbooks/ping.yml"
KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"


def test_pin_replaces_only_that_hosts_keys(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(f"[127.0.0.1]:2201 {KEY_A}\n[127.0.0.1]:2202 {KEY_A}\nhead,10.10.1.1 {KEY_A}\n")
    known_hosts.pin(path, "127.0.0.1", 2201, [KEY_B])
    assert path.read_text().splitlines() == [
        f"[127.0.0.1]:2202 {KEY_A}",
        f"head,10.10.1.1 {KEY_A}",
        f"[127.0.0.1]:2201 {KEY_B}",
    ]
    assert path.stat().st_mode & 0o777 == 0o600
    known_hosts.pin(path, "head", 22, [KEY_B])
    assert f"head {KEY_B}" in path.read_text() and "head,10.10.1.1" not in path.read_text()


def test_public_keys_from_the_nodes_files() -> None:
    text = f"{KEY_A} root@x\n\necdsa-sha2-nistp256 AAAAE2 root@x\n"
    assert known_hosts.public_keys(text, "node-0") == [KEY_A, "ecdsa-sha2-nistp256 AAAAE2"]
    with pytest.raises(TestbedError, match="node node-0: no SSH host key"):
        known_hosts.public_keys("cat: no such file", "node-0")


class FakeSshServer:
    """A loopback SSH server (paramiko) that shows ``key`` and lets nobody in."""

    def __init__(self, key: paramiko.PKey) -> None:
        self.key = key
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            transport = paramiko.Transport(conn)
            transport.add_server_key(self.key)
            with contextlib.suppress(paramiko.SSHException, EOFError, OSError):
                transport.start_server(server=paramiko.ServerInterface())
                transport.accept(timeout=5)  # until the client gives up logging in
            transport.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[FakeSshServer]:
    srv = FakeSshServer(paramiko.ECDSAKey.generate())
    yield srv
    srv.close()


def node(port: int) -> Node:
    return Node(client_id="node-0", login=Login("127.0.0.1", port, "root"))


def inventory(tmp_path: Path, port: int, pinned: bool) -> Path:
    key = tmp_path / "key"
    key.write_text("")
    build_inventory(
        Topology(nodes=[node(port)], links=[]), tmp_path / "inv", key, "local", pinned=pinned
    )
    return tmp_path / "inv"


def public(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


def attempt(inv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-F", str(inv / "ssh_config"), "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
         "node-0", "true"],
        capture_output=True, text=True, timeout=30, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize("pinned", [True, False])
def test_the_inventory_checks_host_keys(tmp_path: Path, pinned: bool) -> None:
    inv = inventory(tmp_path, 2201, pinned)
    settings = subprocess.run(
        ["ssh", "-G", "-F", str(inv / "ssh_config"), "node-0"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert f"stricthostkeychecking {'true' if pinned else 'accept-new'}" in settings
    assert f"userknownhostsfile {inv / 'known_hosts'}" in settings
    args = yaml.safe_load((inv / "hosts.yml").read_text())["all"]["vars"]["ansible_ssh_common_args"]
    assert f"StrictHostKeyChecking={'yes' if pinned else 'accept-new'}" in args


def test_a_pinned_key_is_required_and_a_changed_one_refused(
    tmp_path: Path, server: FakeSshServer
) -> None:
    inv = inventory(tmp_path, server.port, pinned=True)
    # Nothing pinned: refused.
    assert "Host key verification failed" in attempt(inv).stderr
    # The right key pinned: the key check passes and the login itself is refused.
    known_hosts.pin(inv / "known_hosts", "127.0.0.1", server.port, [public(server.key)])
    right = attempt(inv)
    assert "Permission denied" in right.stderr, right.stderr
    # Another key pinned (the node's key changed): refused, and ptc's error names the node.
    known_hosts.pin(inv / "known_hosts", "127.0.0.1", server.port, [KEY_B])
    assert "Host key verification failed" in attempt(inv).stderr
    with pytest.raises(RemoteError, match=r"(?s)^node-0: .*Host key verification failed"):
        ssh_run(inv / "ssh_config", "node-0", "true", timeout=30)


def test_first_contact_records_the_key_and_a_change_is_refused(
    tmp_path: Path, server: FakeSshServer
) -> None:
    inv = inventory(tmp_path, server.port, pinned=False)
    first = attempt(inv)
    assert "Permission denied" in first.stderr, first.stderr
    assert public(server.key) in (inv / "known_hosts").read_text()
    changed = FakeSshServer(paramiko.ECDSAKey.generate())  # same type, another key
    try:
        known = (inv / "known_hosts").read_text()
        (inv / "known_hosts").write_text(known.replace(f"]:{server.port} ", f"]:{changed.port} "))
        inv2 = inventory(tmp_path, changed.port, pinned=False)
        refused = attempt(inv2)
        assert "Host key verification failed" in refused.stderr, refused.stderr
    finally:
        changed.close()


def test_a_deploy_refuses_a_changed_key_naming_the_node(
    tmp_path: Path, server: FakeSshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ptc deploy`'s path (ansible-runner, which turns host key checking off unless told), with
    Ansible's own strategy; the mitogen path is the next tests'."""
    # The test's HOME is too deep for an SSH control socket's path.
    short = tempfile.mkdtemp(prefix="cp", dir="/tmp")
    monkeypatch.setenv("ANSIBLE_SSH_CONTROL_PATH_DIR", short)
    inv = inventory(tmp_path, server.port, pinned=True)
    known_hosts.pin(inv / "known_hosts", "127.0.0.1", server.port, [KEY_B])
    target = Target("t", inv / "hosts.yml", inv / "ssh_config", tmp_path / "runs", tmp_path / "f")
    with pytest.raises(DeployError, match=r"node-0: task .* unreachable") as err:
        runner.deploy(target, PING, mitogen=False)
    assert "Host key verification failed" in str(err.value), str(err.value)
    shutil.rmtree(short, ignore_errors=True)


def test_first_contact_is_made_only_where_keys_are_recorded_at_first_contact(
    tmp_path: Path, server: FakeSshServer
) -> None:
    """mitogen checks keys strictly (no accept-new): a deploy through it reaches every host
    once over OpenSSH first, which records new hosts' keys; pinned keys are left alone."""
    (tmp_path / "pinned").mkdir()
    (tmp_path / "tofu").mkdir()
    pinned = inventory(tmp_path / "pinned", server.port, pinned=True)
    assert not first_contact.records_at_first_contact(pinned / "ssh_config")
    assert first_contact.make(pinned / "ssh_config", ["node-0"]) == []
    assert not (pinned / "known_hosts").exists()  # nothing was recorded

    tofu = inventory(tmp_path / "tofu", server.port, pinned=False)
    assert first_contact.records_at_first_contact(tofu / "ssh_config")
    assert first_contact.inventory_hosts(tofu / "hosts.yml") == ["node-0"]
    assert first_contact.make(tofu / "ssh_config", ["node-0"]) == ["node-0"]
    assert public(server.key) in (tofu / "known_hosts").read_text()


def test_a_mitogen_deploy_records_a_new_hosts_key_and_refuses_a_changed_one(
    tmp_path: Path, server: FakeSshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = tempfile.mkdtemp(prefix="cp", dir="/tmp")
    monkeypatch.setenv("ANSIBLE_SSH_CONTROL_PATH_DIR", short)
    inv = inventory(tmp_path, server.port, pinned=False)
    target = Target("t", inv / "hosts.yml", inv / "ssh_config", tmp_path / "runs", tmp_path / "f")
    # The fake server lets nobody in: the run fails at login, after the key was recorded.
    with pytest.raises(DeployError, match=r"node-0: task .* unreachable") as err:
        runner.deploy(target, PING, mitogen=True)
    assert public(server.key) in (inv / "known_hosts").read_text()
    assert "host key" not in str(err.value).lower(), str(err.value)
    # The node's key changes: the first contact and then the run refuse it.
    known_hosts.pin(
        inv / "known_hosts", "127.0.0.1", server.port, [public(paramiko.ECDSAKey.generate())]
    )
    with pytest.raises(DeployError, match=r"node-0: task .* unreachable") as err:
        runner.deploy(target, PING, mitogen=True)
    assert "host key" in str(err.value).lower(), str(err.value)
    shutil.rmtree(short, ignore_errors=True)
