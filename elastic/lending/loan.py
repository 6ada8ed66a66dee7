"""Lend pool machines to another experiment and give them back.

Lending: the reference partition acquires the nodes through the manager (the preemption-vector
protocol: grace period, requeue, wasted cycles logged), then each machine leaves the lender's
testbed experiment and a node joins the other experiment in its place. Giving back: that node
leaves the other experiment, the lender's node is allocated again (a fresh disk, same name and
address), deployed with the lender's head, and released to the pool, where Slurm can grow into
it. Each step first looks whether it is done already, so a command interrupted half-way is
finished by running it again (or by the reconciler).
"""

from __future__ import annotations

from collections.abc import Sequence

from elastic.errors import InputError, NotFoundError, PtcError
from elastic.events import OnEvent, Reporter
from elastic.lending.ports import REFERENCE, Pool, Testbed
from elastic.testbed.loans import Loan, LoanBook

PREFIX = "lent-"


def default_name(node: str) -> str:
    return f"{PREFIX}{node}"


def like_node(testbed: Testbed, other: str) -> str:
    """The node a lent node copies in ``other``: its first node that is not the head, or the
    head when it has no other."""
    head = testbed.head(other)
    rest = [n for n in testbed.nodes(other) if n != head]
    return rest[0] if rest else head


def lend(
    pool: Pool,
    testbed: Testbed,
    book: LoanBook,
    exp: str,
    other: str,
    count: int,
    *,
    grace: float | None,
    wait: float,
    names: Sequence[str] = (),
    on_event: OnEvent | None = None,
) -> list[Loan]:
    """Acquire ``count`` pool nodes of ``exp`` and move each into ``other`` (as ``names``, by
    default ``lent-NODE``); the loans, in the state ``lent``."""
    if other == exp:
        raise InputError(f"--into: {other!r} is the lending experiment itself")
    if not testbed.exists(other):
        raise NotFoundError(f"--into: no experiment {other!r}")
    if names and len(names) != count:
        raise InputError(f"--as: {len(names)} names for --count {count}")
    present = set(testbed.nodes(other))
    if taken := [n for n in names if n in present]:
        raise InputError(f"--as: {other} already has a node {', '.join(map(repr, taken))}")
    if why := testbed.moves_nodes(exp, other):
        # before the pool acquires anything: an acquisition preempts jobs
        raise InputError(f"--into: {why}; nothing was acquired")
    like = like_node(testbed, other)
    report = Reporter("lend", on_event)
    report.begin(f"{exp}: acquiring {count} node(s) for {other}")
    got = pool.acquire(count, grace, wait)
    if len(got) < count:
        raise PtcError(
            f"{exp}: the reference partition got {', '.join(got) or 'no node'} of {count} in "
            f"{wait:.0f} s; nothing was lent (give them back: ptc elastic release {exp} "
            f"{' '.join(got) or 'NODE'}, or wait longer with --wait)"
        )
    loans = []
    for node, name in zip(got, names or [default_name(n) for n in got], strict=True):
        if name in present:
            raise InputError(f"--as: {other} already has a node {name!r} (name it with --as)")
        loans.append(_move(testbed, book, Loan(node, other, name), exp, like, report))
    report.end(", ".join(f"{loan.node} -> {other}/{loan.name}" for loan in loans))
    return loans


def _move(
    testbed: Testbed, book: LoanBook, loan: Loan, exp: str, like: str, report: Reporter
) -> Loan:
    book.put(loan)  # first: a crash from here on leaves a record saying how far it got
    if loan.node in testbed.nodes(exp) or loan.node in testbed.parked(exp):
        report.status(f"{exp}: releasing {loan.node} to the testbed")
        testbed.release(exp, loan.node)
    if loan.name not in testbed.nodes(loan.other):
        report.status(f"{loan.other}: allocating {loan.name} like {like}")
        testbed.allocate(loan.other, loan.name, like)
    lent = loan.moved("lent")
    book.put(lent)
    return lent


def give_back(
    pool: Pool, testbed: Testbed, book: LoanBook, exp: str, node: str, on_event: OnEvent | None
) -> Loan:
    """Finish giving back the machine lent as ``node``: every step not yet done is done."""
    loan = book.get(node)
    if loan is None:
        lent = ", ".join(book.all()) or "none"
        raise NotFoundError(f"{exp}: node {node!r} is not lent (lent: {lent})")
    report = Reporter("give-back", on_event)
    report.begin(f"{exp}: giving back {node} (lent to {loan.other} as {loan.name})")
    book.put(loan.moved("returning"))
    if testbed.exists(loan.other) and loan.name in testbed.nodes(loan.other):
        report.status(f"{loan.other}: releasing {loan.name} to the testbed")
        testbed.release(loan.other, loan.name)
    if node not in testbed.nodes(exp):
        report.status(f"{exp}: allocating {node} again")
        testbed.allocate(exp, node, None)
    report.status(f"{exp}: deploying {testbed.head(exp)} and {node}")
    testbed.configure(exp, node)
    if pool.owners().get(node) == REFERENCE:
        report.status(f"{exp}: releasing {node} to the pool")
        pool.give_back(node)
    book.drop(node)
    report.end(f"{node} back in {exp}'s pool")
    return loan
