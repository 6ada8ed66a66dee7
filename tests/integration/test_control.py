"""The testbed's control service on real nodes: a head asks for its own nodes' power through
the socket its experiment mounts, with the credential beside it, and is refused the rest.

Two undeployed experiments (``ptc up`` only): a 1+1 Slurm cluster and a single node standing
for another user. The requests are made inside the head with python3's standard library (the
node image has no httpx), so the path is exactly the one a Slurm hook takes; the credential is
read from its file there, never put on a command line."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from naming import experiment_name

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = experiment_name("ctl")
OTHER = experiment_name("ctlo")

# Run inside a node: one request through the mounted socket. argv: method, path, JSON body
# ("-" for none), and which credential to present: "mounted", "wrong" or a file to read it from.
REQUEST = r"""
import http.client, json, socket, sys, time

class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect("/run/ptc-testbed/api.sock")

method, path, body, which = sys.argv[1:5]
retry = len(sys.argv) > 5 and sys.argv[5] == "retry"
if which == "wrong":
    secret = "not-the-credential"
else:
    source = "/run/ptc-testbed/credential" if which == "mounted" else which
    secret = open(source).read().strip()
headers = {"Authorization": "Bearer " + secret, "Content-Type": "application/json"}
deadline = time.monotonic() + 300
while True:
    # as ControlClient does: a broken connection (the service restarting) is retried, same id
    try:
        conn = Unix("control", timeout=600)
        conn.request(method, path, body=None if body == "-" else body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        break
    except (OSError, http.client.HTTPException):
        if not retry or time.monotonic() > deadline:
            raise
        time.sleep(0.5)
print(json.dumps({"status": answer.status, "body": json.loads(data or b"null")}))
"""


REPO = Path(__file__).resolve().parents[2]
PTC = [sys.executable, "-m", "elastic.cli"]
# The other user's home is inside the checkout, under the Makefile's ./state: the nodes of both
# experiments must see none of it through /local/repository.
REPO_STATE = REPO / "state"
OTHER_HOME = REPO_STATE / f"it-{OTHER}"
# Seen at collection, before any test made it: a ./state of the user's own is never removed.
STATE_WAS_THERE = REPO_STATE.exists()


def ptc_other(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*PTC, *args],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=1800,
        env=os.environ | {"PTC_HOME": str(OTHER_HOME), "COLUMNS": "200"},
    )
    sys.stderr.write(f"$ PTC_HOME={OTHER_HOME} ptc {' '.join(args)} -> {proc.returncode}\n")
    sys.stderr.write(proc.stderr[-3000:] + "\n")
    return proc


@pytest.fixture(scope="module")
def exps(experiment_factory: Callable[..., Path]) -> Iterator[tuple[Path, Path]]:
    made_state = not REPO_STATE.exists()
    # the other experiment first, so that ./state exists when the first one's nodes start
    proc = ptc_other("up", "profiles/tests/single_node.py", "--local", "--name", OTHER)
    try:
        assert proc.returncode == 0, proc.stderr[-4000:]
        main = experiment_factory(NAME, "profiles/slurm_cluster.py", "computeNodeCount=1")
        yield main, OTHER_HOME / "experiments" / OTHER
    finally:
        if (OTHER_HOME / "experiments" / OTHER).exists():
            ptc_other("down", OTHER)
        shutil.rmtree(OTHER_HOME, ignore_errors=True)
        if made_state:
            with contextlib.suppress(OSError):
                REPO_STATE.rmdir()


def in_node(experiment: str, node: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        ["podman", "exec", "-i", f"ptc-{experiment}-{node}", "python3", "-", *args],
        input=REQUEST,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def operate(
    action: str, nodes: list[str], request_id: str, which: str = "mounted"
) -> dict[str, Any]:
    body = json.dumps({"id": request_id, "action": action, "nodes": nodes})
    return in_node(NAME, "head", "POST", "/v1/operations", body, which)


def container_state(experiment: str, node: str) -> str:
    return subprocess.run(
        ["podman", "inspect", "--format", "{{.State.Status}}", f"ptc-{experiment}-{node}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_up_starts_the_service(exps: tuple[Path, Path], ptc: Any) -> None:
    proc = ptc("control", "status", NAME)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "running" in proc.stdout


def test_head_powers_its_node_off_and_on(exps: tuple[Path, Path]) -> None:
    listed = in_node(NAME, "head", "GET", "/v1/nodes", "-", "mounted")
    assert listed["status"] == 200
    assert listed["body"]["nodes"] == {"head": "running", "node-0": "running"}

    off = operate("power_off", ["node-0"], "it-off-1")
    assert off["status"] == 200, off
    assert off["body"]["state"] == "done"
    assert container_state(NAME, "node-0") in {"exited", "stopped"}
    listed = in_node(NAME, "head", "GET", "/v1/nodes", "-", "mounted")
    assert listed["body"]["nodes"]["node-0"] == "stopped"

    on = operate("power_on", ["node-0"], "it-on-1")
    assert on["status"] == 200, on
    assert container_state(NAME, "node-0") == "running"
    # nodeops' own steps, each timed, come back in the answer
    on_steps = [st["step"] for st in on["body"]["steps"] if st.get("node") == "node-0"]
    assert on_steps[0] == "start" and on_steps[-1] == "ready", on["body"]["steps"]
    assert "stop" in [st.get("step") for st in off["body"]["steps"]]
    sys.stderr.write(f"power off {off['body']['seconds']} s, power on {on['body']['seconds']} s\n")

    again = operate("power_on", ["node-0"], "it-on-1")  # the same request id: replayed
    assert again["status"] == 200 and again["body"]["replayed"] is True
    assert again["body"]["started"] == on["body"]["started"]


def test_service_killed_mid_power_on_completes_it_once(exps: tuple[Path, Path], ptc: Any) -> None:
    main, _ = exps
    assert operate("power_off", ["node-0"], "it-off-2")["status"] == 200
    record = main / "control-service" / "journal" / "it-kill-on.json"
    body = json.dumps({"id": "it-kill-on", "action": "power_on", "nodes": ["node-0"]})
    request = subprocess.Popen(
        ["podman", "exec", "-i", f"ptc-{NAME}-head", "python3", "-",
         "POST", "/v1/operations", body, "mounted", "retry"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert request.stdin is not None
    request.stdin.write(REQUEST)
    request.stdin.close()
    deadline = time.monotonic() + 60
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert json.loads(record.read_text())["state"] == "started"
    os.kill(int((main / "control-service" / "service.pid").read_text()), signal.SIGKILL)
    assert ptc("control", "start", NAME).returncode == 0
    assert request.stdout is not None
    out = request.stdout.read()
    assert request.wait(600) == 0
    answer = json.loads(out)
    assert answer["status"] == 200, answer
    assert (answer["body"]["state"], answer["body"]["attempts"]) == ("done", 2)
    assert len(answer["body"]["interrupted"]) == 1
    assert container_state(NAME, "node-0") == "running"
    # wired as before: its experiment LAN interface is there, and the head reaches it over SSH
    lan = subprocess.run(
        ["podman", "exec", f"ptc-{NAME}-node-0", "ip", "-br", "-4", "addr", "show", "eth1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert lan.returncode == 0 and "10." in lan.stdout, lan.stdout + lan.stderr
    reach = ptc("run", NAME, "node-0", "--", "true", timeout=300)
    assert reach.returncode == 0, reach.stderr


def test_refusals_change_nothing(exps: tuple[Path, Path]) -> None:
    wrong = operate("power_off", ["node-0"], "it-wrong", which="wrong")
    assert wrong["status"] == 401 and "credential" in wrong["body"]["detail"]
    foreign = operate("power_off", [f"{OTHER}-solo"], "it-foreign")
    assert foreign["status"] == 403 and foreign["body"]["node"] == f"{OTHER}-solo"
    by_container = operate("power_off", [f"ptc-{OTHER}-solo"], "it-foreign-2")
    assert by_container["status"] == 403
    unknown = operate("power_off", ["node-9"], "it-unknown")
    assert unknown["status"] == 404 and unknown["body"]["node"] == "node-9"
    assert container_state(OTHER, "solo") == "running"
    assert container_state(NAME, "node-0") == "running"
    # The other experiment's credential (its node is no controller, so it has no mount; taken
    # from the host here) cannot act on ours either.
    _, other = exps
    copy = "/root/.other-credential"
    subprocess.run(
        ["podman", "exec", "-i", f"ptc-{NAME}-head", "sh", "-c", f"umask 077; cat > {copy}"],
        input=(other / "control" / "credential").read_text(), text=True, check=True,
    )  # fmt: skip
    try:
        theirs = operate("power_off", ["node-0"], "it-theirs", which=copy)
    finally:
        subprocess.run(["podman", "exec", f"ptc-{NAME}-head", "rm", "-f", copy], check=True)
    assert theirs["status"] == 401 and "credential" in theirs["body"]["detail"], theirs
    assert container_state(NAME, "node-0") == "running"
    solo = subprocess.run(
        ["podman", "exec", f"ptc-{OTHER}-solo", "ls", "/run/ptc-testbed"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert solo.returncode != 0, "a node of no Slurm controller has the control service mounted"


def test_only_the_controller_sees_its_own_control_directory(exps: tuple[Path, Path]) -> None:
    main, other = exps
    listing = subprocess.run(
        ["podman", "exec", f"ptc-{NAME}-head", "ls", "-A", "/run/ptc-testbed"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert sorted(listing) == ["api.sock", "credential"]
    touch = subprocess.run(
        ["podman", "exec", f"ptc-{NAME}-head", "touch", "/run/ptc-testbed/x"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert touch.returncode != 0 and "Read-only" in touch.stderr
    mounts = subprocess.run(
        ["podman", "exec", f"ptc-{NAME}-head", "cat", "/proc/self/mountinfo"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    fields = [line.split() for line in mounts.splitlines()]
    assert [f[3] for f in fields if f[4] == "/run/ptc-testbed"] == [str(main / "control")]
    state_roots = [f[3] for f in fields if "/experiments/" in f[3]]
    assert state_roots and all(r.startswith(f"{main}/") for r in state_roots), state_roots
    assert not [r for r in state_roots if "control-service" in r]
    their_secret = (other / "control" / "credential").read_text().strip()
    found = subprocess.run(
        ["podman", "exec", f"ptc-{NAME}-head", "grep", "-rlsF", "--devices=skip", "--", their_secret,
         "/run", "/etc", "/root", "/var/lib/ptc-geni", "/tmp", "/local/repository"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert found.returncode == 1 and found.stdout == ""  # 1: searched, not found
    # A compute node never asks for power: it holds neither the socket nor the credential.
    compute = subprocess.run(
        ["podman", "exec", f"ptc-{NAME}-node-0", "ls", "-A", "/run/ptc-testbed"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert compute.returncode != 0 and "No such file" in compute.stderr, compute


def test_state_in_the_checkout_is_hidden_from_nodes(exps: tuple[Path, Path]) -> None:
    _, other = exps
    assert (other / "control" / "credential").is_file()  # there on the host
    for container in (f"ptc-{NAME}-head", f"ptc-{OTHER}-solo"):
        listing = subprocess.run(
            ["podman", "exec", container, "ls", "-A", "/local/repository/state"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert listing == "", (container, listing)


def test_status_restarts_a_dead_service(exps: tuple[Path, Path], ptc: Any) -> None:
    main, _ = exps
    pid = int((main / "control-service" / "service.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    proc = ptc("status", NAME)
    assert proc.returncode == 0
    assert "was not running: started it" in " ".join(proc.stderr.split())
    assert int((main / "control-service" / "service.pid").read_text()) != pid
    listed = in_node(NAME, "head", "GET", "/v1/nodes", "-", "mounted")
    assert listed["status"] == 200


def test_a_node_starts_after_a_directory_it_hides_is_gone(
    exps: tuple[Path, Path], ptc: Any
) -> None:
    """A node created while ./state existed masks it; once the directory is removed (the other
    user is gone, ``rm -rf state``), the node still powers on, and still sees nothing there."""
    if STATE_WAS_THERE:
        pytest.skip("./state was there before the tests: it holds the user's own experiments")
    assert ptc_other("down", OTHER).returncode == 0
    shutil.rmtree(OTHER_HOME)
    REPO_STATE.rmdir()
    off = ptc("node", "power-off", NAME, "node-0")
    assert off.returncode == 0, off.stderr
    on = ptc("node", "power-on", NAME, "node-0")
    assert on.returncode == 0, on.stderr
    assert container_state(NAME, "node-0") == "running"
    listing = subprocess.run(
        ["podman", "exec", f"ptc-{NAME}-node-0", "ls", "-A", "/local/repository/state"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert listing == ""


def test_down_stops_the_service(exps: tuple[Path, Path], ptc: Any) -> None:
    main, _ = exps
    pid = int((main / "control-service" / "service.pid").read_text())
    proc = ptc("down", NAME)
    assert proc.returncode == 0, proc.stderr
    cmdline = Path(f"/proc/{pid}/cmdline")
    assert (
        not cmdline.exists()
        or b"elastic.testbed.backends.local.control" not in cmdline.read_bytes()
    )
