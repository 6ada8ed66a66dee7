"""The performance dataset: one row per benchmark run, in Parquet and CSV, with a column schema.

``NAME.parquet`` is the dataset; ``NAME.csv`` the same rows for tools that do not read Parquet;
``NAME.columns.json`` gives each column's meaning and unit. All three are replaced whole and
atomically, so a crash leaves the previous dataset intact.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from elastic import atomic
from elastic.errors import InputError, NotFoundError

# column -> (meaning, unit). Unit "" means a label or count without a unit.
COLUMNS: dict[str, tuple[str, str]] = {
    "campaign": ("campaign name (from the campaign file)", ""),
    "run_id": ("stable id of this repeat of this configuration in this campaign", ""),
    "config_id": (
        "stable id of the configuration (hash of benchmark and controlled variables)",
        "",
    ),
    "repeat": ("repeat index of the configuration, from 0", ""),
    "order": ("position in the campaign's (randomised) order", ""),
    "attempt": ("how many times this run_id was run, this row included", ""),
    "benchmark": ("hpgmg-fe, hpgmg-fv or hpcc", ""),
    "operator": ("HPGMG-FE operator (controlled)", ""),
    "size": ("requested global problem size (controlled): elements for HPGMG-FE", "elements"),
    "log2_box_dim": ("HPGMG-FV log2 of the box edge (controlled)", ""),
    "boxes_per_rank": ("HPGMG-FV boxes per rank (controlled)", ""),
    "n": ("HPL matrix order N (controlled)", ""),
    "nb": ("HPL block size NB (controlled)", ""),
    "nodes": ("nodes allocated (controlled)", ""),
    "ranks_per_node": ("MPI ranks per node (controlled)", ""),
    "threads": ("OpenMP threads per rank (controlled)", ""),
    "ranks": ("MPI ranks = nodes x ranks_per_node", ""),
    "cores": ("cores used = ranks x threads", "cores"),
    "fe_degree": ("HPGMG-FE element degree (Q1/Q2) of the operator", ""),
    "grid_x": ("HPGMG-FE global grid, elements along x (chosen by HPGMG)", "elements"),
    "grid_y": ("HPGMG-FE global grid, elements along y", "elements"),
    "grid_z": ("HPGMG-FE global grid, elements along z", "elements"),
    "proc_grid": ("HPGMG-FE process grid", ""),
    "global_elements": ("global problem size actually solved", "elements"),
    "global_dofs": ("global degrees of freedom solved", "DOF"),
    "samples": ("timed solves the benchmark reported", ""),
    "sample_times_s": ("each timed solve's time, comma-separated", "s"),
    "solve_time_s": ("median time of one solve (HPGMG) as the benchmark reports it", "s"),
    "solve_time_min_s": ("fastest solve", "s"),
    "dof_per_s": ("benchmark figure: degrees of freedom solved per second (median)", "DOF/s"),
    "gflops": ("HPGMG-FE floating-point rate (median)", "GFlop/s"),
    "runtime_s": ("wall time of the benchmark command in the job (launcher included)", "s"),
    "cost_core_s": ("cost of the run: runtime_s x cores", "core-s"),
    "command_exit": ("exit status of the benchmark command", ""),
    "job_id": ("Slurm JobID (array tasks as ARRAY_TASK)", ""),
    "state": ("Slurm State", ""),
    "exit_code": ("Slurm ExitCode (status:signal)", ""),
    "elapsed_s": ("Slurm Elapsed", "s"),
    "total_cpu_s": ("Slurm TotalCPU (user + system over all steps)", "s"),
    "max_rss_bytes": ("Slurm MaxRSS, largest over the job's steps", "bytes"),
    "alloc_cpus": ("Slurm AllocCPUS", "cores"),
    "nodelist": ("Slurm NodeList", ""),
    "consumed_energy_j": (
        "Slurm ConsumedEnergyRaw; empty unless slurm.conf sets AcctGatherEnergyType (an "
        "acct_gather_energy plugin: rapl, ipmi, ...), which ptc's slurm role does not yet",
        "J",
    ),
    "submit_time": ("Slurm Submit", "ISO 8601"),
    "start_time": ("Slurm Start", "ISO 8601"),
    "end_time": ("Slurm End", "ISO 8601"),
    "node_hostname": ("first node of the allocation (facts below are of this node)", ""),
    "cpu_model": ("CPU model name (lscpu)", ""),
    "cpu_cores": ("online CPUs of the node (nproc --all)", "cores"),
    "mem_total_kb": ("node memory (MemTotal)", "KiB"),
    "kernel": ("kernel release (uname -r)", ""),
    "ptc_commit": ("git commit of ptc that ran the campaign", ""),
    "benchmark_commit": ("commit of the benchmark's source (BUILDINFO.json)", ""),
    "benchmark_cflags": ("C flags of the benchmark build", ""),
    "command": ("the command the job ran: launcher, benchmark and its flags", ""),
    "petsc_version": ("PETSc version HPGMG-FE was built against", ""),
    "slurm_conf_sha256": ("sha256 of /etc/slurm/slurm.conf on the first node", ""),
    "collected_at": ("when ptc recorded the row", "ISO 8601"),
    "experiment": ("ptc experiment name", ""),
    "testbed": ("local or cloudlab", ""),
    "site": ("CloudLab site, empty locally", ""),
    "workdir": ("run directory on the cluster's shared /home", ""),
    "error": ("why the run has no figures, empty when it has them", ""),
}


# Computed from a dataset's own columns when it is read for learning; never stored.
DERIVED = {
    "solve_cost_core_s": ("cost of the solve alone: solve_time_s x cores", "core-s"),
}


def derived(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the DERIVED columns its columns allow (one it has already is kept)."""
    if "solve_cost_core_s" not in frame and {"solve_time_s", "cores"} <= set(frame.columns):
        frame = frame.assign(solve_cost_core_s=frame["solve_time_s"] * frame["cores"])
    return frame


