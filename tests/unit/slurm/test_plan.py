"""An elasticity plan in E-HPC's Fig. 3 form: what it reads, what it refuses (naming the stage
and field), and its run: the job resized before each stage, then one step on all of it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from test_resize import FakeSlurm

from elastic.errors import InputError
from elastic.slurm.plan import Stage, load_plan, parse_plan, run_plan
from elastic.slurm.resize import Resizer, ResizeRefused

PLAN = """\
workflow:
  command: ./stage.sh
mProject:
  nodes: 3
  walltime: "00:15:00"
mDiff:
  nodes: 2
  ppn: 2
mAdd:
  nodes: 1
  command: ./add.sh
"""


class PlanSlurm(FakeSlurm):
    """FakeSlurm that also runs steps: each srun is recorded with the job's width then."""

    steps: list[tuple[list[str], int]]

    def __call__(self, argv: Sequence[str]) -> str:
        if "srun" in argv:  # after env's settings of the job's allocation
            step = list(argv[list(argv).index("srun") :])
            assert argv[0] == "env" and f"SLURM_JOB_NUM_NODES={len(self.nodes)}" in argv, argv
            self.steps.append((step, len(self.nodes)))
            return ""
        return super().__call__(argv)


def test_a_plan_reads_its_stages_in_file_order_with_the_workflow_s_command() -> None:
    assert parse_plan(yaml.safe_load(PLAN)) == (
        Stage("mProject", 3, 1, "./stage.sh", "00:15:00"),
        Stage("mDiff", 2, 2, "./stage.sh"),
        Stage("mAdd", 1, 1, "./add.sh"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("s1: {nodes: 0, command: x}", r"^plan: s1.nodes: 0 is not a whole number >= 1"),
        ("s1: {nodes: 2, ppn: yes, command: x}", r"^plan: s1.ppn: True is not a whole number"),
        ("s1: {nodes: 2, cores: 4, command: x}", r"^plan: s1.cores: unknown field"),
        ("s1: {nodes: 2, walltime: 15m, command: x}", r"^plan: s1.walltime: '15m' is not"),
        ("s1: {nodes: 2}", r"^plan: s1.command: missing \(and no workflow.command"),
        ("workflow: {command: x}", r"^plan: no stage"),
        ("workflow: {cmd: x}\ns1: {nodes: 1}", r"^plan: workflow.cmd: unknown field"),
        ("'1st': {nodes: 1, command: x}", r"^plan: '1st': a stage name is a letter"),
        ("- s1", r"^plan: not a mapping"),
    ],
)
def test_a_bad_plan_is_refused_naming_the_stage_and_field(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_plan(yaml.safe_load(text))


def test_a_plan_file_that_is_not_yaml_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "plan.yml"
    path.write_text("s1:\n  nodes: [1\n")
    with pytest.raises(InputError, match=rf"^{path}: line \d+ not YAML"):
        load_plan(path)


def test_a_run_resizes_before_each_stage_and_runs_it_on_the_job_s_whole_width() -> None:
    slurm = PlanSlurm(nodes=["node-1"])
    slurm.steps = []
    ticks = iter(range(100))
    resizer = Resizer(slurm, clock=lambda: 0.0, sleep=lambda _: None)
    runs = run_plan(
        resizer, slurm, "42", parse_plan(yaml.safe_load(PLAN)), clock=lambda: next(ticks)
    )
    assert [(r.stage, r.nodes, len(r.hosts)) for r in runs] == [
        ("mProject", 3, 3), ("mDiff", 2, 2), ("mAdd", 1, 1),
    ]  # fmt: skip
    assert [width for _, width in slurm.steps] == [3, 2, 1]
    first, _ = slurm.steps[0]
    for option in ("--jobid=42", "--nodes=3", "--ntasks-per-node=1", "--time=00:15:00",
                   "--export=ALL,PTC_STAGE=mProject"):  # fmt: skip
        assert option in first, (option, first)
    assert first[-3:] == ["sh", "-c", "./stage.sh"]
    assert "--ntasks-per-node=2" in slurm.steps[1][0]
    assert runs[0].hosts[0] == "node-1" and runs[2].hosts == ("node-1",)
    assert all(r.resize_s == 1 and r.step_s == 1 for r in runs)


def test_a_stage_wider_than_the_partition_is_refused_before_the_job_changes() -> None:
    slurm = PlanSlurm(nodes=["node-1"])
    slurm.steps = []
    stages = parse_plan({"s1": {"nodes": 2, "command": "x"}, "s2": {"nodes": 5, "command": "x"}})
    with pytest.raises(ResizeRefused, match=r"^s2.nodes: 5 is more than the partition's 4"):
        run_plan(Resizer(slurm), slurm, "42", stages)
    assert slurm.changes() == [] and slurm.steps == []
