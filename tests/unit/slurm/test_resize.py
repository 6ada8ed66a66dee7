"""Expanding and contracting a running job: the Slurm commands asked for, in order, and the
refusals that leave the job alone (no command that changes anything is sent)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from elastic.errors import PtcError
from elastic.slurm.commands import Slurm, SlurmCommandError
from elastic.slurm.elastic_job import main
from elastic.slurm.resize import (
    REVOCATION_MARGIN_S,
    Resizer,
    ResizeRefused,
    cpu_count,
    environment_script,
    hostfile,
    in_environment,
    parse_job,
    repeated,
)

CHANGES = ("salloc", "scancel", "update")


@dataclass
class FakeSlurm:
    """A job on a 4-node partition as scontrol shows it; changes the commands make are kept."""

    nodes: list[str] = field(default_factory=lambda: ["node-1"])
    state: str = "RUNNING"
    limit: str = "00:30:00"
    sent: list[list[str]] = field(default_factory=list)
    salloc_fails: bool = False
    helpers: str = "43\n"

    def __call__(self, argv: Sequence[str]) -> str:
        argv = list(argv)
        self.sent.append(argv)
        match argv:
            case ["scontrol", "show", "job", "-d", "-o", "42"]:
                details = "".join(f" Nodes={n} CPU_IDs=0-1 Mem=100 GRES=" for n in self.nodes)
                return (
                    f"JobId=42 JobName=wf JobState={self.state} Partition=main "
                    f"TimeLimit={self.limit} NodeList={self._hostlist()} "
                    f"BatchHost={self.nodes[0] if self.nodes else '(null)'} NumNodes={len(self.nodes)}"
                    f"{details} MinCPUsNode=1"
                )
            case ["scontrol", "show", "job", "-d", "-o", other]:
                raise SlurmCommandError(argv, 1, f"Invalid job id specified {other}")
            case ["scontrol", "show", "partition", "-o", "main"]:
                return "PartitionName=main Nodes=node-[0-3] TotalNodes=4 TotalCPUs=8"
            case ["scontrol", "show", "hostnames", hostlist]:
                return "\n".join(self._names(hostlist))
            case ["scontrol", "show", "hostlist", names]:
                return names  # a plain comma list is a valid hostlist too
            case ["salloc", *options]:
                if self.salloc_fails:
                    raise SlurmCommandError(argv, 1, "Unable to allocate resources: Immediate")
                count = int(next(o for o in options if o.startswith("--nodes="))[8:])
                excluded = next(o for o in options if o.startswith("--exclude="))[10:].split(",")
                self.helper = [n for n in ("node-0", "node-1", "node-2", "node-3")
                               if n not in excluded][:count]  # fmt: skip
                return ""
            case ["squeue", "--noheader", "--name=ptc-expand-42", "--format=%A"]:
                return self.helpers
            case ["scontrol", "update", "JobId=43", "NumNodes=0"] | ["scancel", "43" | "44"]:
                return ""
            case ["scontrol", "update", "JobId=42", "NumNodes=ALL"]:
                self.nodes += self.helper
                return ""
            case ["scontrol", "update", "JobId=42", nodelist]:
                self.nodes = self._names(nodelist.removeprefix("NodeList="))
                return ""
        raise AssertionError(f"unexpected command {argv}")

    def _hostlist(self) -> str:
        return ",".join(self.nodes) if self.nodes else "(null)"

    @staticmethod
    def _names(hostlist: str) -> list[str]:
        return [n for n in hostlist.split(",") if n]

    def changes(self) -> list[list[str]]:
        return [a for a in self.sent if a[0] in CHANGES or a[:2] == ["scontrol", "update"]]


def test_expand_allocates_the_missing_nodes_away_from_the_job_and_merges_them() -> None:
    slurm = FakeSlurm()
    assert Resizer(slurm, wait_for_nodes_s=45).expand("42", 3).nodes == (
        "node-1",
        "node-0",
        "node-2",
    )
    salloc, *rest = slurm.changes()
    assert salloc[0] == "salloc" and "--no-shell" in salloc
    for option in ("--nodes=2", "--partition=main", "--exclude=node-1",
                   "--dependency=expand:42", "--time=00:30:00", "--immediate=45",
                   "--wait-all-nodes=1", "--job-name=ptc-expand-42"):  # fmt: skip
        assert option in salloc, (option, salloc)
    assert rest == [
        ["scontrol", "update", "JobId=43", "NumNodes=0"],
        ["scancel", "43"],
        ["scontrol", "update", "JobId=42", "NumNodes=ALL"],
    ]


def test_expand_of_a_job_without_a_time_limit_asks_for_none() -> None:
    slurm = FakeSlurm(limit="UNLIMITED")
    Resizer(slurm).expand("42", 2)
    assert not any(o.startswith("--time") for o in slurm.changes()[0])


def waits(now: float = 1000.4) -> tuple[list[float], dict[str, object]]:
    """A clock stopped at ``now`` and a sleep that records what it was asked."""
    slept: list[float] = []
    return slept, {"clock": lambda: now, "sleep": slept.append}


def test_contract_keeps_the_batch_host_and_first_nodes() -> None:
    slurm = FakeSlurm(nodes=["node-1", "node-0", "node-2"])
    slept, clock = waits()
    assert Resizer(slurm, **clock).contract("42", 2).nodes == ("node-1",)  # type: ignore[arg-type]
    assert slurm.changes() == [["scontrol", "update", "JobId=42", "NodeList=node-1"]]
    assert slept


@pytest.mark.parametrize("now", [1000.0, 1000.4, 1000.999])
def test_a_shrink_returns_only_past_its_second(now: float) -> None:
    """The nodes let go refuse the job's credentials of that second: a step on them after an
    expansion that takes them back must come from a later second."""
    slept, clock = waits(now)
    Resizer(FakeSlurm(nodes=["node-1", "node-0"]), **clock).contract("42", 1)  # type: ignore[arg-type]
    assert len(slept) == 1
    assert int(now + slept[0]) > int(now)
    assert slept[0] == pytest.approx(1001 + REVOCATION_MARGIN_S - now)


def test_done_gives_back_all_but_the_batch_host() -> None:
    slurm = FakeSlurm(nodes=["node-2", "node-0", "node-3"])
    slept, clock = waits()
    assert Resizer(slurm, **clock).done("42").nodes == ("node-2",)  # type: ignore[arg-type]
    alone = FakeSlurm(nodes=["node-2"])
    assert Resizer(alone, **clock).done("42").nodes == ("node-2",)  # type: ignore[arg-type]
    assert alone.changes() == [] and len(slept) == 1  # nothing let go, nothing to wait out


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.expand("42", 5), r"^--to: 5 is more than partition main's 4 node\(s\)"),
        (lambda r: r.expand("42", 2), r"^--to: 2 is not more than job 42's 2 node\(s\)"),
        (lambda r: r.expand("42", True), r"^--to: True is not more"),
        (lambda r: r.contract("42", 2), r"^--by: 2 would leave job 42 with 0 node\(s\)"),
        (lambda r: r.contract("42", 0), r"^--by: 0 is not a whole number of nodes >= 1"),
        (lambda r: r.expand("4x", 3), r"^job: '4x' is not a job id"),
    ],
)
def test_refusals_name_the_parameter_and_change_nothing(call: object, message: str) -> None:
    slurm = FakeSlurm(nodes=["node-1", "node-0"])
    with pytest.raises(ResizeRefused, match=message):
        call(Resizer(slurm))  # type: ignore[operator]
    assert slurm.changes() == [] and slurm.nodes == ["node-1", "node-0"]


def test_a_job_that_is_not_running_is_not_resized() -> None:
    slurm = FakeSlurm(state="PENDING", nodes=[])
    with pytest.raises(ResizeRefused, match=r"^job: 42 is PENDING, not RUNNING"):
        Resizer(slurm).expand("42", 2)
    assert slurm.changes() == []


def test_an_expansion_slurm_cannot_place_leaves_the_job_as_it_was() -> None:
    slurm = FakeSlurm(salloc_fails=True)
    with pytest.raises(SlurmCommandError, match="Immediate"):
        Resizer(slurm).expand("42", 3)
    assert [c[0] for c in slurm.changes()] == ["salloc"] and slurm.nodes == ["node-1"]


def test_two_helper_allocations_are_both_cancelled_and_the_job_is_left_as_it_was() -> None:
    slurm = FakeSlurm(helpers="43\n44\n")
    with pytest.raises(PtcError, match=r"found 2 \(43, 44\); cancelled them, the job is unchanged"):
        Resizer(slurm).expand("42", 3)
    assert slurm.changes()[1:] == [["scancel", "43"], ["scancel", "44"]]
    assert slurm.nodes == ["node-1"]


def test_hostfile_lists_one_node_per_line() -> None:
    assert hostfile(("node-1", "node-0")) == "node-1\nnode-0\n"


def test_the_command_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    for argv, message in (
        (["expand", "--to", "3"], "--job: no job given and SLURM_JOB_ID is not set"),
        (["expand", "--job", "42"], "expand: --to N is missing"),
        (["contract", "--job", "42"], "contract: --by K is missing"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err


# One line of ``scontrol show job -d -o`` on the elastic test cluster (a 2-node job).
SHOWN = (
    "JobId=4 JobName=wrap UserId=ptc(2000) JobState=RUNNING Partition=main "
    "ReqNodeList=(null) ExcNodeList=(null) NodeList=node-[0-1] BatchHost=node-0 NumNodes=2 "
    "NumCPUs=2 NumTasks=2 CPUs/Task=1 JOB_GRES=(null)   Nodes=node-[0-1] CPU_IDs=0 Mem=10004 "
    "GRES= MinCPUsNode=1 WorkDir=/home/ptc"
)


def test_a_job_s_allocation_is_read_from_slurm_s_details() -> None:
    shape = parse_job(SHOWN, "4", Slurm(lambda argv: "node-0\nnode-1\n"))
    assert (shape.nodes, shape.hostlist, shape.cpus) == (("node-0", "node-1"), "node-[0-1]", (1, 1))


@pytest.mark.parametrize(("ids", "count"), [("0", 1), ("0-1", 2), ("0-1,4", 3), ("0,2-3,6-7", 5)])
def test_cpu_ids_are_counted(ids: str, count: int) -> None:
    assert cpu_count(ids) == count


@pytest.mark.parametrize(
    ("counts", "text"), [((1,), "1"), ((1, 1), "1(x2)"), ((2, 1, 1, 2), "2,1(x2),2")]
)
def test_per_node_counts_take_slurm_s_repeated_form(counts: tuple[int, ...], text: str) -> None:
    assert repeated(counts) == text


def test_after_an_expansion_the_job_s_environment_is_its_new_allocation() -> None:
    """What the job sources (or a step it launches runs with): Slurm's resize script's
    settings, for the job as it is now, so that srun inside the job sees its new width."""
    slurm = FakeSlurm()
    resizer = Resizer(slurm)
    resizer.expand("42", 3)
    shape = resizer.job("42")
    script = environment_script(shape)
    assert "export SLURM_JOB_NODELIST=node-1,node-0,node-2\n" in script
    assert "export SLURM_NNODES=3\n" in script and "export SLURM_JOB_NUM_NODES=3\n" in script
    assert "export SLURM_JOB_CPUS_PER_NODE='2(x3)'\n" in script
    assert script.endswith("unset SLURM_NPROCS SLURM_NTASKS SLURM_TASKS_PER_NODE\n")
    argv = in_environment(shape, ["srun", "-N3", "hostname"])
    assert argv[0] == "env" and argv[-3:] == ["srun", "-N3", "hostname"]
    assert "--unset=SLURM_NTASKS" in argv and "SLURM_JOB_NUM_NODES=3" in argv


def test_the_command_writes_the_host_file_and_the_environment_after_a_contraction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slurm = FakeSlurm(nodes=["node-1", "node-0", "node-2"])
    monkeypatch.setattr("elastic.slurm.elastic_job.subprocess_runner", lambda **_: slurm)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    hosts, env = tmp_path / "hosts", tmp_path / "env.sh"
    assert main(["contract", "--by", "2", "--hostfile", str(hosts), "--env", str(env)]) == 0
    assert capsys.readouterr().out == "node-1\n" == hosts.read_text()
    assert "export SLURM_NNODES=1\n" in env.read_text()
    assert slurm.nodes == ["node-1"]


def test_a_host_file_or_environment_that_cannot_be_written_is_refused_before_the_job_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slurm = FakeSlurm(nodes=["node-1", "node-0"])
    monkeypatch.setattr("elastic.slurm.elastic_job.subprocess_runner", lambda **_: slurm)
    for option in ("--hostfile", "--env"):
        with pytest.raises(SystemExit) as exit_:
            main(["contract", "--job", "42", "--by", "1", option, str(tmp_path / "no" / "f")])
        assert exit_.value.code == 2
        assert f"{option}: cannot write in {tmp_path / 'no'}" in capsys.readouterr().err
    assert slurm.changes() == [] and slurm.nodes == ["node-1", "node-0"]