def paths(path: Path) -> tuple[Path, Path, Path]:
    """The Parquet file, its CSV copy and its column schema."""
    return path, path.with_suffix(".csv"), path.with_suffix(".columns.json")


def describe_columns(
    columns: Iterable[str], schema: Mapping[str, tuple[str, str]] | None = None
) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name in columns:
        if schema is not None:
            meaning, unit = schema.get(name, ("", ""))
            out[name] = {"meaning": meaning, "unit": unit}
            continue
        meaning, unit = COLUMNS.get(name, ("", ""))
        if not meaning and name.startswith("level"):
            meaning, unit = "HPGMG-FV figure of one level of its dynamic range", ""
        elif not meaning:
            meaning = "benchmark figure (HPCC summary key)"
        out[name] = {"meaning": meaning, "unit": unit}
    return out


def write(
    path: Path, frame: pd.DataFrame, columns: Mapping[str, tuple[str, str]] | None = None
) -> None:
    """The dataset's three files; ``columns`` gives the meaning and unit of each column of a
    dataset that is not a campaign's (by default, the campaign's columns above)."""
    parquet, csv, schema = paths(path)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic.write_bytes(parquet, buffer.getvalue())
    atomic.write_bytes(csv, frame.to_csv(index=False).encode())
    text = json.dumps(describe_columns(frame.columns, columns), indent=2) + "\n"
    atomic.write_bytes(schema, text.encode())


def append(path: Path, rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Add runs; the files are replaced whole."""
    new = pd.DataFrame([dict(r) for r in rows])
    if path.exists():
        old = pd.read_parquet(path)
        frame = pd.concat([old, new], ignore_index=True) if len(new) else old
    else:
        frame = new
    write(path, frame)
    return frame


def load(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise NotFoundError(f"dataset {str(path)!r} does not exist")
    if path.suffix == ".csv":
        return pd.read_csv(path)
    try:
        return pd.read_parquet(path)
    except Exception as err:  # pyarrow raises several kinds for a file that is not Parquet
        raise InputError(f"{path}: not a Parquet dataset ({err})") from err
