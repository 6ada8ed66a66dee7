"""HPGMG-FE and HPGMG-FV: their command lines for one configuration, and parsers of their output.

HPGMG-FE runs ``hpgmg-fe sample`` on one grid: ``-local`` is the problem size per rank in
elements, so the global size of a configuration is about ``size`` elements; the grid HPGMG
actually chose is parsed back (``G[...]``) and recorded. Each timed solve prints one line::

    Q2 G[   16   16   32] P[  1  1  2]  1.234e-02 s    0.523 GF   12.345 MEq/s

HPGMG-FV prints a performance summary with one line per level of its dynamic range::

    h=1.25e-01  DOF=5.12e+02  time=0.000123  DOF/s=4.163e+06  MPI=2  OMP=1
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from typing import Any

from elastic.errors import PtcError

FE_SAMPLE = re.compile(
    r"^Q(?P<degree>\d+) G\[\s*(?P<g0>\d+)\s+(?P<g1>\d+)\s+(?P<g2>\d+)\] "
    r"P\[\s*(?P<p0>\d+)\s+(?P<p1>\d+)\s+(?P<p2>\d+)\]\s+(?P<time>[0-9.eE+-]+) s\s+"
    r"(?P<gf>[0-9.eE+-]+) GF\s+(?P<meqs>[0-9.eE+-]+) MEq/s",
    re.MULTILINE,
)
FV_SUMMARY = re.compile(
    r"h=(?P<h>[0-9.eE+-]+)\s+DOF=(?P<dof>[0-9.eE+-]+)\s+time=(?P<time>[0-9.eE+-]+)\s+"
    r"DOF/s=(?P<dofs>[0-9.eE+-]+)\s+MPI=(?P<mpi>\d+)\s+OMP=(?P<omp>\d+)"
)


def fe_command(binary: str, config: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    ranks = int(config["nodes"]) * int(config["ranks_per_node"])
    local = max(1, int(config["size"]) // ranks)
    smooth = str(options.get("smooth", "3,1"))
    return (
        f"{binary} sample -op_type {config['operator']} -local {local},{local} -maxsamples 2 "
        f"-repeat {int(options.get('sample_repeat', 3))} -mintime {float(options.get('mintime', 0))}"
        f" -smooth {smooth}"
    )


def fv_command(binary: str, config: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    """``hpgmg-fv LOG2_BOX_DIM BOXES_PER_RANK``; option ``min_time`` shortens its timed passes.

    Upstream times each pass for at least 60 s; the hpgmg role's FV patch reads the minimum from
    ``HPGMG_MIN_TIME`` (``env`` sets it on every rank, whatever the launcher passes on).
    """
    command = f"{binary} {int(config['log2_box_dim'])} {int(config['boxes_per_rank'])}"
    if "min_time" in options:
        return f"env HPGMG_MIN_TIME={float(options['min_time']):g} {command}"
    return command


def parse_fe(text: str, source: str = "hpgmg-fe output") -> dict[str, Any]:
    """The timed samples of ``hpgmg-fe sample`` (the warm-up solves print no such lines)."""
    samples = list(FE_SAMPLE.finditer(text))
    if not samples:
        raise PtcError(f"{source}: no sample lines (Q.. G[...] ... MEq/s): the run did not finish")
    first = samples[0]
    degree = int(first["degree"])
    grid = [int(first[f"g{i}"]) for i in range(3)]
    times = [float(m["time"]) for m in samples]
    meqs = [float(m["meqs"]) for m in samples]
    gflops = [float(m["gf"]) for m in samples]
    dofs = 1
    for g in grid:
        dofs *= g * degree + 1
    return {
        "fe_degree": degree,
        "grid_x": grid[0],
        "grid_y": grid[1],
        "grid_z": grid[2],
        "proc_grid": "x".join(first[f"p{i}"] for i in range(3)),
        "global_elements": grid[0] * grid[1] * grid[2],
        "global_dofs": dofs,
        "samples": len(samples),
        "sample_times_s": ",".join(f"{t:.6g}" for t in times),
        "solve_time_s": statistics.median(times),
        "solve_time_min_s": min(times),
        "dof_per_s": statistics.median(meqs) * 1e6,
        "gflops": statistics.median(gflops),
    }


def parse_fv(text: str, source: str = "hpgmg-fv output") -> dict[str, Any]:
    """The performance summary of ``hpgmg-fv``: the finest level first."""
    if "Performance Summary" not in text:
        raise PtcError(f"{source}: no performance summary: the run did not finish")
    levels = list(FV_SUMMARY.finditer(text.split("Performance Summary", 1)[1]))
    if not levels:
        raise PtcError(f"{source}: the performance summary has no level lines")
    row: dict[str, Any] = {
        "global_dofs": float(levels[0]["dof"]),
        "solve_time_s": float(levels[0]["time"]),
        "dof_per_s": float(levels[0]["dofs"]),
        "samples": len(levels),
    }
    for index, level in enumerate(levels):
        row[f"level{index}_dofs"] = float(level["dof"])
        row[f"level{index}_time_s"] = float(level["time"])
        row[f"level{index}_dof_per_s"] = float(level["dofs"])
    return row
