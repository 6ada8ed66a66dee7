"""`ptc run`, `ptc put`, `ptc get` and the library's SSH seam on real nodes.

One undeployed experiment (``ptc up`` only: these need SSH, not Slurm) of a head and seven
compute nodes for the whole module. The tests that stop or freeze a node bring it back."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from naming import experiment_name
from remote import containers

from elastic.errors import RemoteError, RemoteTimeout
from elastic.remote import ssh

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = experiment_name("remote")
REPO = Path(__file__).resolve().parents[2]
PTC_CLI = [sys.executable, "-m", "elastic.cli"]
NODES = ["head", *(f"node-{i}" for i in range(7))]


@pytest.fixture(scope="module")
def exp(experiment_factory: Callable[..., Path]) -> Path:
    return experiment_factory(NAME, "profiles/slurm_cluster.py", "computeNodeCount=7")


def container(node: str) -> str:
    [name] = [c for c in containers(NAME) if c.endswith(f"-{node}")]
    return name


def podman(*args: str) -> None:
    subprocess.run(["podman", *args], check=True, capture_output=True, timeout=120)


def results(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {r["host"]: r for r in json.loads(proc.stdout)["results"]}


def test_a_failing_host_is_reported_and_fails_the_command(exp: Path, ptc: Any) -> None:
    proc = ptc(
        "run", NAME, "all", "--json", "--",
        'echo "on $(hostname)"; if [ "$(hostname)" = node-2 ]; then echo broke >&2; exit 3; fi',
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == RemoteError.exit_code, proc.stderr
    got = results(proc)
    assert list(got) == NODES
    assert got["node-2"]["exit_status"] == 3 and got["node-2"]["failure"] == "exit"
    assert got["node-2"]["stderr"].strip() == "broke"
    assert all(got[n]["ok"] and got[n]["stdout"] == f"on {n}\n" for n in NODES if n != "node-2")
    assert "1 of 8 hosts failed: node-2 (exit 3)" in " ".join(proc.stderr.split())


def test_at_most_k_hosts_run_at_once(exp: Path, ptc: Any) -> None:
    """Overlap from the nodes' own clocks (one host clock for every container): the start and
    end each node stamped around its sleep."""
    started = time.monotonic()
    proc = ptc(
        "run", NAME, "all", "--parallel", "2", "--json", "--",
        "date +%s.%N; sleep 1; date +%s.%N",
        timeout=300,
    )  # fmt: skip
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    got = results(proc)
    assert list(got) == NODES and all(r["ok"] for r in got.values())
    spans = [tuple(float(x) for x in r["stdout"].split()) for r in got.values()]
    assert all(len(s) == 2 and s[1] - s[0] >= 1 for s in spans)
    edges = sorted([(s[0], 1) for s in spans] + [(s[1], -1) for s in spans])
    running, peak = 0, 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    print(f"\n8 hosts x sleep 1 with --parallel 2: {wall:.1f} s wall, at most {peak} at once")
    assert peak == 2


def test_put_then_get_returns_the_same_bytes(exp: Path, ptc: Any, tmp_path: Path) -> None:
    data = os.urandom(1 << 20)
    local = tmp_path / "blob.bin"
    local.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    put = ptc("put", NAME, "node-*", str(local), "/tmp/ptc-blob.bin", timeout=300)
    assert put.returncode == 0, put.stderr
    sums = ptc("run", NAME, "node-*", "--json", "--", "sha256sum /tmp/ptc-blob.bin")
    assert {r["stdout"].split()[0] for r in results(sums).values()} == {digest}
    back = tmp_path / "back"
    got = ptc("get", NAME, "node-[0-3]", "/tmp/ptc-blob.bin", str(back), timeout=300)
    assert got.returncode == 0, got.stderr
    copies = sorted(back.glob("*/ptc-blob.bin"))
    assert [c.parent.name for c in copies] == ["node-0", "node-1", "node-2", "node-3"]
    assert {hashlib.sha256(c.read_bytes()).hexdigest() for c in copies} == {digest}
    missing = ptc("get", NAME, "head", "/tmp/no-such-file", str(back))
    assert missing.returncode == RemoteError.exit_code
    assert not (back / "head").exists() or not any((back / "head").iterdir())


def test_sudo_and_selectors(exp: Path, ptc: Any) -> None:
    proc = ptc("run", NAME, "slurm_controller,node-6", "--sudo", "--json", "--", "id -u")
    assert proc.returncode == 0, proc.stderr
    assert {h: r["stdout"] for h, r in results(proc).items()} == {"head": "0\n", "node-6": "0\n"}
    unknown = ptc("run", NAME, "node-0,gpu-*", "--", "true")
    assert unknown.returncode == 2 and "'gpu-*' matches no host" in unknown.stderr


def test_the_seam_runs_with_stdin_without_it_and_names_failures(exp: Path) -> None:
    config = exp / "inventory" / "ssh_config"
    assert ssh.run(config, "node-0", "cat", stdin="secret\n", timeout=60) == "secret\n"
    assert ssh.run(config, "node-0", "cat", timeout=60) == ""  # no stdin: an end of file
    data = bytes(range(256)) * 64
    assert ssh.run_bytes(config, "node-0", "cat", data, timeout=60) == data
    with pytest.raises(RemoteError) as failed:
        ssh.run(config, "node-1", "echo out; echo why >&2; exit 4", timeout=60)
    assert (failed.value.host, failed.value.returncode) == ("node-1", 4)
    assert "why" in str(failed.value) and "out" in failed.value.output
    with pytest.raises(RemoteTimeout) as slow:
        ssh.run(config, "node-1", "sleep 30", timeout=2)
    assert slow.value.timeout_s == 2 and slow.value.host == "node-1"


def test_the_seam_forwards_and_copies(exp: Path, tmp_path: Path) -> None:
    config = exp / "inventory" / "ssh_config"
    hosts = (exp / "inventory" / "hosts.yml").read_text()
    assert "ptc_lan_address" in hosts
    port = ssh.free_port()
    # node-1's SSH server, as head sees it on the experiment LAN.
    address = ssh.run(config, "node-1", "hostname -I", timeout=60).split()
    lan = next(a for a in address if a.startswith("10.10."))
    tunnel = ssh.Tunnel(config, "head", [ssh.Forward(f"127.0.0.1:{port}", lan, 22)])
    try:
        tunnel.wait(30)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            assert s.recv(64).startswith(b"SSH-2.0-")
    finally:
        tunnel.close()
    local = tmp_path / "f.txt"
    local.write_text("copied\n")
    ssh.copy_to(config, "node-3", local, "/tmp/ptc-f.txt")
    assert ssh.run(config, "node-3", "cat /tmp/ptc-f.txt", timeout=60) == "copied\n"


def test_a_frozen_node_is_reported_failed_by_its_deadline(exp: Path, ptc: Any) -> None:
    victim = container("node-5")
    podman("pause", victim)
    try:
        proc = ptc(
            "run", NAME, "node-4,node-5", "--timeout", "5", "--connect-timeout", "5", "--json",
            "--", "hostname",
            timeout=120,
        )  # fmt: skip
    finally:
        podman("unpause", victim)
    assert proc.returncode == RemoteError.exit_code, proc.stderr
    got = results(proc)
    assert got["node-4"]["ok"]
    assert got["node-5"]["failure"] == "timeout" and got["node-5"]["exit_status"] is None
    assert "node-5" in proc.stderr


def test_a_node_frozen_mid_command_is_reported_failed(exp: Path, ptc: Any) -> None:
    """The node is frozen only once the command is seen running on it (a busy machine once let
    a short command finish before `podman pause` had taken), and the command would finish well
    inside the timeout if it were not: only the freeze can make it time out."""
    victim = container("node-6")
    marker = "/tmp/ptc-frozen-test-started"
    podman("exec", victim, "rm", "-f", marker)
    run = subprocess.Popen(
        [*PTC_CLI, "run", NAME, "node-6", "--timeout", "12", "--json", "--",
         f"touch {marker}; sleep 6; echo done"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        cwd=REPO,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(
            ["podman", "exec", victim, "test", "-e", marker], capture_output=True, timeout=60
        ).returncode:
            assert run.poll() is None and time.monotonic() < deadline, "the command never started"
            time.sleep(0.3)
        podman("pause", victim)
        out, err = run.communicate(timeout=180)
    finally:
        podman("unpause", victim)
    assert run.returncode == RemoteError.exit_code, err
    assert json.loads(out)["results"][0]["failure"] == "timeout", out


def test_a_stopped_node_is_reported_failed(exp: Path, ptc: Any) -> None:
    """Last: the stopped node stays down."""
    podman("stop", "-t", "1", container("node-3"))
    proc = ptc(
        "run", NAME, "node-[2-3]", "--timeout", "5", "--connect-timeout", "5", "--json",
        "--", "hostname",
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == RemoteError.exit_code, proc.stderr
    got = results(proc)
    assert got["node-2"]["ok"]
    assert got["node-3"]["failure"] in ("unreachable", "timeout")
    assert "node-3" in proc.stderr
