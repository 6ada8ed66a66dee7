"""Whether a deploy would change nothing: each node's record of what it was last deployed from.

A deploy that succeeded on every host of the inventory leaves on each node a root-only stamp:
a fingerprint of the run's inputs, and the services running when it ended. The inputs are
everything on the workstation the playbook reads: the playbook, the repository's roles,
plugins, playbooks, Ansible settings and the ``elastic`` package the nodes run, the
inventory with the group_vars and host_vars beside it, the extra variables, ansible-core's
version and the wheels the elastic role installs.

The next deploy of the same playbook skips Ansible when every node holds a stamp of the same
fingerprint and nothing on the node moved since:

- no file under the configuration Ansible writes (``WATCHED``: ``/etc``, ``/opt``, ``/usr/local``
  on the root filesystem) and no package (dpkg's status) changed after the stamp; the files a
  boot writes again (the resolver's, the hostname, ``/etc/hosts``) count as changed only when
  their contents differ from the stamp's, so a node that was powered off and on (an elastic
  pool's, all the time) is still up to date;
- every path a task of the run named (``managed``), in those trees or not (spool, log and state
  directories, the cluster user's home, build trees, a share's files), is still there, of the
  same type, mode and owner, and a file among them was not modified after the stamp;
- no service that ran at the stamp has stopped, and no unit failed that had not failed then.

Anything else runs the playbook, naming for each node why. Before a run the stamps are taken
away, so a run that fails half-way (or runs on some hosts only: ``--limit``) leaves no node
claiming the inputs it was not fully deployed from; only a run that succeeded on every host
records new ones. The check over-approximates change on purpose: a file a service rewrites
after the deploy means a full run, never a skipped one.

The stamp holds a hash of the extra variables, secret ones included; it lives root-only on
the nodes, which hold those secrets in the clear anyway, and never in a run directory.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from elastic import paths
from elastic.errors import RemoteTimeout
from elastic.remote import ssh

STAMP = "/var/lib/ptc/deployed.json"
# What a playbook writes, where a change by hand (or by a later playbook) must be seen.
WATCHED = ("/etc", "/opt", "/usr/local", "/var/lib/dpkg/status")
# Files every boot writes again (the container runtime, or DHCP and the init system on a real
# machine): compared by contents, not by time.
BOOT_FILES = ("/etc/resolv.conf", "/etc/hostname", "/etc/hosts")
# The repository's parts a playbook run reads (besides the playbook itself).
INPUT_DIRS = ("roles", "plugins", "inventories", "elastic")
INPUT_GLOBS = ("*.yml", "ansible.cfg", "pyproject.toml")
SKIPPED_PARTS = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache")
TIMEOUT_S = 60.0
MAX_PARALLEL = 16

# The node-side scripts' shared start: systemd's units in a state, as names (none when
# systemctl cannot answer).
_UNITS = r"""
import hashlib, json, os, stat, subprocess, sys

def signature(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid]

