"""The experiment's file server: NFS-Ganesha in a container of its own beside the nodes, serving
the experiment's shares from a filesystem of their own.

On CloudLab the head's kernel serves NFS. Here the kernel serves none, and NFS-Ganesha's VFS
backend reopens every file it serves by its handle (``open_by_handle_at``), which needs
DAC_READ_SEARCH in the host's user namespace. Whoever holds that capability can open any file
of any filesystem it has a mount of, reading past the mount's directory to the filesystem's
root; every node has mounts of the host's filesystem (the checkout, podman's hosts and hostname
files), so no node may hold it. The file server holds it instead: nobody logs in to it, and it
runs nothing but Ganesha.

The shares live on a filesystem of their own, an ext4 image of the experiment loop-mounted on the
host (``nosuid,nodev``): Ganesha, like the kernel's server with ``no_subtree_check``, opens a
handle anywhere on the export's filesystem, so a client that crafts one could otherwise name any
file of the host's. On a filesystem of its own it names at most the experiment's own shares.

The server listens on an address of its own on the LAN of the experiment's NFS server node (the
highest free one of that subnet), named ``HOSTNAME`` in every node's /etc/hosts; it lives in
the experiment's network namespace, so it keeps serving while the head is powered off or reloaded.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from elastic import cluster_groups, node_paths
from elastic.errors import TestbedError
from elastic.profile import rspec
from elastic.profile.topology import Topology
from elastic.testbed import groups
from elastic.testbed.backends.local import image, network, podman
from elastic.testbed.experiment import Experiment

# Where every node sees the whole share filesystem, and where each share is mounted on nodes
# (and on the server, whose export paths are the same).
SHARED_MOUNT = "/ptc-testbed/shared"
SHARES = {"home": "/home", "opt-ptc": node_paths.SHARED_SOFTWARE}

# The name nodes reach the server by: it has a dot, so no node's client_id can take it.
HOSTNAME = "nfs.ptc-testbed"
NFS_PORT = 2049

# Sparse: the image takes the host's disk only as files are written (tens of MB at first: the
# journal and metadata).
IMAGE_SIZE = "16G"
IMAGE_NAME = "shared.ext4"
START_TIMEOUT = 30.0

# What Ganesha needs, each for a named reason; nothing else (no mount, no network admin).
CAPABILITIES: dict[str, str] = {
    "DAC_READ_SEARCH": "the VFS backend reopens exported files by handle",
    "DAC_OVERRIDE": "the server reads and writes any file of the shares for their owners",
    "CHOWN": "a file a client creates gets that client's owner",
    "FOWNER": "clients change modes and times of files they own",
    "FSETID": "a client's setgid directories keep their bit",
    "SETUID": "each request runs with the client's (squashed) user",
    "SETGID": "the same for its groups",
    "NET_BIND_SERVICE": "NFS listens on port 2049",
}

# The container runs no init: this writes the configuration the testbed passes in, and runs
# Ganesha in the foreground (its log is the container's).
_ENTRYPOINT = (
    'mkdir -p /run/ganesha /var/lib/nfs/ganesha && printf "%s\\n" "$PTC_GANESHA_CONF" '
    "> /etc/ganesha/ganesha.conf && exec /usr/bin/ganesha.nfsd -F -L STDERR "
    "-f /etc/ganesha/ganesha.conf -p /run/ganesha/ganesha.pid"
)


@dataclass(frozen=True)
class Address:
    """Where the server listens: an address of its own on one of the experiment's LANs."""

    lan_index: int
    address: str
    prefixlen: int

    @property
    def subnet(self) -> str:
        return str(ipaddress.IPv4Interface(f"{self.address}/{self.prefixlen}").network)


def container_name(experiment: str) -> str:
    # A dot: no node's container (ptc-<experiment>-<client_id>) can have this name.
    return f"ptc-{experiment}.fileserver"


