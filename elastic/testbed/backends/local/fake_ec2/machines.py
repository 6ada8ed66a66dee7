"""An instance's machine on the local testbed, made and removed while the experiment runs.

A machine is a container of the experiment (its label, so ``ptc down`` removes it and the
testbed counts it against its size) booted from the prepared image with a fresh disk, as an
instance boots from its AMI. Unlike the experiment's nodes it has no control network, no SSH
port on the host, no geni data, no mount of the checkout; the experiment's shares are mounted
as on every machine of the testbed (the stand-in for the NFS mount no container here can make,
which the instance's user data then finds done). Its one interface is ``eth0`` on the
experiment's LAN, at the instance's private address, which the host sets from
outside (the machine holds no NET_ADMIN). Its grants are the nodes' (``privileges``). Its
metadata service (``imds``) answers on its loopback at 169.254.169.254, as EC2's does.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from elastic.errors import TestbedError
from elastic.testbed.backends.local import (
    capacity,
    etc_hosts,
    fileserver,
    network,
    podman,
    privileges,
)
from elastic.testbed.backends.local.fake_ec2 import METADATA_DIR, USER_DATA_LOG, imds
from elastic.testbed.experiment import Experiment

# Which instance a machine is: what tells it apart from the experiment's own nodes.
INSTANCE_LABEL = podman.FAKE_EC2_INSTANCE_LABEL
BOOT_WAIT_S = 90
USER_DATA_PATH = "/var/lib/cloud/instance/user-data.txt"
BOOT_FINISHED = "/var/lib/cloud/instance/boot-finished"
IMDS_PROGRAM = "/usr/local/lib/ptc-fake-ec2/imds.py"
IMDS_UNIT = "ptc-fake-imds"
IMDS_WAIT_S = 10.0
# Asks the service for a token from inside the machine, as the user data's first call does.
IMDS_PROBE = (
    "import http.client as h\n"
    f"c = h.HTTPConnection({imds.ADDRESS!r}, {imds.PORT}, timeout=2)\n"
    f"c.request('PUT', {imds.TOKEN_PATH!r}, headers={{{imds.TTL_HEADER!r}: '5'}})\n"
    "r = c.getresponse()\n"
    "r.read()\n"
    "raise SystemExit(0 if r.status == 200 else 1)\n"
)


@dataclass(frozen=True)
class Spec:
    """The machine of one instance: its node name (``ptc:node``), its private address on the
    experiment's LAN ``lan_index`` (with the LAN's prefix)."""

    node: str
    instance_id: str
    address: str
    prefixlen: int
    lan_index: int


def container(exp: Experiment, node: str) -> str:
    # The nodes' own scheme: the testbed's books and `ptc down` know it.
    return podman.container_name(exp.name, node)


def held(exp: Experiment) -> dict[str, str]:
    """node -> instance id of every machine of the experiment that stands for an instance."""
    proc = podman.run(
        "ps", "-a",
        "--filter", f"label={podman.EXPERIMENT_LABEL}={exp.name}",
        "--filter", f"label={INSTANCE_LABEL}",
        "--format", "json",
    )  # fmt: skip
    found: dict[str, str] = {}
    for entry in json.loads(proc.stdout or "[]") or []:
        labels = entry.get("Labels") or {}
        if labels.get(INSTANCE_LABEL) and labels.get(podman.NODE_LABEL):
            found[str(labels[podman.NODE_LABEL])] = str(labels[INSTANCE_LABEL])
    return found


def create(exp: Experiment, spec: Spec, image_ref: str) -> None:
    """Start the machine from ``image_ref`` and wire it on the LAN; raises ``NoMachines`` when
    the testbed has none free (before anything is made), ``TestbedError`` otherwise."""
    name = container(exp, spec.node)
    if podman.inspect(name) is not None:
        raise TestbedError(f"node {spec.node}: container {name} exists already")
    args = [
        "run", "--detach",
        "--name", name,
        "--hostname", spec.node,
        "--label", f"{podman.EXPERIMENT_LABEL}={exp.name}",
        "--label", f"{podman.NODE_LABEL}={spec.node}",
        "--label", f"{INSTANCE_LABEL}={spec.instance_id}",
        *capacity.label_args(),
        *privileges.container_args(),
        *privileges.cgroup_args(name),
        "--no-hosts",
        "--network", "none",
        # As every machine of the testbed: the user data finds the shares mounted and mounts
        # nothing, as it would mount them over NFS on EC2.
        *fileserver.client_mounts(exp),
    ]  # fmt: skip
    with capacity.reserved(exp.name, [spec.node]):
        podman.run(*args, image_ref, "/sbin/init")
    try:
        info = podman.inspect(name)
        if info is None or not info["State"]["Running"]:
            raise TestbedError(f"node {spec.node}: container {name} did not start")
        # Named by its address: an instance that gets an address again gets the same MAC, so
        # the nodes' ARP caches stay right.
        wire = network.Wire(
            spec.node, f"fake-ec2:{spec.address}", spec.lan_index, "eth0", spec.address,
            spec.prefixlen,
        )  # fmt: skip
        network.attach(exp.name, wire, int(info["State"]["Pid"]))
        write(exp, spec.node, "/etc/hosts", f"{etc_hosts.BASE}{spec.address}\t{spec.node}\n")
    except BaseException:
        remove(exp, spec.node)
        raise


def remove(exp: Experiment, node: str) -> bool:
    """Remove the machine and its disk; only a machine that stands for an instance (never a
    node of the experiment). False if there was none."""
    name = container(exp, node)
    info = podman.inspect(name)
    if info is None or not (info.get("Config", {}).get("Labels") or {}).get(INSTANCE_LABEL):
        return False
    podman.run("rm", "--force", "--time", "0", name, check=False)
    privileges.release_cgroup(name)
    return True


def write(exp: Experiment, node: str, path: str, content: str, mode: str = "644") -> None:
    """A file on the machine, written whole (through stdin: never on a command line)."""
    target = shlex.quote(path)
    script = (
        f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0] or '/')} && cat > {target}.tmp && "
        f"chmod {mode} {target}.tmp && mv {target}.tmp {target}"
    )
    podman.run("exec", "-i", container(exp, node), "sh", "-c", script, input=content.encode())


def write_metadata(exp: Experiment, node: str, entries: dict[str, str]) -> None:
    """The files the machine's metadata service (``start_imds``) serves, each one key's value.
    Without a newline: the service gives a file's bytes as they are, and EC2's values end
    with none."""
    for key, value in entries.items():
        write(exp, node, f"{METADATA_DIR}/{key}", value)


def start_imds(exp: Experiment, node: str) -> None:
    """Serve the metadata files over HTTP at 169.254.169.254 inside the machine (IMDSv2), where
    the user data and the instance's programs ask EC2's metadata service; returns once it
    answers a token request from inside, ``TestbedError`` naming the node if it never does."""
    name = container(exp, node)
    info = podman.inspect(name)
    if info is None or not info["State"]["Running"]:
        raise TestbedError(f"node {node}: container {name} is not running")
    pid = int(info["State"]["Pid"])
    # The service's address is the machine's own, on its loopback, as EC2 answers it from the
    # instance's host: no other machine of the LAN reaches it. The host sets it, since the
    # machine holds no NET_ADMIN; replace, not add, so a second start finds it done.
    network.nsenter(pid, "ip", "link", "set", "lo", "up")
    network.nsenter(pid, "ip", "addr", "replace", f"{imds.ADDRESS}/32", "dev", "lo")
    write(exp, node, IMDS_PROGRAM, Path(imds.__file__).read_text())
    # As root, which holds NET_BIND_SERVICE (``privileges``) for port 80; -I: the program
    # imports only the standard library, whatever the machine's environment says.
    podman.run(
        "exec", name,
        "systemd-run", "--unit", IMDS_UNIT, "--collect",
        "--property", "Restart=on-failure",
        "/usr/bin/python3", "-I", IMDS_PROGRAM,
    )  # fmt: skip
    deadline = time.monotonic() + IMDS_WAIT_S
    while True:
        try:
            probe = subprocess.run(
                ["podman", "exec", name, "/usr/bin/python3", "-I", "-c", IMDS_PROBE],
                env=podman.env(), capture_output=True, text=True, check=False, timeout=5,
            )  # fmt: skip
            if probe.returncode == 0:
                return
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    journal = podman.run(
        "exec", name, "journalctl", "--unit", IMDS_UNIT, "--lines", "5", "--no-pager",
        check=False,
    ).stdout.strip()  # fmt: skip
    raise TestbedError(
        f"node {node}: the metadata service did not answer at {imds.ADDRESS}:{imds.PORT} "
        f"within {IMDS_WAIT_S:.0f} s" + (f" ({journal})" if journal else "")
    )


def wait_booted(exp: Experiment, node: str) -> None:
    """Until systemd has finished booting the machine (cloud-init's last stage runs then)."""
    proc = subprocess.run(
        ["podman", "exec", container(exp, node), "timeout", str(BOOT_WAIT_S),
         "systemctl", "is-system-running", "--wait"],
        env=podman.env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    state = proc.stdout.strip()
    if state not in ("running", "degraded"):
        raise TestbedError(
            f"node {node}: the machine did not finish booting within {BOOT_WAIT_S} s "
            f"(systemd: {state or proc.stderr.strip()})"
        )


def run_user_data(exp: Experiment, node: str, user_data: bytes) -> bool:
    """Start the user data as root, detached, logging to cloud-init's log, as cloud-init's
    final stage runs a script; False (and a line in that log) when it is no script."""
    if not user_data.startswith(b"#!"):
        write(exp, node, USER_DATA_LOG, "FAKE EC2: the user data is not a script (#!...): "
              "only scripts are run, not cloud-config\n")  # fmt: skip
        return False
    write(exp, node, USER_DATA_PATH, user_data.decode(errors="replace"), mode="700")
    final = f"{USER_DATA_PATH}; echo $? > {BOOT_FINISHED}"
    podman.run(
        "exec", container(exp, node),
        "systemd-run", "--unit", "ptc-fake-cloud-final", "--no-block", "--collect",
        "--property", f"StandardOutput=append:{USER_DATA_LOG}",
        "--property", f"StandardError=append:{USER_DATA_LOG}",
        "/bin/sh", "-c", final,
    )  # fmt: skip
    return True
