"""A benchmark campaign: a grid of HPCC configurations, each run through Slurm and recorded.

Every run, successful or not, becomes a dataset row, so a failed run is evidence, not a gap.
"""

from __future__ import annotations

import itertools
import shlex
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from elastic.bench import dataset, hpcc, slurm_job
from elastic.errors import PtcError
from elastic.testbed.experiment import Experiment


@dataclass(frozen=True)
class RunSpec:
    nodes: int
    tasks_per_node: int
    n: int
    nb: int
    repeat: int

    @property
    def ranks(self) -> int:
        return self.nodes * self.tasks_per_node


@dataclass(frozen=True)
class Campaign:
    nodes: tuple[int, ...] = (2,)
    tasks_per_node: tuple[int, ...] = (1,)
    sizes: tuple[int, ...] = (2000,)
    block: int = 80
    repeats: int = 1
    user: str = "ptc"
    launcher: str = "srun --mpi=pmix"
    partition: str | None = None
    timeout_s: float = 1800

    def runs(self) -> Iterator[RunSpec]:
        for nodes, tpn, n in itertools.product(self.nodes, self.tasks_per_node, self.sizes):
            for rep in range(self.repeats):
                yield RunSpec(nodes, tpn, n, self.block, rep)


def job_script(spec: RunSpec, campaign: Campaign) -> str:
    partition = f"#SBATCH --partition={campaign.partition}\n" if campaign.partition else ""
    return (
        "#!/bin/bash\n"
        "#SBATCH --job-name=ptc-hpcc\n"
        f"#SBATCH --nodes={spec.nodes}\n"
        f"#SBATCH --ntasks-per-node={spec.tasks_per_node}\n"
        "#SBATCH --output=slurm-%j.out\n"
        f"{partition}"
        "set -eu\n"
        "rm -f hpccoutf.txt\n"
        f"{campaign.launcher} hpcc\n"
    )


def run(
    exp: Experiment, campaign: Campaign, out: Path, console: Console | None = None
) -> list[dict[str, Any]]:
    console = console or Console(stderr=True)
    remote = slurm_job.Remote(exp.ssh_config_path, "head")
    campaign_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    specs = list(campaign.runs())
    rows: list[dict[str, Any]] = []
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} runs"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("hpcc campaign", total=len(specs))
        for index, spec in enumerate(specs):
            label = f"hpcc {spec.nodes}x{spec.tasks_per_node} N={spec.n} #{spec.repeat}"
            progress.update(task, description=f"{label}: submitting")
            row = _one(
                remote,
                exp,
                campaign,
                spec,
                f"{campaign_id}-{index}",
                lambda s, label=label: progress.update(task, description=f"{label}: {s}"),
            )
            row["campaign"] = campaign_id
            dataset.append(out, row)
            rows.append(row)
            progress.advance(task)
    return rows


def _one(
    remote: slurm_job.Remote,
    exp: Experiment,
    campaign: Campaign,
    spec: RunSpec,
    run_id: str,
    on_state: Any,
) -> dict[str, Any]:
    workdir = f"/home/{campaign.user}/ptc-runs/{run_id}"
    deck = hpcc.Deck(ranks=spec.ranks, n=spec.n, nb=spec.nb)
    remote.run(
        slurm_job.as_user(
            campaign.user,
            f"mkdir -p {shlex.quote(workdir)} && cat > {shlex.quote(workdir)}/hpccinf.txt",
        ),
        stdin=deck.render(),
    )
    job_id = slurm_job.submit(remote, campaign.user, workdir, job_script(spec, campaign))
    result = slurm_job.wait(remote, job_id, campaign.timeout_s, on_state)
    row: dict[str, Any] = {
        "run_id": run_id,
        "experiment": exp.name,
        "testbed": exp.testbed,
        "site": exp.site,
        "benchmark": "hpcc",
        "submitted_at": time.time(),
        "workdir": workdir,
        **{k: v for k, v in asdict(spec).items()},
        "ranks": spec.ranks,
        "grid_p": deck.grid()[0],
        "grid_q": deck.grid()[1],
        "job_id": job_id,
        "state": result.state,
        "exit_code": result.exit_code,
        "elapsed_s": result.elapsed_s,
        "nodelist": result.nodelist,
        "error": "",
    }
    try:
        # Read from the controller: the output must have landed on the shared /home.
        text = remote.run(f"cat {shlex.quote(workdir)}/hpccoutf.txt")
        row.update(hpcc.parse_summary(text, f"head:{workdir}/hpccoutf.txt"))
    except PtcError as err:
        row["error"] = str(err)
    return row
