"""The manager's pool against the testbed: every disagreement, named, and its repair.

The manager says who holds each pool node; the testbed says which of the experiment's nodes
exist (or are parked by its partition, their machines free until a resume takes them back),
and the loan book which machines are lent where. They agree when every pool node is in
the experiment, or is lent (a loan in the state ``lent``, its node present in the other
experiment) and held by the reference partition. The kinds of disagreement:

``lent-but-free``           lent by the testbed, free in the manager (Slurm could resume it)
``lent-but-held``           lent by the testbed, held by another partition (Slurm's)
``loan-gone``               held as lent, but the other experiment no longer has the node
``machine-back``            held as lent, but the machine is back in the experiment
``other-gone``              a loan to an experiment that no longer exists
``unfinished``              a lend or give-back that stopped half-way
``missing-from-testbed``    a pool node the experiment no longer has, and no loan says why

Repairs: the first two make the manager hold the node for the reference partition; a missing
node is allocated again and deployed; every other kind finishes the give-back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from elastic.events import OnEvent
from elastic.lending import loan as lending
from elastic.lending.ports import REFERENCE, Pool, Testbed
from elastic.testbed.loans import Loan, LoanBook

GIVE_BACK = ("other-gone", "unfinished", "machine-back", "loan-gone")
TAKE = ("lent-but-free", "lent-but-held")


@dataclass(frozen=True)
class Disagreement:
    kind: str
    node: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def find(
    owners: Mapping[str, str | None],
    exp_nodes: set[str],
    loans: Mapping[str, Loan],
    others: Mapping[str, set[str] | None],
) -> list[Disagreement]:
    """The disagreements between the manager (``owners``), the experiment's nodes, its
    ``loans`` and the nodes of the experiments they go to (``others``; None: no such
    experiment)."""
    found: list[Disagreement] = []
    for node, owner in sorted(owners.items()):
        loan = loans.get(node)
        if loan is None:
            if node not in exp_nodes:
                found.append(
                    Disagreement(
                        "missing-from-testbed",
                        node,
                        f"the experiment has no node {node} and no loan names it; "
                        f"the manager shows it {_held(owner)}",
                    )
                )
            continue
        found += _of_loan(loan, owner, exp_nodes, others.get(loan.other))
    for node, loan in sorted(loans.items()):
        if node not in owners:
            found.append(
                Disagreement(
                    "unfinished" if loan.state != "lent" else "machine-back",
                    node,
                    f"a loan to {loan.other} of a node the manager's pool does not have",
                )
            )
    return found


def _of_loan(
    loan: Loan, owner: str | None, exp_nodes: set[str], other: set[str] | None
) -> list[Disagreement]:
    node, to = loan.node, f"{loan.other}/{loan.name}"
    if other is None:
        return [Disagreement("other-gone", node, f"lent to {loan.other}, which no longer exists")]
    if loan.state != "lent":
        return [Disagreement("unfinished", node, f"a loan to {to} stopped while {loan.state}")]
    if node in exp_nodes:
        return [Disagreement("machine-back", node, f"lent to {to}, yet back in the experiment")]
    if loan.name not in other:
        return [Disagreement("loan-gone", node, f"lent to {to}, which {loan.other} no longer has")]
    if owner is None:
        return [Disagreement("lent-but-free", node, f"lent to {to}, free in the manager")]
    if owner != REFERENCE:
        return [Disagreement("lent-but-held", node, f"lent to {to}, held by partition {owner}")]
    return []


def _held(owner: str | None) -> str:
    return "free" if owner is None else f"held by partition {owner}"


def check(pool: Pool, testbed: Testbed, book: LoanBook, exp: str) -> list[Disagreement]:
    loans = book.all()
    others = {
        loan.other: set(testbed.nodes(loan.other)) if testbed.exists(loan.other) else None
        for loan in loans.values()
    }
    # a node its partition parked is the experiment's still (its machine comes back at resume)
    held = set(testbed.nodes(exp)) | set(testbed.parked(exp))
    return find(pool.owners(), held, loans, others)


@dataclass(frozen=True)
class Repair:
    node: str
    kinds: tuple[str, ...]
    action: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def repair(
    pool: Pool,
    testbed: Testbed,
    book: LoanBook,
    exp: str,
    found: list[Disagreement],
    on_event: OnEvent | None = None,
) -> list[Repair]:
    """Fix each node's disagreements with one action; what was done, node by node."""
    kinds: dict[str, list[str]] = {}
    for d in found:
        kinds.setdefault(d.node, []).append(d.kind)
    done = []
    for node, ks in kinds.items():
        if any(k in GIVE_BACK for k in ks):
            lending.give_back(pool, testbed, book, exp, node, on_event)
            action = "gave the machine back to the experiment and the pool"
        elif any(k in TAKE for k in ks):
            pool.take(node)
            action = f"the manager holds it for partition {REFERENCE}, as lent"
        else:  # missing-from-testbed
            testbed.allocate(exp, node, None)
            testbed.configure(exp, node)
            action = "allocated it again and deployed it"
        done.append(Repair(node, tuple(ks), action))
    return done
