"""The ec2 sites' instances against Slurm's nodes on the client's timer, against moto's server:
orphans terminated after a grace period, lost nodes powered down with EC2's reason."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from support.ec2_faults import SPOT_REASON, InjectedFaults

from elastic.errors import InputError
from elastic.events import Event, collect
from elastic.sites.ec2.clients import Ec2Client
from elastic.sites.ec2.control import Ec2Control
from elastic.sites.ec2.provider import Ec2Provider
from elastic.sites.ec2.userdata import JoinSpec
from elastic.slurm.commands import Slurm
from elastic.slurm.ec2_sync import Ec2Sync, ec2_controls

NODES = ("ec2-0", "ec2-1", "ec2-2")
JOIN = JoinSpec(munge_key="/etc/munge/munge.key", slurm_conf="/etc/slurm/slurm.conf")


class FakeSlurm:
    """sinfo's node states as a test sets them; every scontrol update recorded."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states
        self.updates: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        if argv[0] == "sinfo":
            return "".join(f"{n}|{s}\n" for n, s in self.states.items())
        self.updates.append(list(argv))
        return ""


def live(ec2: Ec2Client, cluster: str) -> dict[str, str]:
    answer = ec2.describe_instances(Filters=[{"Name": "tag:ptc:cluster", "Values": [cluster]}])
    found = {}
    for raw in (i for r in answer["Reservations"] for i in r["Instances"]):
        if raw["State"]["Name"] not in ("terminated", "shutting-down"):
            node = next(t["Value"] for t in raw["Tags"] if t["Key"] == "ptc:node")
            found[raw["InstanceId"]] = node
    return found


def sync(
    provider: Ec2Provider,
    faults: InjectedFaults,
    cluster: str,
    slurm: FakeSlurm,
    events: list[Event] | None = None,
    busy: Sequence[str] = (),
) -> tuple[Ec2Control, Ec2Sync]:
    control = Ec2Control(provider, cluster, "east", NODES, lambda node: JOIN)
    return control, Ec2Sync(
        Slurm(slurm),
        [control],
        grace_s=300,
        busy=lambda: busy,
        now=faults.clock.now,
        on_event=collect(events) if events is not None else None,
    )


def test_an_instance_no_node_stands_for_is_terminated_after_the_grace_period(
    provider: Ec2Provider, faults: InjectedFaults, ec2: Ec2Client, cluster: str
) -> None:
    slurm = FakeSlurm({"ec2-0": "idle", "ec2-1": "idle~", "ec2-2": "idle~"})
    events: list[Event] = []
    control, syncer = sync(provider, faults, cluster, slurm, events)
    control.allocate(["ec2-0", "ec2-1"], "r1")  # ec2-1's resume: its controller died after it
    assert syncer.round().terminated == {}  # young: a launch in flight
    faults.clock.advance(301)
    done = syncer.round()
    assert list(live(ec2, cluster).values()) == ["ec2-0"]
    assert [live_id for live_id in done.terminated["east"]]
    assert slurm.updates == []
    (event,) = [e for e in events if "orphan" in e.message]
    assert event.data["action"] == "terminated" and event.data["node"] == "ec2-1"


def test_a_node_up_in_slurm_whose_instance_ended_is_powered_down_with_ec2_s_reason(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str
) -> None:
    slurm = FakeSlurm({"ec2-0": "allocated", "ec2-1": "idle", "ec2-2": "down"})
    control, syncer = sync(provider, faults, cluster, slurm)
    made = control.allocate(["ec2-0", "ec2-1"], "r1")["instances"]
    faults.interrupt_spot(made["ec2-0"])
    done = syncer.round()
    assert sorted(done.powered_down) == ["ec2-0", "ec2-2"]  # ec2-2: DOWN, never launched
    (first, second) = slurm.updates
    assert first[:4] == ["scontrol", "update", "NodeName=ec2-0", "State=POWER_DOWN_FORCE"]
    assert first[4] == f"Reason=ptc ec2: instance {made['ec2-0']} terminated, {SPOT_REASON}"
    assert second[2:4] == ["NodeName=ec2-2", "State=POWER_DOWN_FORCE"]
    assert "no instance missing" in second[4]


