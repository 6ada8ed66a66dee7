"""The slurm role's per-job epilog, run by sh with stand-ins for scontrol and logger on PATH:
a pool node asks for its power down, another node does nothing, and a refusal never fails the
epilog (a failed epilog drains the node)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import jinja2

from elastic.paths import REPO_ROOT

TEMPLATE = REPO_ROOT / "roles" / "slurm" / "templates"


def epilog(tmp_path: Path, pool: list[str], scontrol_rc: int) -> tuple[int, str, str]:
    """Run the rendered epilog on node-1 for job 42; its exit status and the calls made."""
    script = tmp_path / "epilog"
    script.write_text(
        jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE))
        .get_template("ptc-per-job-epilog.j2")
        .render(ansible_managed="test", __slurm_power_save_nodes=pool)
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, rc in (("scontrol", scontrol_rc), ("logger", 0)):
        stand_in = bin_dir / tool
        stand_in.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/{tool}.calls\nexit {rc}\n')
        stand_in.chmod(0o755)
    env = os.environ | {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURMD_NODENAME": "node-1",
        "SLURM_JOB_ID": "42",
    }
    done = subprocess.run(["sh", str(script)], env=env, check=False, timeout=30)

    def calls(tool: str) -> str:
        path = tmp_path / f"{tool}.calls"
        return path.read_text() if path.exists() else ""

    return done.returncode, calls("scontrol"), calls("logger")


def test_a_pool_node_asks_slurm_to_power_it_down_once_its_jobs_end(tmp_path: Path) -> None:
    rc, scontrol, logger = epilog(tmp_path, ["node-1", "node-2"], 0)
    assert rc == 0 and logger == ""
    assert scontrol == (
        "update NodeName=node-1 State=POWER_DOWN_ASAP Reason=ptc: per-job, job 42 ended\n"
    )


def test_a_node_outside_the_pool_is_left_alone(tmp_path: Path) -> None:
    assert epilog(tmp_path, ["node-10", "node"], 0) == (0, "", "")


def test_a_refused_power_down_is_logged_and_the_epilog_still_succeeds(tmp_path: Path) -> None:
    rc, scontrol, logger = epilog(tmp_path, ["node-1"], 1)
    assert rc == 0 and scontrol.startswith("update NodeName=node-1")
    assert logger.startswith("-t ptc-per-job node-1: power down after job 42 failed")
