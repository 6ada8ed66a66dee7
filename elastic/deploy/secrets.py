"""Which variables of a run are secret, and how a run keeps them out of what it records.

The rule: a variable is secret when a role's ``meta/argument_specs.yml`` marks it ``no_log``,
or when its name says so (``SECRET_NAME``: password, secret, token, credential, private or
access key, a key's value), and every ``AWS_*`` variable of the environment is (boto3 reads
its credentials from them); an environment variable naming a file, path or directory
(``ANSIBLE_VAULT_PASSWORD_FILE``) is not. Secrets never reach ansible-playbook's command line or the
environment ansible-runner records in the run directory:

- every extra variable goes to ansible-playbook through a root-only file outside the run
  directory (``-e @FILE``), removed when the run ends; the run directory keeps their names
  only, with secret values replaced by ``REDACTED``;
- the environment ansible-playbook gets, and ansible-runner writes to ``command``, has the
  secret variables removed: no role reads the workstation's environment for a secret.

``leaks`` finds a secret in files and command lines: the tests' scan.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from elastic import paths, processes

SECRET_NAME = re.compile(
    r"password|passwd|secret|token|credential|private_key|access_key|api_key|key_value",
    re.IGNORECASE,
)
REDACTED = "REDACTED"


@cache
def no_log_variables(roles_dir: Path | None = None) -> frozenset[str]:
    """The variables the roles' argument specs mark ``no_log``."""
    found: set[str] = set()
    for spec in sorted((roles_dir or paths.REPO_ROOT / "roles").glob("*/meta/argument_specs.yml")):
        data = yaml.safe_load(spec.read_text()) or {}
        for entry in (data.get("argument_specs") or {}).values():
            for name, option in ((entry or {}).get("options") or {}).items():
                if isinstance(option, dict) and option.get("no_log"):
                    found.add(str(name))
    return frozenset(found)


def is_secret_variable(name: str) -> bool:
    return name in no_log_variables() or bool(SECRET_NAME.search(name))


def is_secret_environment(name: str) -> bool:
    upper = name.upper()
    if upper.endswith(("_FILE", "_PATH", "_DIR")):  # where a secret is, e.g. Ansible's vault
        return False
    return upper.startswith("AWS_") or bool(SECRET_NAME.search(name))


def scrub_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without its secret variables."""
    return {k: v for k, v in env.items() if not is_secret_environment(k)}


def redacted(extravars: Mapping[str, Any]) -> dict[str, Any]:
    """The extra variables as a run directory may record them."""
    return {k: REDACTED if is_secret_variable(k) else v for k, v in extravars.items()}


@contextlib.contextmanager
def private_vars_file(extravars: Mapping[str, Any]) -> Iterator[Path]:
    """A JSON file of ``extravars`` only its owner reads, removed on exit."""
    directory = Path(tempfile.mkdtemp(prefix="ptc-vars-"))  # mode 0700
    path = directory / "extravars.json"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(dict(extravars), out)
        yield path
    finally:
        path.unlink(missing_ok=True)
        directory.rmdir()


@dataclass(frozen=True)
class Leak:
    where: str  # a file's path, or "pid N (command)"
    secret: str  # which secret: its name, never its value

    def __str__(self) -> str:
        return f"{self.secret} in {self.where}"


def leaks_in_files(roots: Iterable[Path], secrets: Mapping[str, str]) -> list[Leak]:
    """Every file under ``roots`` holding one of the ``secrets`` (name -> value)."""
    found: list[Leak] = []
    needles = {name: value.encode() for name, value in secrets.items() if value}
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            try:
                data = path.read_bytes()
            except OSError:
                continue  # a socket, or gone since listed
            found += [Leak(str(path), n) for n, v in needles.items() if v in data]
    return found


def leaks_in_command_lines(
    secrets: Mapping[str, str], proc: Path = Path("/proc"), ignore: Iterable[int] = ()
) -> list[Leak]:
    """Every process whose command line holds one of the ``secrets``, but the ``ignore``d.

    A child of an ignored process that still shows its parent's exact command line is that
    process, forked and not yet exec'd (every ``subprocess`` call passes through that state):
    it is ignored too. Once it execs, its own command line is scanned like any other."""
    skip = set(ignore)
    own = {pid: _read(proc / str(pid) / "cmdline") for pid in skip}
    forked = {argv for argv in own.values() if argv is not None}
    found: list[Leak] = []
    needles = {name: value.encode() for name, value in secrets.items() if value}
    # Sampled every few tenths of a second over thousands of processes (every node's too):
    # plain calls, and a process's parent read only when its command line could be a fork's.
    root = str(proc)
    for name in os.listdir(root):
        if not name.isdigit() or int(name) in skip:
            continue
        pid = int(name)
        argv = _read(Path(root, name, "cmdline"))
        if argv is None:
            continue  # ended since listed
        if argv in forked:
            parent = processes.parent(pid, proc)
            if parent in skip and argv == own.get(parent):
                continue
        hits = [n for n, v in needles.items() if v in argv]
        if hits:
            shown = argv.split(b"\0")[0].decode(errors="replace")  # the program, not its arguments
            found += [Leak(f"pid {pid} ({shown})", n) for n in hits]
    return found


def _read(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
