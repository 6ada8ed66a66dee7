"""A local testbed node is a container, not root on the host: it cannot see or touch the host's
devices, other experiments, or the host's ptc state beyond the mounts the testbed gives it.

Local testbed only (on CloudLab a node is the whole machine). These checks run on the host
that runs the testbed, so they compare what the node sees with the host's own view. Each
fails on a ``--privileged`` node: they hold the testbed to what docs/security.md, "Node isolation
on the local testbed", promises users.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from conftest import name_of, variables
from testinfra.host import Host

from elastic import node_paths
from elastic.cluster_groups import SLURM_CONTROLLER
from elastic.testbed.backends.local import control, fileserver

# Capabilities (bit numbers, linux/capability.h) that would undo the isolation below.
FORBIDDEN_CAPS = {
    "CAP_MKNOD": 27,  # make device nodes
    "CAP_NET_ADMIN": 12,  # re-wire the node's network
    "CAP_SYS_MODULE": 16,  # load kernel modules
    "CAP_SYS_RAWIO": 17,  # raw I/O ports and memory
    "CAP_SYS_ADMIN": 21,  # mount, setns, and most of the rest
    "CAP_SYS_BOOT": 22,  # reboot the host's kernel
    "CAP_SYS_TIME": 25,  # set the host's clock
}
# The character devices podman gives every container; none is a host device.
POD_DEVICES = {"null", "zero", "full", "random", "urandom", "tty", "console", "ptmx"}
# Where the testbed mounts host directories into a node, on purpose: the mounts users are told
# of (docs/local-testbed.md, "What an experiment is made of"; the control service's in
# docs/node-operations.md). Written out here rather than
# taken from the backend, so that a mount added there fails this check until it is reviewed
# and documented. podman's own bind mounts (hostname, resolv.conf, .containerenv) come from its
# storage. A blockstore's mount point is whatever the profile names, from the node's own
# directory.
DOCUMENTED_MOUNTS = {
    "/local/repository",
    "/var/lib/ptc-geni",
    "/ptc-testbed/shared",
    "/home",
    "/opt/ptc",
    "/run/ptc-testbed",
}
PODMAN_FILES = {"/etc/hostname", "/etc/resolv.conf", "/etc/hosts", "/run/.containerenv"}
REPOSITORY = Path(__file__).resolve().parents[2]


def require_local(host: Host) -> None:
    if variables(host).get("ptc_testbed") != "local":
        pytest.skip(f"{name_of(host)} is not in local (a CloudLab node is the whole machine)")


def experiment_dir(request: pytest.FixtureRequest) -> Path:
    """The experiment's directory on the host: its inventory is <dir>/inventory/hosts.yml."""
    return Path(request.config.option.ansible_inventory).resolve().parent.parent


def capabilities(host: Host) -> int:
    """The bounding set of the node's init: nothing on the node can gain more than this."""
    out = host.run("grep '^CapBnd:' /proc/1/status")
    assert out.rc == 0, f"{name_of(host)}: cannot read /proc/1/status: {out.stderr.strip()}"
    return int(out.stdout.split()[1], 16)


def assert_lacks(host: Host, *caps: str) -> None:
    bounding = capabilities(host)
    held = [c for c in caps if bounding & (1 << FORBIDDEN_CAPS[c])]
    assert not held, f"{name_of(host)}: the node's bounding set holds {', '.join(held)}"


def mounts(host: Host) -> list[tuple[str, str, str, str]]:
    """(source root, mount point, options, filesystem type) of each mount the node sees."""
    out = host.run("cat /proc/self/mountinfo")
    assert out.rc == 0, f"{name_of(host)}: cannot read mountinfo: {out.stderr.strip()}"
    rows = []
    for line in out.stdout.splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        rows.append((fields[3], fields[4], fields[5], fstype))
    return rows


CAP_DAC_READ_SEARCH = 2  # open_by_handle_at: read a host filesystem past a mount of it


def test_no_node_may_open_host_files_by_handle(host: Host) -> None:
    """open_by_handle_at reads past a mount to the rest of its filesystem: NFS-Ganesha, which
    needs it, runs in the experiment's file server, not on a node."""
    require_local(host)
    held = bool(capabilities(host) & (1 << CAP_DAC_READ_SEARCH))
    assert not held, f"{name_of(host)}: holds CAP_DAC_READ_SEARCH"


