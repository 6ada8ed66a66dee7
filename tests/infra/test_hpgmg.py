"""HPGMG built once into the share runs on every compute node, from the share.

The hpgmg role is opt-in (``ptc_hpgmg_enabled``, or the bench-software playbook): where nothing
was built these checks skip, unless the inventory says HPGMG is enabled, when a missing build is
a failure. Each binary runs as the cluster user, one rank, on a tiny problem, and must print the
figures a campaign parses.
"""

from __future__ import annotations

import json

import pytest
from conftest import cluster_var, name_of, require_group
from testinfra.host import Host

from elastic import node_paths

DEFAULT_PREFIX = node_paths.HPGMG_PREFIX
SHARE = node_paths.SHARED_SOFTWARE


def prefix(host: Host) -> str:
    return str(cluster_var(host, "hpgmg_prefix", DEFAULT_PREFIX))


def buildinfo(host: Host) -> dict[str, object]:
    """BUILDINFO.json of the build on the share; skips (or fails, when enabled) without one."""
    path = f"{prefix(host)}/BUILDINFO.json"
    info = host.file(path)
    if not info.exists:
        enabled = cluster_var(host, "ptc_hpgmg_enabled", False)
        if str(enabled).lower() in ("true", "1", "yes"):
            pytest.fail(f"{name_of(host)}: ptc_hpgmg_enabled is set but {path} does not exist")
        pytest.skip(f"{name_of(host)}: HPGMG is not built on this cluster ({path} is absent)")
    data: dict[str, object] = json.loads(info.content_string)
    return data


def as_user(host: Host, command: str) -> str:
    user = cluster_var(host, "common_cluster_user", "ptc")
    script = f"cd /tmp && {command}"
    return f"runuser -u {user} -- sh -c '{script}'"


def test_hpgmg_is_on_the_share(host: Host) -> None:
    require_group(host, "slurm_compute")
    buildinfo(host)
    where = host.run(f"findmnt -n -o TARGET -T {prefix(host)}/bin")
    assert where.rc == 0 and where.stdout.strip() == SHARE, (
        f"{name_of(host)}: {prefix(host)}/bin is on {where.stdout.strip() or '?'}, not the share "
        f"{SHARE}"
    )


def test_hpgmg_fv_runs_from_the_share(host: Host) -> None:
    require_group(host, "slurm_compute")
    info = buildinfo(host)
    binary = f"{prefix(host)}/bin/hpgmg-fv"
    assert host.file(binary).is_file, f"{name_of(host)}: {binary} is missing"
    # HPGMG_MIN_TIME (the role's FV patch) keeps the timed passes short.
    out = host.run(as_user(host, f"OMP_NUM_THREADS=1 HPGMG_MIN_TIME=0.1 timeout 120 {binary} 4 1"))
    assert out.rc == 0 and "DOF/s=" in out.stdout, (
        f"{name_of(host)}: hpgmg-fv 4 1 failed (rc={out.rc}): {out.stderr[-500:]}"
    )
    assert str(info.get("hpgmg_commit", "")).startswith(prefix(host).rsplit("/", 1)[-1])


def test_hpgmg_fe_runs_from_the_share(host: Host) -> None:
    require_group(host, "slurm_compute")
    info = buildinfo(host)
    if not info.get("fe"):
        pytest.skip(f"{name_of(host)}: HPGMG-FE was not built (hpgmg_fe_enabled is false)")
    binary = f"{prefix(host)}/bin/hpgmg-fe"
    assert host.file(binary).is_file, f"{name_of(host)}: {binary} is missing"
    out = host.run(
        as_user(
            host,
            f"timeout 120 {binary} sample -op_type poisson1 -local 500,500 -maxsamples 2 -repeat 1",
        )
    )
    assert out.rc == 0 and "MEq/s" in out.stdout, (
        f"{name_of(host)}: hpgmg-fe sample failed (rc={out.rc}): {out.stderr[-500:]}"
    )
