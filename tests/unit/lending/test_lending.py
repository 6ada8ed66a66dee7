"""Lending pool machines to another experiment, and the reconciler, against fakes of the
manager's pool and of the testbed (the live ones are exercised in
tests/integration/test_elastic.py). The loan book is the real one, on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.errors import InputError, NotFoundError, PtcError
from elastic.lending import loan as lending
from elastic.lending import reconcile
from elastic.lending.ports import REFERENCE
from elastic.testbed.loans import Loan, LoanBook

POOL = ["node-0", "node-1", "node-2", "node-3"]


class FakePool:
    """A fake of the manager's pool: owners, and the reference partition's calls."""

    def __init__(self, owners: dict[str, str | None] | None = None) -> None:
        self.held: dict[str, str | None] = owners or dict.fromkeys(POOL, "slurm")

    def owners(self) -> dict[str, str | None]:
        return dict(self.held)

    def acquire(self, count: int, grace: float | None, wait: float) -> list[str]:
        # free nodes first, then (as a reclamation with a grace period would) Slurm's
        free = [n for n, o in self.held.items() if o is None]
        taken = [n for n, o in self.held.items() if o == "slurm"] if grace is not None else []
        got = (free + taken)[:count]
        for n in got:
            self.held[n] = REFERENCE
        return got

    def take(self, node: str) -> None:
        self.held[node] = REFERENCE

    def give_back(self, node: str) -> None:
        assert self.held[node] == REFERENCE
        self.held[node] = None


class FakeTestbed:
    """A fake of the testbed: experiments as lists of nodes; the steps it was asked for."""

    def __init__(self) -> None:
        self.exps = {"a": ["head", *POOL], "b": ["head", "node-0"]}
        self.parked_nodes: dict[str, list[str]] = {"a": [], "b": []}
        self.steps: list[tuple[str, ...]] = []
        self.fail_on: tuple[str, ...] | None = None
        self.unmovable: str | None = None

    def _step(self, *step: str) -> None:
        if step == self.fail_on:
            raise PtcError(f"fault injected at {step}")
        self.steps.append(step)

    def exists(self, exp: str) -> bool:
        return exp in self.exps

    def nodes(self, exp: str) -> list[str]:
        return list(self.exps[exp])

    def parked(self, exp: str) -> list[str]:
        return list(self.parked_nodes[exp])

    def head(self, exp: str) -> str:
        return "head"

    def moves_nodes(self, exp: str, other: str) -> str | None:
        return self.unmovable

    def release(self, exp: str, node: str) -> None:
        self._step("release", exp, node)
        if node in self.parked_nodes[exp]:  # as the live testbed: unparked, nothing released
            self.parked_nodes[exp].remove(node)
            return
        self.exps[exp].remove(node)

    def allocate(self, exp: str, node: str, like: str | None) -> None:
        self._step("allocate", exp, node, like or "-")
        assert node not in self.exps[exp]
        self.exps[exp].append(node)

    def configure(self, exp: str, node: str) -> None:
        self._step("configure", exp, node)


@pytest.fixture
def book(tmp_path: Path) -> LoanBook:
    return LoanBook(tmp_path / "a" / "loans.json")


def lend_one(pool: FakePool, tb: FakeTestbed, book: LoanBook, **kw: object) -> Loan:
    [loan] = lending.lend(pool, tb, book, "a", "b", 1, grace=30.0, wait=60.0, **kw)  # type: ignore[arg-type]
    return loan


def test_lend_moves_the_acquired_machine_into_the_other_experiment(book: LoanBook) -> None:
    pool, tb = (
        FakePool({"node-0": "slurm", "node-1": None, "node-2": "slurm", "node-3": "slurm"}),
        FakeTestbed(),
    )
    loan = lend_one(pool, tb, book)
    assert (loan.node, loan.other, loan.name, loan.state) == ("node-1", "b", "lent-node-1", "lent")
    # released from the lender first, then allocated in the other like its first non-head node
    assert tb.steps == [("release", "a", "node-1"), ("allocate", "b", "lent-node-1", "node-0")]
    assert "node-1" not in tb.exps["a"] and "lent-node-1" in tb.exps["b"]
    assert book.all() == {"node-1": loan}
    assert LoanBook(book.path).get("node-1") == loan  # durable: read back from the file
    assert reconcile.check(pool, tb, book, "a") == []


def test_lend_copies_the_head_of_a_one_node_experiment_and_takes_a_name(book: LoanBook) -> None:
    pool, tb = FakePool(), FakeTestbed()
    tb.exps["b"] = ["head"]
    loan = lend_one(pool, tb, book, names=["worker"])
    assert tb.steps[-1] == ("allocate", "b", "worker", "head") and loan.name == "worker"


def test_lend_refuses_bad_input_before_acquiring(book: LoanBook) -> None:
    pool, tb = FakePool(), FakeTestbed()
    with pytest.raises(NotFoundError, match="--into: no experiment 'nope'"):
        lending.lend(pool, tb, book, "a", "nope", 1, grace=None, wait=0)
    with pytest.raises(InputError, match="--as: b already has a node 'node-0'"):
        lending.lend(pool, tb, book, "a", "b", 1, grace=None, wait=0, names=["node-0"])
    with pytest.raises(InputError, match="--as: 2 names for --count 1"):
        lending.lend(pool, tb, book, "a", "b", 1, grace=None, wait=0, names=["x", "y"])
    with pytest.raises(InputError, match="--into"):
        lending.lend(pool, tb, book, "a", "a", 1, grace=None, wait=0)
    assert set(pool.held.values()) == {"slurm"} and tb.steps == [] and book.all() == {}


def test_lend_on_a_testbed_that_cannot_move_nodes_preempts_nothing(book: LoanBook) -> None:
    pool, tb = FakePool(), FakeTestbed()
    tb.unmovable = "the cloudlab testbed cannot move a machine from one experiment to another"
    with pytest.raises(InputError, match=r"--into: the cloudlab testbed cannot move.*nothing was"):
        lending.lend(pool, tb, book, "a", "b", 1, grace=60, wait=0)
    assert set(pool.held.values()) == {"slurm"} and tb.steps == [] and book.all() == {}


def test_lend_short_of_nodes_lends_nothing_and_says_how_to_give_them_back(book: LoanBook) -> None:
    pool, tb = FakePool(), FakeTestbed()
    with pytest.raises(PtcError, match="got no node of 1"):
        lending.lend(pool, tb, book, "a", "b", 1, grace=None, wait=0)
    assert tb.steps == [] and book.all() == {}


def test_give_back_undoes_every_step_and_releases_to_the_pool(book: LoanBook) -> None:
    pool, tb = FakePool(), FakeTestbed()
    loan = lend_one(pool, tb, book)
    tb.steps.clear()
    lending.give_back(pool, tb, book, "a", loan.node, None)
    assert tb.steps == [
        ("release", "b", loan.name),
        ("allocate", "a", loan.node, "-"),
        ("configure", "a", loan.node),
    ]
    assert pool.held[loan.node] is None and book.all() == {}
    assert reconcile.check(pool, tb, book, "a") == []
    with pytest.raises(NotFoundError, match="node 'node-0' is not lent"):
        lending.give_back(pool, tb, book, "a", "node-0", None)


@pytest.mark.parametrize("fault", ["release", "allocate", "configure"])
def test_an_interrupted_give_back_is_finished_by_running_it_again(
    book: LoanBook, fault: str
) -> None:
    pool, tb = FakePool(), FakeTestbed()
    loan = lend_one(pool, tb, book)
    tb.fail_on = {
        "release": ("release", "b", loan.name),
        "allocate": ("allocate", "a", loan.node, "-"),
        "configure": ("configure", "a", loan.node),
    }[fault]
    with pytest.raises(PtcError, match="fault injected"):
        lending.give_back(pool, tb, book, "a", loan.node, None)
    assert (
        book.get(loan.node) == loan.moved("returning") or book.get(loan.node).state == "returning"
    )  # type: ignore[union-attr]
    kinds = [d.kind for d in reconcile.check(pool, tb, book, "a")]
    assert kinds == ["unfinished"]
    tb.fail_on, tb.steps = None, []
    lending.give_back(pool, tb, book, "a", loan.node, None)
    # each step done before is not done again
    assert [s[0] for s in tb.steps].count("release") == (1 if fault == "release" else 0)
    assert [s[0] for s in tb.steps].count("allocate") == (0 if fault == "configure" else 1)
    assert tb.exps["a"].count(loan.node) == 1 and loan.name not in tb.exps["b"]
    assert pool.held[loan.node] is None and book.all() == {}


# -- the reconciler: every kind, found and repaired ------------------------------------------
def lent_state(book: LoanBook) -> tuple[FakePool, FakeTestbed, Loan]:
    pool, tb = FakePool(), FakeTestbed()
    return pool, tb, lend_one(pool, tb, book)


def breakers() -> dict[str, object]:
    def free(pool: FakePool, tb: FakeTestbed, book: LoanBook, loan: Loan) -> None:
        pool.held[loan.node] = None

    def held(pool: FakePool, tb: FakeTestbed, book: LoanBook, loan: Loan) -> None:
        pool.held[loan.node] = "slurm"

    def loan_gone(pool: FakePool, tb: FakeTestbed, book: LoanBook, loan: Loan) -> None:
        tb.exps["b"].remove(loan.name)

    def machine_back(pool: FakePool, tb: FakeTestbed, book: LoanBook, loan: Loan) -> None:
        tb.exps["a"].append(loan.node)

    def other_gone(pool: FakePool, tb: FakeTestbed, book: LoanBook, loan: Loan) -> None:
        del tb.exps["b"]

    def unfinished(pool: FakePool, tb: FakeTestbed, book: LoanBook, loan: Loan) -> None:
        book.put(loan.moved("lending"))

    def missing(pool: FakePool, tb: FakeTestbed, book: LoanBook, loan: Loan) -> None:
        tb.exps["a"].remove("node-3")  # released behind the manager's back, no loan

    return {
        "lent-but-free": free,
        "lent-but-held": held,
        "loan-gone": loan_gone,
        "machine-back": machine_back,
        "other-gone": other_gone,
        "unfinished": unfinished,
        "missing-from-testbed": missing,
    }


@pytest.mark.parametrize("kind", list(breakers()))
def test_each_disagreement_is_found_by_name_and_repaired(book: LoanBook, kind: str) -> None:
    pool, tb, loan = lent_state(book)
    assert loan.node != "node-3"
    breakers()[kind](pool, tb, book, loan)  # type: ignore[operator]
    found = reconcile.check(pool, tb, book, "a")
    assert [d.kind for d in found] == [kind], found
    assert found[0].node == ("node-3" if kind == "missing-from-testbed" else loan.node)
    repairs = reconcile.repair(pool, tb, book, "a", found)
    assert [r.node for r in repairs] == [found[0].node] and repairs[0].kinds == (kind,)
    assert reconcile.check(pool, tb, book, "a") == []  # a second run finds nothing
    if kind in ("lent-but-free", "lent-but-held"):
        assert pool.held[loan.node] == REFERENCE and book.get(loan.node) is not None
    elif kind == "missing-from-testbed":
        assert "node-3" in tb.exps["a"] and ("configure", "a", "node-3") in tb.steps
    else:  # the give-back was finished
        assert book.all() == {} and loan.node in tb.exps["a"]


def test_several_disagreements_at_once_are_all_named(book: LoanBook) -> None:
    pool, tb, loan = lent_state(book)
    pool.held[loan.node] = None
    tb.exps["a"].remove("node-3")
    found = reconcile.check(pool, tb, book, "a")
    assert {(d.node, d.kind) for d in found} == {
        (loan.node, "lent-but-free"),
        ("node-3", "missing-from-testbed"),
    }
    reconcile.repair(pool, tb, book, "a", found)
    assert reconcile.check(pool, tb, book, "a") == []


def test_a_loan_book_that_is_not_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loans.json"
    path.write_text(
        '{"loans": {"node-1": {"node": "node-1", "other": "b", "name": "x", "state": "odd", "since": 0}}}'
    )
    with pytest.raises(PtcError, match="malformed"):
        LoanBook(path).all()


def test_a_parked_node_is_lent_without_a_release_and_is_no_longer_parked(book: LoanBook) -> None:
    """The partition parked node-1 (its machine is free already): lending it unparks it, so
    no resume or deploy of the lender takes that machine back while it is lent."""
    pool, tb = (
        FakePool({"node-0": "slurm", "node-1": None, "node-2": "slurm", "node-3": "slurm"}),
        FakeTestbed(),
    )
    tb.exps["a"].remove("node-1")
    tb.parked_nodes["a"] = ["node-1"]
    assert reconcile.check(pool, tb, book, "a") == []  # parked is not missing
    loan = lend_one(pool, tb, book)
    assert loan.node == "node-1" and tb.parked_nodes["a"] == []
    assert tb.steps == [("release", "a", "node-1"), ("allocate", "b", "lent-node-1", "node-0")]
    assert reconcile.check(pool, tb, book, "a") == []


def test_a_pool_node_neither_held_nor_parked_is_missing(book: LoanBook) -> None:
    pool, tb = (
        FakePool({"node-0": "slurm", "node-1": None, "node-2": "slurm", "node-3": "slurm"}),
        FakeTestbed(),
    )
    tb.exps["a"].remove("node-1")
    assert [(d.kind, d.node) for d in reconcile.check(pool, tb, book, "a")] == [
        ("missing-from-testbed", "node-1")
    ]
