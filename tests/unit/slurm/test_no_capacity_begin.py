"""A job requeued because its nodes' site had no capacity begins at once: Slurm 22.05 gives a
requeued job a begin time two minutes ahead, for its old nodes to clean up, but those nodes never
booted, and the job could go to another site's nodes meanwhile."""

from __future__ import annotations

from collections.abc import Sequence

from fake_slurm import Job
from slurm_env import World

from elastic.events import Event, Kind, Reporter, collect
from elastic.slurm.client import REQUEUE_LOOKS
from elastic.slurm.commands import REQUEUE_DELAY_S, SlurmCommandError


def _events(world: World) -> list[Event]:
    events: list[Event] = []
    world.client.report = Reporter("slurm-elastic", collect(events))
    world.slurm.clock = world.clock  # begin times on the client's clock
    return events


def _full_site(world: World) -> None:
    """node-2's site has no free machine; job 5 waits for node-2 while it powers up."""
    world.prov.full = {"node-2"}
    world.prov.held = {"ptc-paused-dear": ["node-2", "node-3"]}
    world.slurm.jobs = [Job("5", ["node-2"], state="CONFIGURING")]


def _messages(events: list[Event], kind: Kind) -> list[str]:
    return [e.message for e in events if e.kind is kind]


def test_the_job_that_waited_for_a_full_site_is_pending_and_eligible_at_once(
    world: World,
) -> None:
    events = _events(world)
    _full_site(world)
    result = world.client.resume("node-2")
    assert result.ready == [] and list(result.failed) == ["node-2"]
    job = world.slurm.jobs[0]
    assert job.state == "PENDING"
    assert job.eligible is not None and job.eligible <= world.clock() + REQUEUE_DELAY_S
    update = ["scontrol", "update", "JobId=5", f"StartTime=now+{REQUEUE_DELAY_S}"]
    assert world.slurm.calls.index(update) > world.slurm.calls.index(
        next(c for c in world.slurm.calls if "State=POWER_DOWN_FORCE" in c)
    )
    assert f"job 5 begins in {REQUEUE_DELAY_S} s: its nodes' site had no capacity" in _messages(
        events, Kind.STATUS
    )


def test_the_client_waits_a_moment_for_the_requeue(world: World) -> None:
    """Slurm requeues the job as it powers the node down, but it may show the job completing
    for a moment first: the client looks again, on its own clock (no real sleep here)."""
    events = _events(world)
    _full_site(world)
    world.slurm.requeue_lag = REQUEUE_LOOKS - 1
    before = world.clock()
    world.client.resume("node-2")
    job = world.slurm.jobs[0]
    assert (
        job.state == "PENDING"
        and job.eligible is not None
        and job.eligible <= world.clock() + REQUEUE_DELAY_S
    )
    assert world.clock() > before
    assert f"job 5 begins in {REQUEUE_DELAY_S} s: its nodes' site had no capacity" in _messages(
        events, Kind.STATUS
    )


def test_a_job_not_requeued_in_time_keeps_slurms_begin_time_with_a_warning(world: World) -> None:
    events = _events(world)
    _full_site(world)
    world.slurm.requeue_lag = REQUEUE_LOOKS
    result = world.client.resume("node-2")
    assert list(result.failed) == ["node-2"]
    job = world.slurm.jobs[0]
    assert job.eligible is not None and job.eligible > world.clock() + REQUEUE_DELAY_S
    assert not any(c[:3] == ["scontrol", "update", "JobId=5"] for c in world.slurm.calls)
    assert any(m.startswith("job 5: not requeued") for m in _messages(events, Kind.WARNING))


def test_another_pending_job_keeps_its_own_begin_time(world: World) -> None:
    events = _events(world)
    _full_site(world)
    later = world.clock() + 3600
    # a user's ``--begin``, pending for node-3 of the same site, and a job running elsewhere
    world.slurm.jobs += [
        Job("6", ["node-3"], state="PENDING", eligible=later),
        Job("7", ["node-0"]),
    ]
    world.client.resume("node-2")
    six, seven = world.slurm.jobs[1:]
    assert six.state == "PENDING" and six.eligible == later
    assert seven.state == "RUNNING" and seven.eligible is None
    touched = [c[2] for c in world.slurm.calls if c[:2] == ["scontrol", "update"]]
    assert "JobId=6" not in touched and "JobId=7" not in touched
    assert not any(c[:3] == ["scontrol", "show", "job"] and c[-1] != "5" for c in world.slurm.calls)
    began = [m for m in _messages(events, Kind.STATUS) if "begins in" in m]
    assert began == [f"job 5 begins in {REQUEUE_DELAY_S} s: its nodes' site had no capacity"]


def test_a_failing_scontrol_update_is_a_warning_and_the_resume_goes_on(world: World) -> None:
    events = _events(world)
    _full_site(world)
    fake = world.slurm

    def refusing(argv: Sequence[str]) -> str:
        if list(argv[:3]) == ["scontrol", "update", "JobId=5"]:
            fake.calls.append(list(argv))
            raise SlurmCommandError(argv, 1, "slurm_update error: Access/permission denied")
        return fake(argv)

    world.client.slurm.run = refusing
    result = world.client.resume("node-[1-2]")
    assert result.ready == ["node-1"] and list(result.failed) == ["node-2"]
    assert world.slurm.reasons["node-2"].startswith("ptc resume: power on: no free machine")
    assert world.owners()["node-2"] is None and world.owners()["node-1"] == "slurm"
    job = fake.jobs[0]
    assert (
        job.state == "PENDING"
        and job.eligible is not None
        and job.eligible > world.clock() + REQUEUE_DELAY_S
    )
    assert ["scontrol", "update", "JobId=5", f"StartTime=now+{REQUEUE_DELAY_S}"] in fake.calls
    warnings = _messages(events, Kind.WARNING)
    assert any(m.startswith("job 5: could not make it begin sooner:") for m in warnings)
    assert not any("begins in" in m for m in _messages(events, Kind.STATUS))
    assert any(e.kind is Kind.END and "ready ['node-1']" in e.message for e in events)


def test_a_lookup_that_fails_is_a_warning_too(world: World) -> None:
    events = _events(world)
    _full_site(world)
    fake = world.slurm

    def no_jobs(argv: Sequence[str]) -> str:
        if argv[0] == "squeue" and "--nodelist" in argv:
            raise SlurmCommandError(argv, 1, "slurm_load_jobs error: Socket timed out")
        return fake(argv)

    world.client.slurm.run = no_jobs
    result = world.client.resume("node-2")
    assert list(result.failed) == ["node-2"] and fake.states["node-2"] == "idle~"
    assert any(m.startswith("jobs on node-2:") for m in _messages(events, Kind.WARNING))
