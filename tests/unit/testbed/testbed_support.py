"""Paths the testbed tests share (a plain module: the test directories are not packages)."""

from __future__ import annotations

from pathlib import Path

from elastic import paths

PROFILES = paths.REPO_ROOT / "profiles"
SLURM_PROFILE = PROFILES / "slurm_cluster.py"
TEST_PROFILES = PROFILES / "tests"
RECORDINGS = Path(__file__).parent / "recordings"
