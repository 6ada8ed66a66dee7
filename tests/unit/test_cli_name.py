"""The CLI names itself as the user typed it, whichever way it was started."""

from __future__ import annotations

import subprocess
import sys

from elastic import paths


def test_usage_and_error_lines_say_ptc() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "elastic.cli", "node", "power-off"],
        cwd=paths.REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Usage: ptc node power-off" in proc.stderr
    assert "python -m elastic.cli" not in proc.stderr + proc.stdout
