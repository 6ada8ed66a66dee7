"""The health check's free-space probe, run for real (``--dry-run``: it changes nothing) on this
machine's filesystems with a configuration file of the test's own."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "roles" / "slurm" / "files" / "ptc-slurm-healthcheck"


def dry_run(tmp_path: Path, paths: str, free_mb: str) -> tuple[int, str]:
    conf = tmp_path / "ptc-healthcheck.conf"
    conf.write_text(f"MPI_PLUGIN=none\nFREE_PATHS=({paths})\nFREE_MB=({free_mb})\nTIMEOUT=5\n")
    done = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"],
        env={"PTC_HEALTHCHECK_CONF": str(conf), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout.strip()


def test_a_filesystem_short_of_its_free_space_fails_first_and_says_how_much(
    tmp_path: Path,
) -> None:
    code, said = dry_run(tmp_path, f"/ {tmp_path}", "0 1000000000")
    assert code == 1
    # the first failure is the reason the node is drained with (munge may fail after it here)
    assert said.startswith(f"ptc-health: {tmp_path} has "), said
    assert "MiB free, less than 1000000000" in said, said
    assert not said.startswith("ptc-health: / "), said  # 0 MiB needed: / passes


def test_a_path_with_no_filesystem_fails(tmp_path: Path) -> None:
    code, said = dry_run(tmp_path, str(tmp_path / "gone"), "1")
    assert code == 1 and said.startswith(f"ptc-health: {tmp_path}/gone: no filesystem answers")
