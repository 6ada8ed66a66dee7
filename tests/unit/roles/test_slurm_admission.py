"""The slurm role's admission script (job_submit.lua) under Lua 5.1, the interpreter Debian's
job_submit/lua plugin links.

A harness stands in for slurmctld's side of the plugin: the ``slurm`` table's constants and
``log_user``, and job descriptions and partitions as slurmctld hands them over (unset numbers
are NO_VAL or NO_VAL16; memory reads nil when unset, a per-CPU request only as
``min_mem_per_cpu``). The real plugin refuses the same jobs in the integration tests.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest

from elastic.paths import REPO_ROOT

TEMPLATES = REPO_ROOT / "roles" / "slurm" / "templates"
LUA = shutil.which("lua5.1")
pytestmark = pytest.mark.skipif(LUA is None, reason="needs lua5.1 (`make apt` installs it)")

NO_VAL, NO_VAL16 = 4294967294, 65534
HARNESS = """
slurm = {SUCCESS = 0, ERROR = -1, ESLURM_INVALID_NODE_COUNT = 2006,
         NO_VAL = 4294967294, NO_VAL16 = 65534, NO_VAL64 = 18446744073709551614}
function slurm.log_user(fmt, ...) io.write("user: ", string.format(fmt, ...), "\\n") end
local loaded = assert(loadfile(arg[1]))
assert(loaded() == slurm.SUCCESS)
local job, parts = %(job)s, %(parts)s
io.write("rc: ", tostring(slurm_job_submit(job, parts, 1000)), "\\n")
"""
MAIN = {"name": "main", "total_nodes": 4, "total_cpus": 8, "flag_default": 1}
SMALL = {"name": "small", "total_nodes": 1, "total_cpus": 2, "flag_default": 0}


def lua_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{lua_value(k)}] = {lua_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def job(**fields: Any) -> dict[str, Any]:
    """A job description as sbatch sends it with no options but ``fields``."""
    base: dict[str, Any] = {
        "min_nodes": NO_VAL,
        "max_nodes": NO_VAL,
        "min_cpus": 1,
        "num_tasks": NO_VAL,
        "cpus_per_task": NO_VAL16,
        "pn_min_cpus": NO_VAL16,
        "ntasks_per_node": NO_VAL16,
    }
    return base | fields


def submit(
    tmp_path: Path,
    desc: dict[str, Any],
    parts: tuple[dict[str, Any], ...] = (MAIN, SMALL),
    largest: dict[str, int] | None = None,
) -> tuple[int, list[str]]:
    """The script's return code and what it told the user."""
    assert LUA is not None
    template = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES)).get_template(
        "job_submit.lua.j2"
    )
    node = {"cpus": 2, "memory_mb": 20009} if largest is None else largest
    script = tmp_path / "job_submit.lua"
    script.write_text(template.render(ansible_managed="test", __slurm_largest_node=node))
    harness = tmp_path / "harness.lua"
    harness.write_text(
        HARNESS % {"job": lua_value(desc), "parts": lua_value({p["name"]: p for p in parts})}
    )
    done = subprocess.run(
        [LUA, str(harness), str(script)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rc = int(next(line for line in lines if line.startswith("rc: "))[4:])
    return rc, [line[6:] for line in lines if line.startswith("user: ")]


def test_a_job_that_fits_is_admitted_silently(tmp_path: Path) -> None:
    assert submit(tmp_path, job(min_nodes=4, max_nodes=4, min_cpus=8)) == (0, [])
    # three one-CPU tasks of 15000 MB each fit: Slurm spreads them over nodes
    assert submit(tmp_path, job(num_tasks=3, min_cpus=3, min_mem_per_cpu=15000)) == (0, [])
    # --mem=0 is "all of a node's memory"
    assert submit(tmp_path, job(min_mem_per_node=0)) == (0, [])


def test_more_nodes_than_the_partition_has_is_refused_naming_both(tmp_path: Path) -> None:
    rc, told = submit(tmp_path, job(min_nodes=9, max_nodes=9, min_cpus=9))
    assert rc == 2006
    assert told == [
        "ptc: this job can never run: it asks for 9 nodes and partition main has 4 in all"
    ]


def test_more_cpus_than_the_partition_has_is_refused(tmp_path: Path) -> None:
    rc, told = submit(tmp_path, job(num_tasks=99, min_cpus=99))
    assert rc == -1
    assert told == [
        "ptc: this job can never run: it asks for 99 CPUs and partition main has 8 in all"
    ]


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"cpus_per_task": 64, "pn_min_cpus": 64, "min_cpus": 64}, "64 CPUs on one node"),
        ({"ntasks_per_node": 3}, "3 CPUs on one node"),
        ({"ntasks_per_node": 2, "cpus_per_task": 2}, "4 CPUs on one node"),
        ({"min_mem_per_node": 999999}, "999999 MB on one node and the largest node has 20009 MB"),
        (
            {"cpus_per_task": 2, "pn_min_cpus": 2, "min_mem_per_cpu": 15000},
            "15000 MB per CPU, 30000 MB on one node",
        ),
    ],
)
def test_more_than_the_largest_node_holds_is_refused(
    tmp_path: Path, fields: dict[str, Any], why: str
) -> None:
    rc, told = submit(tmp_path, job(**fields))
    assert rc == -1 and len(told) == 1 and why in told[0], told


def test_a_job_that_fits_one_of_its_partitions_is_admitted(tmp_path: Path) -> None:
    assert submit(tmp_path, job(partition="small,main", min_nodes=3, min_cpus=3)) == (0, [])
    rc, told = submit(tmp_path, job(partition="small,main", min_nodes=5, min_cpus=5))
    assert rc == 2006
    assert told == [
        "ptc: this job can never run: it asks for 5 nodes and partition small has 1 in all; "
        "it asks for 5 nodes and partition main has 4 in all"
    ]


def test_an_unknown_partition_is_left_to_slurm(tmp_path: Path) -> None:
    """slurmctld's own check names the partition better than the script could."""
    assert submit(tmp_path, job(partition="nosuch", min_nodes=99)) == (0, [])


def test_given_node_lines_leave_per_node_sizes_unchecked(tmp_path: Path) -> None:
    """With node lines set by hand the role knows no node sizes: only partition totals count."""
    desc = job(min_mem_per_node=999999, cpus_per_task=64)
    assert submit(tmp_path, desc, largest={}) == (0, [])
    rc, _ = submit(tmp_path, job(min_nodes=9, min_cpus=9), largest={})
    assert rc == 2006
