"""site.yml's first play gathers the facts of nodes outside the run that answer on their SSH
port. A peer whose port answers but whose SSH does not (sshd starting, a machine being repaired
or broken) must not fail the run's own hosts: run with ansible-playbook, a local host and a
peer whose "SSH port" is a listener that closes every connection at once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic.paths import REPO_ROOT

SITE = REPO_ROOT / "site.yml"


@pytest.fixture
def closing_port() -> Iterator[int]:
    """A TCP port on loopback that accepts and at once closes each connection."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    done.set()
    thread.join()
    server.close()


def facts_play() -> dict[str, Any]:
    plays = yaml.safe_load(SITE.read_text())
    play = plays[0]
    assert play["name"] == "Facts of the nodes outside this run", play["name"]
    return dict(play)


def test_a_peer_that_answers_but_cannot_be_reached_fails_none_of_the_run(
    tmp_path: Path, closing_port: int
) -> None:
    after = {"name": "The run goes on", "ansible.builtin.debug": {"msg": "went on"}}
    play = facts_play()
    play["tasks"] = [*play["tasks"], after]
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play], sort_keys=False))
    inventory = {
        "all": {
            "hosts": {
                "runner": {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                },
                "peer": {
                    "ansible_host": "127.0.0.1",
                    "ansible_port": closing_port,
                    "ansible_user": "nobody",
                    "ansible_ssh_common_args": (
                        "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                        "-o BatchMode=yes -o ConnectTimeout=5"
                    ),
                },
            }
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(
        os.environ,
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_HOST_KEY_CHECKING="False",
        ANSIBLE_RETRY_FILES_ENABLED="False",
    )
    args = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventory.yml"]
    done = subprocess.run(
        [*args, "--limit", "runner", "play.yml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    out = done.stdout + done.stderr
    # the peer was tried (its port answered) and could not be reached
    assert "peer" in out and ("UNREACHABLE" in out or "unreachable" in out), out[-3000:]
    assert done.returncode == 0, out[-3000:]
    assert "went on" in out, out[-3000:]
