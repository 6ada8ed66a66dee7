"""The realiser's decisions, from the instances the region describes and the machines held."""

from __future__ import annotations

from elastic.testbed.backends.local.fake_ec2.realiser import (
    Boot,
    Create,
    Held,
    Refuse,
    Remove,
    Seen,
    decide,
)

SUBNET = "subnet-1"


def seen(iid: str, node: str | None, state: str = "pending", *, launched: float = 100.0,
         subnet: str | None = SUBNET, address: str | None = "10.10.1.132") -> Seen:  # fmt: skip
    return Seen(iid, state, node, address, subnet, launched)


def held(iid: str, node: str, *, booted: bool = False, launched: float = 100.0) -> Held:
    return Held(iid, node, "10.10.1.132", launched, booted=booted)


def run(instances: list[Seen], machines: list[Held], now: float = 100.0, delay: float = 30.0,
        reserved: tuple[str, ...] = ("head",)) -> list[object]:  # fmt: skip
    return list(decide(instances, {h.instance_id: h for h in machines}, subnet_id=SUBNET,
                       reserved=reserved, now=now, boot_delay=delay))  # fmt: skip


def test_a_new_instance_gets_a_machine_and_boots_only_after_the_delay() -> None:
    i = seen("i-1", "node-3")
    assert run([i], []) == [Create(i)]
    assert run([i], [held("i-1", "node-3")], now=129.0) == []
    assert run([i], [held("i-1", "node-3")], now=130.0) == [Boot("i-1")]
    assert run([seen("i-1", "node-3", "running")], [held("i-1", "node-3", booted=True)],
               now=500.0) == []  # fmt: skip


def test_an_ended_or_vanished_instance_loses_its_machine() -> None:
    for state in ("stopping", "stopped", "shutting-down", "terminated"):
        assert run([seen("i-1", "node-3", state)], [held("i-1", "node-3", booted=True)]) == [
            Remove("i-1", "node-3")
        ]
    assert run([], [held("i-1", "node-3")]) == [Remove("i-1", "node-3")]
    assert run([seen("i-9", "x", "terminated")], []) == []  # ended before it was realised


def test_instances_that_cannot_be_realised_are_refused_with_the_reason() -> None:
    actions = run(
        [
            seen("i-1", None),
            seen("i-2", "Node_3"),
            seen("i-3", "head"),
            seen("i-4", "node-4", subnet="subnet-default"),
            seen("i-5", "node-5", launched=1.0),
            seen("i-6", "node-5", launched=2.0),
        ],
        [],
    )
    assert [a for a in actions if isinstance(a, Create)] == [Create(seen("i-5", "node-5",
                                                                        launched=1.0))]  # fmt: skip
    refused = {a.instance_id: a.why for a in actions if isinstance(a, Refuse)}
    assert refused == {
        "i-1": "it has no ptc:node tag (the Slurm node it is)",
        "i-2": "its ptc:node 'Node_3' is no node name (lowercase letters, digits, dashes)",
        "i-3": "its ptc:node 'head' is a node of the experiment",
        "i-4": "it is not in the region's subnet subnet-1 (it is in subnet-default)",
        "i-6": "its ptc:node 'node-5' is instance i-5's",
    }


def test_a_node_name_held_by_a_live_machine_is_refused_but_an_ended_ones_is_free() -> None:
    old = held("i-1", "node-3", booted=True)
    again = seen("i-2", "node-3", launched=200.0)
    assert run([seen("i-1", "node-3", "running"), again], [old], now=200.0) == [
        Refuse("i-2", "its ptc:node 'node-3' is instance i-1's")
    ]
    assert run([seen("i-1", "node-3", "terminated"), again], [old], now=200.0) == [
        Remove("i-1", "node-3"),
        Create(again),
    ]
