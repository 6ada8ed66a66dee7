"""What a node container is granted on the host (its podman security arguments).

A node is not ``--privileged``: root on a node must not be root on the host. It runs with
podman's default seccomp filter, the host's devices hidden (only podman's pseudo-devices:
null, zero, tty, pts ...), /proc and /sys read-only and masked as podman masks them, and
these capabilities only, each for a named need (the reasons are explained to users, with what a
node still can do, in docs/security.md, "Node isolation on the local testbed"):
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import Any

from elastic import node_paths

CAPABILITIES: dict[str, str] = {
    "CHOWN": "apt and the roles give files to their owners (munge key, Slurm spool, MariaDB)",
    "DAC_OVERRIDE": "root reads and writes any file of its own node, as on a real node",
    "FOWNER": "root changes modes and times of files it does not own (roles, dpkg)",
    "FSETID": "setuid and setgid bits survive dpkg's chown of package files",
    "KILL": "systemd, slurmd and scancel signal other users' processes",
    "SETUID": "sshd, su, munged, slurmstepd and services run as their users",
    "SETGID": "the same for groups",
    "SETPCAP": "systemd bounds the capabilities of its services",
    "NET_BIND_SERVICE": "sshd (22) and the services the roles run (rpcbind's 111) bind low ports",
    "NET_RAW": "ping across the experiment's LAN (link checks, users)",
    "SYS_CHROOT": "sshd's privilege separation",
    "AUDIT_WRITE": "sshd and PAM record logins",
    "SETFCAP": "dpkg sets file capabilities of packages the roles install",
    "SYS_NICE": "slurmstepd binds job tasks to their cores (task/affinity)",
    "SYS_PTRACE": "root inspects any process of its node (/proc/PID/environ, gdb, strace)",
}

# Slurm's cgroup plugins write these v1 controllers (proctrack/cgroup: freezer; task/cgroup:
# cpuset, memory; jobacct_gather/cgroup: cpuacct, memory). podman mounts a non-privileged
# container's controllers read-only, so each node gets a cgroup of its own on the host, named
# by a digest (its name would tell other nodes about other experiments), and sees exactly
# that one read-write, nothing above or beside it.
CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_CONTROLLERS = ("cpuset", "cpuacct", "memory", "freezer")
CGROUP_PARENT = "ptc-nodes"


# No node holds DAC_READ_SEARCH: with it, root could open any file of a host filesystem it has a
# mount of by its handle (open_by_handle_at), reading past the mount's directory. The NFS server
# that needs it runs beside the nodes (``fileserver``).


def container_args() -> list[str]:
    """The grants a node container starts with (no host devices, no extra options)."""
    return ["--cap-drop", "all", "--cap-add", ",".join(CAPABILITIES)]


def hybrid_cgroups() -> bool:
    """Whether the host has cgroup v1 controllers (this one: hybrid, v1 plus a named
    systemd hierarchy), as opposed to the unified v2 hierarchy only."""
    return (CGROUP_V1 / "systemd" / "cgroup.procs").is_file()


def node_cgroup(container: str) -> str:
    digest = hashlib.sha256(container.encode()).hexdigest()[:16]
    return f"/{CGROUP_PARENT}/{digest}"


def cgroup_args(container: str) -> list[str]:
    """systemd as PID 1, and the node's own cgroup, created on the host, shown read-write.

    On a cgroup v2 host, podman's systemd mode with a private cgroup namespace already gives
    the node its own subtree read-write."""
    if not hybrid_cgroups():
        return ["--systemd=always", "--cgroupns=private"]
    # systemd=always also mounts the host's named systemd hierarchy (no controllers): systemd
    # tracks services there by the host's paths, which a private cgroup namespace would change.
    args = ["--systemd=always", "--cgroup-parent", node_cgroup(container)]
    for controller in CGROUP_CONTROLLERS:
        host = CGROUP_V1 / controller / node_cgroup(container).lstrip("/")
        host.mkdir(parents=True, exist_ok=True)
        args += ["--volume", f"{host}:{CGROUP_V1 / controller}:rw"]
    return args


def release_cgroup(container: str) -> None:
    """Remove a removed node's cgroups from the host (deepest first; empty by now)."""
    if not hybrid_cgroups():
        return
    # runc made the node's cgroup in every hierarchy, not only in the ones the node writes.
    for hierarchy in sorted(CGROUP_V1.iterdir()):
        top = hierarchy / node_cgroup(container).lstrip("/")
        if not top.is_dir():
            continue
        for root, _dirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
            # A cgroup still holding a process stays; the next removal retries it.
            with contextlib.suppress(OSError):
                os.rmdir(root)


def repository_args(repository: Path, state: list[Path]) -> list[str]:
    """The checkout at ``node_paths.REPOSITORY``: read-only, without the mounts beneath it (an
    experiment's share is one when ptc's state lives in ./state: a recursive bind would show it,
    writable, in every node of every experiment), and with ptc's state masked."""
    volume = ["--volume", f"{repository}:{node_paths.REPOSITORY}:ro,bind"]
    return volume + repository_masks(repository, state)


def repository_masks(repository: Path, state: list[Path]) -> list[str]:
    """Hide ptc's own state from a node when it lives inside the repository the node sees at
    ``node_paths.REPOSITORY`` (the Makefile's ./state, PTC_HOME=$PWD/state, the image cache): other
    experiments' keys and credentials are there. Only the outermost of nested directories is
    covered (a mount point inside a covered one would show its name), and only existing ones
    (the repository is mounted read-only: no mount point can be made in it)."""
    root = repository.resolve()
    inside = set()
    for path in state:
        resolved = path.resolve()
        if resolved != root and resolved.is_relative_to(root) and resolved.is_dir():
            inside.add(resolved.relative_to(root))
    outer = sorted(d for d in inside if not any(d != o and d.is_relative_to(o) for o in inside))
    return [
        arg
        for d in outer
        for arg in ("--tmpfs", f"{node_paths.REPOSITORY}/{d}:ro,size=4k,mode=0555,notmpcopyup")
    ]


def mask_targets(container: dict[str, Any]) -> list[Path]:
    """The host directories under the repository that a created container's masks cover
    (from its ``podman inspect``). runc makes a tmpfs's mount point at every start, and it
    cannot in the read-only repository: when one of these directories is removed after the
    container was created (a ``rm -rf state``), the container no longer starts until it exists
    again. Recreating it empty shows the node nothing."""
    source = next(
        (
            Path(m["Source"])
            for m in container.get("Mounts") or []
            if m.get("Destination") == node_paths.REPOSITORY
        ),
        None,
    )
    if source is None:
        return []
    tmpfs: dict[str, str] = (container.get("HostConfig") or {}).get("Tmpfs") or {}
    mount = PurePosixPath(node_paths.REPOSITORY)
    inside = [PurePosixPath(p).relative_to(mount) for p in sorted(tmpfs) if _under(p, mount)]
    return [source / d for d in inside if d.parts and ".." not in d.parts]


def _under(point: str, mount: PurePosixPath) -> bool:
    return PurePosixPath(point).is_relative_to(mount)