def test_the_shares_are_a_filesystem_of_their_own(host: Host) -> None:
    """The file server opens handles anywhere on its exports' filesystem, whatever a client
    sends: that filesystem must hold the experiment's shares only, not the host's files."""
    require_local(host)
    me = name_of(host)
    out = host.run(f"stat -L -c '%d %n' {fileserver.SHARED_MOUNT} /home {node_paths.REPOSITORY}")
    assert out.rc == 0, f"{me}: cannot stat the shares: {out.stderr.strip()}"
    device = {name: dev for dev, name in (line.split(" ", 1) for line in out.stdout.splitlines())}
    assert device["/home"] == device[fileserver.SHARED_MOUNT], (
        f"{me}: /home is not on the experiment's share filesystem"
    )
    assert device[fileserver.SHARED_MOUNT] != device[node_paths.REPOSITORY], (
        f"{me}: the shares are on the host's filesystem (the one the repository is on)"
    )


# Run as root on the node: for each file given, on a filesystem of the host (ext2/3/4, whose root
# directory is inode 2, generation 0), ask for the root directory by handle
# (open_by_handle_at, the "shocker" escape), with the file as the mount reference. Prints one line
# per file: "ESCAPED <file> <entries>", "refused <file> <errno>" or "unchecked <file> <why>".
SHOCKER = r"""
import ctypes, ctypes.util, errno, os, struct, sys
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint), ("type", ctypes.c_int), ("f", ctypes.c_ubyte * 128)]
def err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
for path in sys.argv[1:]:
    own, mount_id = Handle(128), ctypes.c_int()
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(own), ctypes.byref(mount_id), 0):
        print("unchecked", path, "no-handle-" + err()); continue
    if own.type != 1:
        print("unchecked", path, "handle-type-%d" % own.type); continue
    root = Handle(8, 1)
    for i, b in enumerate(struct.pack("<II", 2, 0)):
        root.f[i] = b
    ref = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    got = libc.open_by_handle_at(ref, ctypes.byref(root), os.O_RDONLY | os.O_DIRECTORY)
    os.close(ref)
    if got < 0:
        print("refused", path, err()); continue
    print("ESCAPED", path, ",".join(sorted(os.listdir("/proc/self/fd/%d" % got))[:6]))
"""
HOST_FILESYSTEMS = {"ext2", "ext3", "ext4"}


def test_root_on_the_node_cannot_open_the_host_filesystem_by_handle(host: Host) -> None:
    """The open_by_handle_at escape, tried for real from root on the node through every mount of
    a host filesystem it has (the repository, its shares, podman's files): reading the host's
    root directory must be refused. A node holding CAP_DAC_READ_SEARCH would succeed
    (docs/security.md, "Node isolation on the local testbed")."""
    require_local(host)
    me = name_of(host)
    reachable = sorted(
        point for _root, point, _options, fstype in mounts(host) if fstype in HOST_FILESYSTEMS
    )
    if not reachable:
        pytest.skip(f"{me}: no mount of an ext2/3/4 filesystem, the only ones the probe knows")
    out = host.run(f"python3 -c {shlex.quote(SHOCKER)} {' '.join(map(shlex.quote, reachable))}")
    assert out.rc == 0, f"{me}: the escape probe did not run: {out.stderr.strip()}"
    lines = [line.split(" ", 2) for line in out.stdout.splitlines()]
    tried = [line for line in lines if line[0] in ("ESCAPED", "refused")]
    if not tried:
        pytest.skip(f"{me}: no mount gave a handle to try: {out.stdout.strip()}")
    escaped = [f"{path} (host root: {seen})" for word, path, seen in lines if word == "ESCAPED"]
    assert not escaped, f"{me}: root on the node read the host's root by handle: {escaped}"


def test_only_the_controller_holds_the_control_credential(host: Host) -> None:
    """The testbed's control service powers the experiment's nodes: only the node whose Slurm
    client asks it (the controller) gets its socket and credential."""
    require_local(host)
    controller = SLURM_CONTROLLER in variables(host).get("group_names", [])
    out = host.run(f"test -e {control.CREDENTIAL} || test -e {control.SOCKET}")
    held = out.rc == 0
    assert held == controller, (
        f"{name_of(host)}: the control service's credential is "
        f"{'mounted' if held else 'missing'} on {'the' if controller else 'a non-'}controller"
    )


def test_node_sees_no_host_devices(host: Host) -> None:
    require_local(host)
    me = name_of(host)
    blocks = host.run("find /dev -xdev -type b").stdout.split()
    assert not blocks, f"{me}: host block devices are visible in /dev: {', '.join(blocks)}"
    chars = host.run("find /dev -xdev -type c -not -path '/dev/pts/*'").stdout.split()
    foreign = sorted(c for c in chars if os.path.basename(c) not in POD_DEVICES)
    assert not foreign, f"{me}: host character devices are visible in /dev: {', '.join(foreign)}"
    assert_lacks(host, "CAP_SYS_RAWIO", "CAP_MKNOD")