def digest(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return ""

def units(*args):
    try:
        out = subprocess.run(["systemctl", *args, "--no-legend", "--plain"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.split()[0] for line in out.splitlines() if line.strip()]
"""

# Runs on the node (python3, which Ansible needs there anyway), from standard input: the
# stamp, the first watched file newer than it (the stamp's boot files: whose contents differ
# from the stamp's) or managed path that moved, the units failed now but not at the stamp, the
# stamp's services that are not active. Arguments: the stamp's path, then the watched paths.
PROBE_SCRIPT = (
    _UNITS
    + r"""
def same_device(path, device):
    try:
        return os.lstat(path).st_dev == device
    except OSError:
        return False

def newer(paths, since, by_contents):
    for path, was in by_contents.items():
        if digest(path) != was:
            return path
    for top in paths:
        if top in by_contents:
            continue
        if os.path.isfile(top):
            if os.lstat(top).st_mtime > since:
                return top
            continue
        device = os.lstat(top).st_dev if os.path.isdir(top) else None
        for here, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if same_device(os.path.join(here, d), device)]
            for name in files:
                path = os.path.join(here, name)
                if path in by_contents:
                    continue
                try:
                    if os.lstat(path).st_mtime > since:
                        return path
                except OSError:
                    continue
    return ""

def moved(managed, since):
    for path, was in managed.items():
        now = signature(path)
        if now != was:
            return path
        if stat.S_ISREG(now[0]) and os.lstat(path).st_mtime > since:
            return path
    return ""

stamp_path, watched = sys.argv[1], sys.argv[2:]
try:
    with open(stamp_path) as f:
        stamp = json.load(f)
    since = os.stat(stamp_path).st_mtime
except (OSError, ValueError):
    print(json.dumps({"stamp": None}))
    sys.exit(0)
def listed(key):
    values = stamp.get(key, []) if isinstance(stamp, dict) else []
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []

contents = stamp.get("contents") if isinstance(stamp, dict) else None
contents = {
    k: v for k, v in (contents if isinstance(contents, dict) else {}).items()
    if isinstance(k, str) and isinstance(v, str)
}
managed = stamp.get("managed") if isinstance(stamp, dict) else None
managed = {
    k: v for k, v in (managed if isinstance(managed, dict) else {}).items()
    if isinstance(k, str) and isinstance(v, list)
}
active = set(units("list-units", "--type=service", "--state=active"))
print(json.dumps({
    "stamp": stamp,
    "newer": newer(watched, since, contents) or moved(managed, since),
    "failed": [u for u in units("list-units", "--state=failed") if u not in listed("failed")],
    "inactive": [s for s in listed("services") if s not in active],
}))
"""
)

# Writes the stamp atomically, root-only, with the services active, the units failed now, the
# digests of the boot files (the arguments after the stamp's path) and the signature of each
# managed path the record lists (one that is not there is not kept). The record's text is put
# into the script (standard input), not on a command line the node's users can read.
RECORD_SCRIPT = (
    _UNITS
    + r"""
import tempfile
stamp_path, record = sys.argv[1], json.loads(RECORD)
record["contents"] = {path: digest(path) for path in sys.argv[2:]}
record["managed"] = {
    path: kept for path in record.get("managed") or [] if (kept := signature(path))
}
record["services"] = units("list-units", "--type=service", "--state=active")
# a unit failed at the deploy's end (one the node's container cannot run) is the node's
# normal: only a unit failing after it is a change
record["failed"] = units("list-units", "--state=failed")
os.makedirs(os.path.dirname(stamp_path), mode=0o755, exist_ok=True)
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(stamp_path), prefix=".deployed-")
with os.fdopen(fd, "w") as f:
    json.dump(record, f)
    f.flush()
    os.fsync(f.fileno())
os.replace(tmp, stamp_path)
"""
)


def fingerprint(
    playbook: Path,
    inventory: Path,
    extravars: Mapping[str, Any],
    *,
    root: Path = paths.REPO_ROOT,
    wheels: Path | None = None,
) -> str:
    """The hash of a run's inputs (see the module's docstring)."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    add(
        "playbook",
        str(playbook.relative_to(root) if playbook.is_relative_to(root) else playbook).encode(),
    )
    add("playbook-text", playbook.read_bytes())
    for path in _input_files(root):
        add(str(path.relative_to(root)), path.read_bytes())
    add("inventory", inventory.read_bytes())
    # Ansible reads the group_vars and host_vars beside the inventory file too
    for kind in ("group_vars", "host_vars"):
        here = inventory.parent / kind
        for path in sorted(p for p in here.rglob("*") if p.is_file()) if here.is_dir() else []:
            add(f"inventory {path.relative_to(inventory.parent)}", path.read_bytes())
    add("extravars", json.dumps(extravars, sort_keys=True, default=str).encode())
    add("ansible-core", metadata.version("ansible-core").encode())
    if wheels is not None and wheels.is_dir():
        for wheel in sorted(wheels.glob("*.whl")):
            add(f"wheel {wheel.name}", str(wheel.stat().st_size).encode())
    return digest.hexdigest()


