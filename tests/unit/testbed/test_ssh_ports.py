"""Nodes' SSH ports: outside the ephemeral range, never one another ptc container holds."""

from __future__ import annotations

import socket

import pytest

from elastic.errors import TestbedError
from elastic.testbed.backends.local import ssh_ports


def test_the_ephemeral_range_is_read_with_both_ends() -> None:
    r = ssh_ports.ephemeral_range("32768\t60999\n")
    assert 32768 in r and 60999 in r and 61000 not in r and 32767 not in r


def test_candidates_leave_out_the_ephemeral_range_and_held_ports() -> None:
    ephemeral = ssh_ports.ephemeral_range("32768 60999")
    pool = ssh_ports.candidates(ephemeral, {10000, 20000})
    assert pool[0] == 10001
    assert 20000 not in pool and 32767 in pool and 61000 in pool
    assert not any(p in ephemeral for p in pool)


def test_choose_skips_ports_in_use_now() -> None:
    ephemeral = ssh_ports.ephemeral_range("11000 65535")  # leaves 10000-10999
    busy = set(range(10000, 10999))
    port = ssh_ports.choose(set(), ephemeral, free_now=lambda p: p not in busy)
    assert port == 10999


def test_no_free_port_is_a_clear_error() -> None:
    ephemeral = ssh_ports.ephemeral_range("10100 65535")
    with pytest.raises(TestbedError, match=r"no free port for a node.s SSH.*10100-65535"):
        ssh_ports.choose(range(10000, 10050), ephemeral, free_now=lambda p: False)


def test_a_listening_port_is_not_free() -> None:
    with socket.socket() as sock:
        sock.bind((ssh_ports.HOST, 0))
        sock.listen()
        assert not ssh_ports._free_now(sock.getsockname()[1])


def test_held_ports_come_from_every_ptc_container_running_or_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listing = (
        '[{"Ports": [{"host_ip": "127.0.0.1", "container_port": 22, "host_port": 23456}]},'
        ' {"Ports": null}, {"Ports": [{"container_port": 22, "host_port": 12001}]}]'
    )
    seen: list[tuple[str, ...]] = []

    def run(*args: str, **_: object) -> object:
        seen.append(args)
        return type("P", (), {"stdout": listing})()

    monkeypatch.setattr(ssh_ports.podman, "run", run)
    assert ssh_ports.held_ports() == {23456, 12001}
    assert "-a" in seen[0] and f"label={ssh_ports.podman.EXPERIMENT_LABEL}" in seen[0]