def test_node_cannot_make_a_block_device(host: Host) -> None:
    require_local(host)
    # The host's first disk, as the kernel lists it (major, minor of /proc/partitions' first
    # row); the probe is removed whatever happens.
    probe = "/tmp/.ptc-isolation-blk"
    out = host.run(
        "set -- $(awk 'NR > 2 {print $1, $2; exit}' /proc/partitions); "
        f"mknod {probe} b ${{1:-8}} ${{2:-0}}; rc=$?; rm -f {probe}; exit $rc"
    )
    assert out.rc != 0, f"{name_of(host)}: root on the node made a block device of the host's disk"


def test_node_cannot_mount_proc_or_sysfs(host: Host) -> None:
    """A fresh proc or sysfs would undo podman's read-only and masked views of the host's
    kernel (/proc/sys, /sys/firmware, /sys/dev/block)."""
    require_local(host)
    me = name_of(host)
    for fstype in ("proc", "sysfs"):
        out = host.run(
            "d=$(mktemp -d) && "
            f"if mount -t {fstype} {fstype} $d; then umount $d; rmdir $d; exit 0; fi; rmdir $d; exit 1"
        )
        assert out.rc != 0, f"{me}: root on the node mounted a new {fstype}"
    writable = [
        point
        for _root, point, options, _fs in mounts(host)
        if point in ("/sys", "/proc/sys") and "rw" in options.split(",")
    ]
    assert not writable, f"{me}: {', '.join(writable)} is mounted read-write"
    assert_lacks(host, "CAP_SYS_ADMIN")


def test_node_cannot_load_kernel_modules(host: Host) -> None:
    require_local(host)
    assert_lacks(host, "CAP_SYS_MODULE", "CAP_SYS_BOOT", "CAP_SYS_TIME")


def test_node_sees_only_its_own_processes_and_network(host: Host) -> None:
    """Its own PID namespace (systemd is PID 1, no host or other experiments' processes) and
    its own network namespace (no host interface), and no capability to leave or re-wire
    either."""
    require_local(host)
    me = name_of(host)
    init = host.run("cat /proc/1/comm").stdout.strip()
    assert init == "systemd", f"{me}: PID 1 is {init!r}, not the node's own systemd"
    commands = set(host.run("ps -e -o comm=").stdout.split())
    host_side = commands & {"conmon", "podman", "runc", "ptc-linkemu", "linkemu.py"}
    assert not host_side, f"{me}: host processes are visible: {', '.join(sorted(host_side))}"
    own = set(host.run("ls /sys/class/net").stdout.split())
    host_only = {n for n in os.listdir("/sys/class/net") if n != "lo" and not n.startswith("eth")}
    leaked = sorted(own & host_only)
    assert not leaked, f"{me}: host network interfaces are visible: {', '.join(leaked)}"
    assert_lacks(host, "CAP_NET_ADMIN", "CAP_SYS_ADMIN")


def test_node_sees_no_host_state_beyond_its_mounts(
    host: Host, request: pytest.FixtureRequest
) -> None:
    """Every host directory the node sees is one the testbed documents, from this
    experiment's own directory (none of another experiment's, none of its own keys and
    inventory), and ptc's state is not visible through the repository mount."""
    require_local(host)
    me = name_of(host)
    exp = experiment_dir(request)
    own = [exp / "shared", exp / "control", exp / "nodes" / me]
    for root, point, _options, fstype in mounts(host):
        if fstype in ("proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "overlay"):
            continue
        if point in PODMAN_FILES:
            continue
        path = Path(root)
        if path.is_relative_to(exp.parent):
            assert any(path.is_relative_to(p) for p in own), (
                f"{me}: {point} shows {root} of the host, outside this node's own share of "
                f"its experiment"
            )
        elif point != "/local/repository":
            assert point in DOCUMENTED_MOUNTS, f"{me}: {point} shows {root} of the host"
    if exp.parent.is_relative_to(REPOSITORY):
        inside = "/local/repository/" + str(exp.parent.relative_to(REPOSITORY))
        out = host.run(f"ls -A {shlex.quote(inside)} 2>/dev/null")
        assert not out.stdout.strip(), (
            f"{me}: ptc's experiments are visible through the repository at {inside}"
        )
    assert_lacks(host, "CAP_SYS_ADMIN")