def _input_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for pattern in INPUT_GLOBS:
        found += [p for p in root.glob(pattern) if p.is_file()]
    for name in INPUT_DIRS:
        found += [
            p
            for p in (root / name).rglob("*")
            if p.is_file()
            and not any(part in SKIPPED_PARTS for part in p.parts)
            and p.suffix != ".pyc"
        ]
    return sorted(set(found))


def why_not_current(output: str, wanted: str, playbook: str) -> str:
    """From one node's probe output: why it is not up to date, or "" when it is."""
    try:
        facts = json.loads(output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "its deploy record could not be read"
    stamp = facts.get("stamp") if isinstance(facts, dict) else None
    if not stamp:
        return "no record of a completed deploy"
    if not isinstance(stamp, dict) or "fingerprint" not in stamp:
        return "its deploy record is unreadable"
    if stamp["fingerprint"] != wanted:
        last = stamp.get("playbook", "?")
        if last != playbook:
            return f"last deployed with {last}, not {playbook}"
        return "deployed from other inputs (roles, inventory or variables changed)"
    if facts.get("newer"):
        return f"{facts['newer']} changed after its last deploy"
    if facts.get("failed"):
        return f"failed since its last deploy: {' '.join(facts['failed'])}"
    if facts.get("inactive"):
        return f"stopped since its last deploy: {' '.join(facts['inactive'])}"
    return ""


def probe(ssh_config: Path, hosts: Sequence[str], wanted: str, playbook: str) -> dict[str, str]:
    """{host: why it is not up to date}; "" for each host that is."""
    command = "python3 - " + " ".join(shlex.quote(a) for a in (STAMP, *WATCHED))

    def one(host: str) -> tuple[str, str]:
        try:
            done = ssh.execute(
                ssh_config, host, command, stdin=PROBE_SCRIPT, timeout=TIMEOUT_S, connect_timeout=10
            )
        except RemoteTimeout:
            return host, "did not answer in time"
        if done.returncode != 0:
            return host, f"not checked ({(done.error_text.strip() or 'ssh failed')[-200:]})"
        return host, why_not_current(done.text, wanted, playbook)

    return dict(_each(one, hosts))


def clear(ssh_config: Path, hosts: Iterable[str]) -> dict[str, str]:
    """Take the stamps away before a run; {host: why not} where that failed (an unreachable
    host is the run's to report: it fails there, and gets no new stamp)."""
    command = f"rm -f {shlex.quote(STAMP)}"

    def one(host: str) -> tuple[str, str]:
        try:
            done = ssh.execute(ssh_config, host, command, timeout=TIMEOUT_S, connect_timeout=10)
        except RemoteTimeout:
            return host, "timed out"
        return host, "" if done.returncode == 0 else done.error_text.strip()[-200:]

    return {h: why for h, why in _each(one, list(hosts)) if why}


def record(
    ssh_config: Path,
    hosts: Iterable[str],
    wanted: str,
    playbook: str,
    managed: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, str]:
    """Stamp every host after a run that succeeded on all of them, with the paths its tasks
    managed there (``managed``); {host: why not} where that failed (the deploy itself
    succeeded: the next one there is simply a full run)."""
    now = time.time()
    command = "python3 - " + " ".join(shlex.quote(a) for a in (STAMP, *BOOT_FILES))

    def one(host: str) -> tuple[str, str]:
        paths_here = list((managed or {}).get(host, ()))
        body = json.dumps(
            {"fingerprint": wanted, "playbook": playbook, "time": now, "managed": paths_here}
        )
        script = f"RECORD = {body!r}\n" + RECORD_SCRIPT
        try:
            done = ssh.execute(ssh_config, host, command, stdin=script, timeout=TIMEOUT_S)
        except RemoteTimeout:
            return host, "timed out"
        return host, "" if done.returncode == 0 else done.error_text.strip()[-200:]

    return {h: why for h, why in _each(one, list(hosts)) if why}


def _each(fn: Callable[[str], tuple[str, str]], hosts: Sequence[str]) -> list[tuple[str, str]]:
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(hosts))) as pool:
        return list(pool.map(fn, hosts))
