"""Paths and a stand-in backend base the testbed tests share (a plain module: the test directories are not packages)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from elastic import paths
from elastic.testbed.backends.base import Backend, Capabilities
from elastic.testbed.backends.local import capacity
from elastic.testbed.backends.local.backend import LocalBackend

PROFILES = paths.REPO_ROOT / "profiles"
SLURM_PROFILE = PROFILES / "slurm_cluster.py"
TEST_PROFILES = PROFILES / "tests"
RECORDINGS = Path(__file__).parent / "recordings"


class StandInBackend(Backend):
    """What the tests' stand-in backends share with the local testbed: its capabilities and its
    count of machines (so a test sees what `ptc up` would refuse), but no disk images to choose
    from, no provisioning turns and no host services (the protocol's defaults)."""

    capabilities: ClassVar[Capabilities] = replace(
        LocalBackend.capabilities, disk_images=(), control_service=False
    )

    @staticmethod
    def reserved(experiment: str, nodes: Sequence[str]) -> AbstractContextManager[None]:
        return capacity.reserved(experiment, nodes)