def address(manifest: Topology, wires: list[network.Wire]) -> Address | None:
    """The server's address: on the first addressed LAN of the experiment's NFS server node,
    the highest host address no node holds. None when no node serves NFS on a LAN."""
    servers = {
        n.client_id for n in manifest.nodes if cluster_groups.NFS_SERVER in groups.node_groups(n)
    }
    wire = next((w for w in wires if w.node in servers and w.address and w.prefixlen), None)
    if wire is None or wire.address is None or wire.prefixlen is None:
        return None
    subnet = ipaddress.IPv4Interface(f"{wire.address}/{wire.prefixlen}").network
    taken = {
        ipaddress.IPv4Address(w.address)
        for w in wires
        if w.address and w.lan_index == wire.lan_index
    }
    candidate = subnet.broadcast_address - 1
    while candidate > subnet.network_address:
        if candidate not in taken:
            return Address(wire.lan_index, str(candidate), wire.prefixlen)
        candidate -= 1
    raise TestbedError(
        f"LAN {manifest.links[wire.lan_index].client_id}: no address of {subnet} is left for "
        "the experiment's file server; give the LAN a larger netmask"
    )


def ganesha_config(clients: str) -> str:
    """Ganesha's configuration: every share over NFSv4, read-write for ``clients`` (the LAN's
    subnet), root squashed, nobody else."""
    exports = "".join(
        f"""
EXPORT {{
    Export_Id = {index};
    Path = {path};
    Pseudo = {path};
    Protocols = 4;
    Transports = TCP;
    SecType = sys;
    Squash = Root_Squash;
    Access_Type = None;
    FSAL {{
        Name = VFS;
    }}
    CLIENT {{
        Clients = {clients};
        Access_Type = RW;
    }}
}}
"""
        for index, path in enumerate(SHARES.values(), start=1)
    )
    return (
        "NFS_CORE_PARAM {\n    Protocols = 4;\n    Enable_NLM = false;\n"
        "    Enable_RQUOTA = false;\n}\n\n"
        "NFSV4 {\n    # Nothing to recover on a fresh server: serve at once.\n"
        "    Graceless = true;\n}\n" + exports
    )


def client_mounts(exp: Experiment) -> list[str]:
    """``podman run`` arguments that give a machine the shares where the roles expect them:
    the stand-in for the kernel NFS mount a container cannot make (a machine holds no
    capability to mount: docs/security.md, "Node isolation on the local testbed")."""
    args = []
    for share, mount in SHARES.items():
        args += ["--volume", f"{exp.shared_dir / share}:{mount}:nodev,nosuid"]
    return args


def container_args(exp: Experiment, at: Address) -> list[str]:
    """``podman run`` arguments of the server (before the image): its grants, the shares as
    its only mounts of a filesystem of the host, the experiment's network namespace."""
    args = [
        "run", "--detach",
        "--name", container_name(exp.name),
        "--label", f"{podman.EXPERIMENT_LABEL}={exp.name}",
        "--hostname", HOSTNAME.split(".")[0],
        "--cap-drop", "all", "--cap-add", ",".join(CAPABILITIES),
        "--no-hosts",
        "--network", f"ns:/run/netns/{network.namespace(exp.name)}",
        "--env", f"PTC_GANESHA_CONF={ganesha_config(at.subnet)}",
    ]  # fmt: skip
    return args + client_mounts(exp)


# -- the share filesystem -------------------------------------------------------------------


def image_path(exp: Experiment) -> Path:
    return exp.dir / IMAGE_NAME


def prepare(exp: Experiment) -> None:
    """The share filesystem mounted at the experiment's shared directory, with a directory per
    share: made at the first call, mounted again after a host restart, nothing when mounted.

    Nodes bind-mount that directory, so this comes before any node starts."""
    shared = exp.shared_dir
    shared.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(shared):
        img = image_path(exp)
        if not img.exists():
            if any(shared.iterdir()):
                raise TestbedError(
                    f"experiment {exp.name}: {shared} holds files but is no filesystem of its "
                    "own: the experiment was made before its shares had one; copy out what "
                    f"you need, then `ptc down {exp.name}` and `ptc up` it again"
                )
            _make_image(img)
        _run(["mount", "-o", "loop,nosuid,nodev", str(img), str(shared)], f"mount {img}")
    for share in SHARES:
        (shared / share).mkdir(exist_ok=True)