@pytest.mark.parametrize("state", ["idle#", "idle%", "idle~", "mixed#"])
def test_nodes_on_their_way_up_or_down_or_at_rest_are_the_hooks_business(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, state: str
) -> None:
    slurm = FakeSlurm({"ec2-0": state})
    _, syncer = sync(provider, faults, cluster, slurm)
    assert syncer.round().powered_down == {} and slurm.updates == []


def test_a_suspend_that_ends_the_instance_during_the_round_is_no_loss(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str
) -> None:
    """Slurm read first (the node idle), EC2 next (its instance ended by the suspend that has
    begun meanwhile): Slurm, read again, has the node powering down, and nothing is done."""
    slurm = FakeSlurm({"ec2-0": "idle"})
    control, syncer = sync(provider, faults, cluster, slurm)
    control.allocate(["ec2-0"], "r1")
    reads = 0
    answer = slurm.__call__

    def suspended_after_the_first_read(argv: Sequence[str]) -> str:
        nonlocal reads
        if argv[0] == "sinfo":
            reads += 1
            if reads == 2:
                slurm.states["ec2-0"] = "idle%"
        if argv[0] == "sinfo" and reads == 1:
            shown = answer(argv)
            control.release(["ec2-0"], "r2")  # the suspend's terminate, between the two reads
            return shown
        return answer(argv)

    syncer.slurm = Slurm(suspended_after_the_first_read)
    assert syncer.round().powered_down == {} and slurm.updates == []
    assert reads == 2


def test_a_node_under_repair_is_left_alone(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str
) -> None:
    slurm = FakeSlurm({"ec2-0": "drained"})
    _, syncer = sync(provider, faults, cluster, slurm, busy=["ec2-0"])
    assert syncer.round().powered_down == {} and slurm.updates == []


def test_a_site_ec2_will_not_answer_is_skipped_and_said_so(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str
) -> None:
    class Broken:
        def describe(self, *args: Any) -> None:
            from elastic.sites.ec2.errors import Ec2Error

            raise Ec2Error("ec2 site 'east': describe failed: AuthFailure", site="east",
                           operation="describe", code="AuthFailure")  # fmt: skip

    slurm = FakeSlurm({"ec2-0": "idle"})
    control, syncer = sync(provider, faults, cluster, slurm)
    control.provider = Broken()  # type: ignore[assignment]
    done = syncer.round()
    assert "AuthFailure" in done.failed["east"] and slurm.updates == []


def test_bad_timings_are_refused_and_the_controls_are_found_on_the_dispatch(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str
) -> None:
    control, _ = sync(provider, faults, cluster, FakeSlurm({}))
    with pytest.raises(InputError, match="grace_s: -1"):
        Ec2Sync(Slurm(FakeSlurm({})), [control], grace_s=-1)

    class Site:
        def __init__(self, control: object) -> None:
            self.control = control

    class Dispatch:
        def __init__(self) -> None:
            self.sites = [("east", Site(control)), ("here", Site(object()))]

    assert ec2_controls(Dispatch()) == [control]
    assert ec2_controls(object()) == []


def test_the_client_runs_the_round_on_its_timer_only_with_an_ec2_site(
    provider: Ec2Provider, faults: InjectedFaults, cluster: str, tmp_path: Any
) -> None:
    from types import SimpleNamespace

    from elastic.slurm import service

    control, _ = sync(provider, faults, cluster, FakeSlurm({}))
    site = SimpleNamespace(control=control)
    client: Any = SimpleNamespace(
        provisioner=SimpleNamespace(sites=[("east", site)]),
        slurm=Slurm(FakeSlurm({})),
        under_repair={"ec2-2"},
    )
    settings = service.SlurmClientSettings(
        manager_url="https://x:1",
        token_file=tmp_path / "t",
        extra={"ec2": {"sync_interval": 30, "orphan_grace": 120}},
    )
    built = service.build_ec2_sync(settings, client)
    assert built is not None and (built.interval, built.grace_s) == (30.0, 120.0)
    assert set(built.busy()) == {"ec2-2"}
    client.provisioner = SimpleNamespace(sites=[])
    assert service.build_ec2_sync(settings, client) is None
