"""MPI and the HPCC benchmark on the nodes that run jobs."""

from __future__ import annotations

from conftest import cluster_var, name_of, require_group
from testinfra.host import Host

from elastic import node_paths


def test_mpirun_present(host: Host) -> None:
    require_group(host, "slurm_compute", "slurm_controller")
    out = host.run("mpirun --version")
    assert out.rc == 0 and "Open MPI" in out.stdout, f"{name_of(host)}: mpirun is missing or broken"


def test_hpcc_runs(host: Host) -> None:
    """One-rank HPCC on a tiny input, as the cluster user, must finish all its tests."""
    require_group(host, "slurm_compute")
    user = cluster_var(host, "common_cluster_user", "ptc")
    prefix = cluster_var(host, "hpcc_prefix", node_paths.HPCC_PREFIX)
    script = (
        "set -e; d=$(mktemp -d); cd $d; "
        f"cp {prefix}/hpccinf-smoke.txt hpccinf.txt; "
        "timeout 300 hpcc >/dev/null 2>&1; "
        "grep -q 'End of HPC Challenge tests' hpccoutf.txt; cd /; rm -rf $d"
    )
    out = host.run(f'runuser -u {user} -- sh -c "{script}"')
    assert out.rc == 0, f"{name_of(host)}: hpcc did not complete a smoke run (rc={out.rc})"