def _make_image(img: Path) -> None:
    partial = img.with_name(img.name + ".partial")
    partial.unlink(missing_ok=True)
    _run(["truncate", "--size", IMAGE_SIZE, str(partial)], f"create {partial}")
    # No blocks reserved for root (every file here is the users'); a small journal.
    _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-J", "size=32", str(partial)], f"mkfs {partial}")
    partial.rename(img)  # only a whole filesystem is ever mounted


def release(exp: Experiment) -> None:
    """Unmount the share filesystem (its nodes and server are gone); lazily if still busy."""
    shared = exp.shared_dir
    if not os.path.ismount(shared):
        return
    proc = subprocess.run(["umount", str(shared)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        _run(["umount", "--lazy", str(shared)], f"unmount {shared}")


# -- the server -----------------------------------------------------------------------------


def start(exp: Experiment) -> Address | None:
    """Run the experiment's server if it does not run; its address (None: nothing to serve)."""
    manifest = rspec.parse_manifest(exp.manifest())
    at = address(manifest, network.plan(manifest))
    if at is None:
        return None
    prepare(exp)
    ns = network.namespace(exp.name)
    bridge = f"lan{at.lan_index}"
    cidr = f"{at.address}/{at.prefixlen}"
    # A bridge takes the lowest MAC address of its ports unless given one: every pool node that
    # powers off or on would change it, and the nodes would send to the old one until their ARP
    # entries expire (seconds without NFS). Given one, it keeps it.
    network.ip("-n", ns, "link", "set", bridge, "address", network.mac(exp.name, f"{bridge}:nfs"))
    shown = subprocess.run(["ip", "-n", ns, "-o", "addr", "show", "dev", bridge],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if f" {cidr} " not in shown.stdout:
        network.ip("-n", ns, "addr", "add", cidr, "dev", bridge)
    name = container_name(exp.name)
    info = podman.inspect(name)
    if info is not None and info["State"]["Running"]:
        return at
    if info is not None:
        podman.run("rm", "--force", "--time", "0", name, check=False)
    ref = image.ensure(kind=image.PREPARED)  # the roles' packages: Ganesha is one of them
    podman.run(*container_args(exp, at), ref, "sh", "-c", _ENTRYPOINT)
    _wait_listening(exp, name)
    return at


def stop(exp: Experiment) -> None:
    """Remove the server (safe when none runs); the shares stay on their filesystem."""
    name = container_name(exp.name)
    if podman.inspect(name) is not None:
        podman.run("rm", "--force", "--time", "0", name, check=False)


def _wait_listening(exp: Experiment, name: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    ns = network.namespace(exp.name)
    while time.monotonic() < deadline:
        proc = subprocess.run(
            ["ip", "netns", "exec", ns, "ss", "-Htln", f"sport = :{NFS_PORT}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.stdout.strip():
            return
        info = podman.inspect(name)
        if info is None or not info["State"]["Running"]:
            break
        time.sleep(0.5)
    logs = podman.run("logs", "--tail", "5", name, check=False)
    raise TestbedError(
        f"experiment {exp.name}: its file server (NFS-Ganesha, container {name}) did not listen "
        f"on port {NFS_PORT}: {(logs.stderr or logs.stdout).strip()[-600:]}"
    )


def _run(cmd: list[str], what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except FileNotFoundError as err:
        raise TestbedError(
            f"the file server's shares: {what}: `{cmd[0]}` is not installed"
        ) from err
    if proc.returncode != 0:
        raise TestbedError(f"the file server's shares: {what} failed: {proc.stderr.strip()}")
