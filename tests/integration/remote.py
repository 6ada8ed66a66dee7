"""Running commands on testbed nodes over SSH, exactly as a user would with the inventory's config."""

from __future__ import annotations

import subprocess
from pathlib import Path


def ssh(
    expdir: Path, node: str, command: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["ssh", "-F", str(expdir / "inventory" / "ssh_config"), node, command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert proc.returncode == 0, (
            f"{node}: `{command}` failed ({proc.returncode}): {proc.stderr}"
        )
    return proc
