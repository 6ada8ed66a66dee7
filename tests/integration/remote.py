"""Looking at testbed nodes as a user would: SSH with the inventory's config, and podman."""

from __future__ import annotations

import subprocess
from pathlib import Path


def ssh(
    expdir: Path, node: str, command: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["ssh", "-F", str(expdir / "inventory" / "ssh_config"), node, command],
        stdin=subprocess.DEVNULL,  # a non-blocking stdin (CI's) must not reach the node's tools
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert proc.returncode == 0, (
            f"{node}: `{command}` failed ({proc.returncode}): {proc.stderr}"
        )
    return proc


def containers(experiment: str) -> list[str]:
    """Names of the podman containers labelled as the experiment's, sorted."""
    out = subprocess.run(
        ["podman", "ps", "-a", "--filter", f"label=io.ptc.experiment={experiment}",
         "--format", "{{.Names}}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sorted(out.split())
