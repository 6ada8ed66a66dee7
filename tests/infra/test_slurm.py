"""Slurm daemons on their groups, every compute node usable, accounting answering.

On an elastic cluster (`ptc deploy NAME -e ptc_elastic=true`) the pool nodes outside Slurm's
partition are powered down as Slurm sees them: slurmd is stopped there until Slurm resumes the
node, so the checks of slurmd and of the node's state skip them and say so."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import group, name_of, require_group, skip_if_powered_down
from testinfra.host import Host


def test_slurmctld_active(host: Host) -> None:
    require_group(host, "slurm_controller")
    assert host.service("slurmctld").is_running, f"{name_of(host)}: slurmctld is not running"


def test_slurmdbd_active(host: Host) -> None:
    require_group(host, "slurm_dbd")
    assert host.service("slurmdbd").is_running, f"{name_of(host)}: slurmdbd is not running"


def test_slurmd_active(host: Host, other: Any) -> None:
    require_group(host, "slurm_compute")
    skip_if_powered_down(host, other)
    assert host.service("slurmd").is_running, f"{name_of(host)}: slurmd is not running"


def test_node_idle_in_sinfo(host: Host, other: Any) -> None:
    require_group(host, "slurm_compute")
    skip_if_powered_down(host, other)
    me = name_of(host)
    controller = other(group(host, "slurm_controller")[0])
    out = controller.run(f"sinfo --noheader --nodes={me} --format=%T")
    state = out.stdout.strip() or out.stderr.strip()
    assert out.rc == 0 and state == "idle", (
        f"{me}: sinfo on the controller says {state!r}, not idle"
    )


def test_accounting_knows_cluster(host: Host) -> None:
    require_group(host, "slurm_controller")
    if not group(host, "slurm_dbd"):
        pytest.skip("no accounting daemon in this cluster (slurm_dbd is empty)")
    out = host.run("sacctmgr --noheader --parsable2 show cluster format=cluster")
    assert out.rc == 0 and out.stdout.strip(), (
        f"{name_of(host)}: sacctmgr lists no cluster ({out.stderr.strip()})"
    )
