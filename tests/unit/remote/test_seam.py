"""The one SSH seam: how it builds command lines, and that nothing else in elastic does."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from elastic.remote import ssh

REPO = Path(__file__).resolve().parents[3]
ELASTIC = REPO / "elastic"
SEAM = ELASTIC / "remote"


def test_argv_puts_config_identity_batch_mode_and_options_before_the_host() -> None:
    line = ssh.argv(
        "node-1",
        "hostname",
        config=Path("/x/ssh_config"),
        identity=Path("/k"),
        options={"ConnectTimeout": 5},
        extra=["-N"],
    )
    assert line == [
        "ssh", "-F", "/x/ssh_config", "-i", "/k", "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=5", "-N", "node-1", "hostname",
    ]  # fmt: skip
    assert ssh.argv("n", config=Path("c"), batch=False) == ["ssh", "-F", "c", "n"]
    scp = ssh.argv("n", config=Path("c"), program="scp")
    assert scp == ["scp", "-q", "-F", "c", "-o", "BatchMode=yes"]


def test_forwards_say_where_they_listen() -> None:
    tcp = ssh.Forward("127.0.0.1:4000", "10.10.1.2", 2379)
    unix = ssh.Forward("/run/x/m.sock", "10.10.1.2", 8700)
    assert tcp.spec() == "127.0.0.1:4000:10.10.1.2:2379" and not tcp.is_socket
    assert unix.spec() == "/run/x/m.sock:10.10.1.2:8700" and unix.is_socket
    assert not unix.ready()  # no such socket


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_outside_the_seam_builds_an_ssh_command_line() -> None:
    """An ssh/scp/sftp program name as a string, or subprocess near an ssh_config, outside
    elastic/remote means a second way to reach nodes."""
    # The program's name opening a list, tuple or call: ["ssh", ...], ("scp", ...), execvp("ssh", ...)
    program = re.compile(r"""[\[(]\s*["'](ssh|scp|sftp|ssh-keyscan)["']\s*[,\])]""")
    found = []
    for path in _python_files(ELASTIC):
        if path.is_relative_to(SEAM):
            continue
        text = path.read_text()
        for match in program.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)!r}")
    assert not found, "ssh command lines outside elastic/remote:\n" + "\n".join(found)


def test_no_module_outside_the_seam_imports_fabric_or_paramiko() -> None:
    found = []
    for path in _python_files(ELASTIC):
        if path.is_relative_to(SEAM):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [
                f"{path.relative_to(REPO)}: {n}"
                for n in names
                if n.split(".")[0] in ("fabric", "paramiko", "invoke")
            ]
    assert not found, found


def test_the_seam_imports_only_errors_and_events_of_elastic() -> None:
    allowed = {"elastic.errors", "elastic.events"}
    for path in _python_files(SEAM):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if module.startswith("elastic") and not module.startswith("elastic.remote"):
                    assert module in allowed, f"{path.name} imports {module}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("elastic.") or alias.name.startswith(
                        "elastic.remote"
                    ), f"{path.name} imports {alias.name}"


def test_the_code_digest_covers_the_seam_and_no_test_tool() -> None:
    """The elastic role restarts every manager when the digest of these files changes."""
    role_vars = yaml.safe_load((REPO / "roles/elastic/vars/main.yml").read_text())
    globs = re.findall(r"playbook_dir ~ '/([^']+)'", role_vars["__elastic_code_files"])
    files = {p for g in globs for p in REPO.glob(g)}
    assert files, globs
    names = {str(p.relative_to(REPO)) for p in files}
    assert "elastic/remote/ssh.py" in names
    assert not any(n.endswith(("/faults.py", "/probe.py")) for n in names), sorted(names)
    assert not any(n.startswith("tests/") for n in names)
    assert (REPO / "tests/support/faults.py").is_file()
    assert (REPO / "tests/support/probe.py").is_file()
