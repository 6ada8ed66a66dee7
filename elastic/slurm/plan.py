"""An elasticity plan (E-HPC's plan-driven elasticity, its Fig. 3 form) and its run inside one
running job: before each stage the job is resized to the stage's width, then the stage runs
as one step across all of it.

A plan is YAML::

    workflow:
      command: ./stage.sh          # a stage's command unless it has its own
    mProject:                      # every other key is a stage, in file order
      nodes: 3
      ppn: 1                       # tasks per node (default 1)
      walltime: "00:15:00"         # the step's time limit (optional)
    mAdd:
      nodes: 1
      command: ./add.sh

A stage's command runs with ``PTC_STAGE`` set to its name. Every field is checked when the plan
is read, and every width against the job's partition before the job changes: an error names
the stage and field.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from elastic.errors import InputError
from elastic.events import OnEvent, Reporter
from elastic.slurm.commands import Runner
from elastic.slurm.resize import Resizer, ResizeRefused, in_environment

STAGE_FIELDS = ("nodes", "ppn", "walltime", "command")
WALLTIME = re.compile(r"^(?:(\d+)-)?(\d{1,2}):(\d{2}):(\d{2})$")
STAGE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Stage:
    name: str
    nodes: int
    ppn: int
    command: str
    walltime: str | None = None


@dataclass(frozen=True)
class StageRun:
    """What one stage took: the resize before it, then its step, and the job's width."""

    stage: str
    nodes: int
    resize_s: float
    step_s: float
    hosts: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "nodes": self.nodes,
            "resize_s": round(self.resize_s, 3),
            "step_s": round(self.step_s, 3),
            "hosts": list(self.hosts),
        }


def parse_plan(data: Any, source: str = "plan") -> tuple[Stage, ...]:
    if not isinstance(data, Mapping):
        raise InputError(f"{source}: not a mapping of 'workflow' and stages")
    workflow = data.get("workflow", {})
    if not isinstance(workflow, Mapping):
        raise InputError(f"{source}: workflow: not a mapping")
    if unknown := sorted(set(workflow) - {"command"}):
        raise InputError(f"{source}: workflow.{unknown[0]}: unknown field (command)")
    default = workflow.get("command")
    if default is not None and (not isinstance(default, str) or not default.strip()):
        raise InputError(f"{source}: workflow.command: not a command line")
    stages = [_stage(name, fields, default, source) for name, fields in data.items()
              if name != "workflow"]  # fmt: skip
    if not stages:
        raise InputError(f"{source}: no stage (every key but 'workflow' is one)")
    return tuple(stages)


def load_plan(path: Path) -> tuple[Stage, ...]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"{path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}:{where} not YAML: {err}") from err
    return parse_plan(data, str(path))


def _stage(name: Any, fields: Any, default: str | None, source: str) -> Stage:
    if not isinstance(name, str) or not STAGE_NAME.match(name):
        raise InputError(
            f"{source}: {name!r}: a stage name is a letter, then letters, digits, '_.-'"
        )
    where = f"{source}: {name}"
    if not isinstance(fields, Mapping):
        raise InputError(f"{where}: not a mapping of {', '.join(STAGE_FIELDS)}")
    if unknown := sorted(set(fields) - set(STAGE_FIELDS)):
        raise InputError(f"{where}.{unknown[0]}: unknown field ({', '.join(STAGE_FIELDS)})")
    nodes, ppn = fields.get("nodes"), fields.get("ppn", 1)
    for field_name, value in (("nodes", nodes), ("ppn", ppn)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{where}.{field_name}: {value!r} is not a whole number >= 1")
    walltime = fields.get("walltime")
    if walltime is not None and (not isinstance(walltime, str) or not WALLTIME.match(walltime)):
        raise InputError(f"{where}.walltime: {walltime!r} is not [D-]HH:MM:SS")
    command = fields.get("command", default)
    if not isinstance(command, str) or not command.strip():
        raise InputError(f"{where}.command: missing (and no workflow.command to fall back on)")
    return Stage(name, int(nodes), int(ppn), command, walltime)  # type: ignore[arg-type]


def check_widths(stages: tuple[Stage, ...], partition_size: int) -> None:
    for stage in stages:
        if stage.nodes > partition_size:
            raise ResizeRefused(
                f"{stage.name}.nodes: {stage.nodes} is more than the partition's "
                f"{partition_size} node(s)"
            )


def run_plan(
    resizer: Resizer,
    run: Runner,
    job_id: str,
    stages: tuple[Stage, ...],
    on_event: OnEvent | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[StageRun]:
    """Each stage in turn: the job resized to its width, then one step on all of it
    (``srun --jobid``); what each took. A failing step raises (SlurmCommandError) and the
    job keeps its current width."""
    shape = resizer.job(job_id)
    check_widths(stages, resizer.partition_size(shape.partition))
    report = Reporter("elastic-plan", on_event)
    report.begin(f"job {job_id}: {len(stages)} stage(s)", total=len(stages))
    done: list[StageRun] = []
    for i, stage in enumerate(stages):
        started = clock()
        if stage.nodes != len(shape.nodes):
            if stage.nodes > len(shape.nodes):
                shape = resizer.expand(job_id, stage.nodes)
            else:
                shape = resizer.contract(job_id, len(shape.nodes) - stage.nodes)
        hosts = shape.nodes
        resized = clock()
        argv = ["srun", f"--jobid={job_id}", f"--nodes={stage.nodes}",
                f"--ntasks-per-node={stage.ppn}", f"--job-name={stage.name}",
                f"--export=ALL,PTC_STAGE={stage.name}"]  # fmt: skip
        if stage.walltime:
            argv.append(f"--time={stage.walltime}")
        # run from inside the job (its batch script), srun would read the job's first size
        run(in_environment(shape, [*argv, "sh", "-c", stage.command]))
        finished = clock()
        done.append(StageRun(stage.name, stage.nodes, resized - started, finished - resized, hosts))
        report.progress(i + 1, len(stages), f"{stage.name} on {len(hosts)} node(s)")
    report.end(f"job {job_id}: {len(stages)} stage(s) done")
    return done
