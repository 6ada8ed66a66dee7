"""Which machines of an experiment are lent to another experiment, and as which node.

The one owner of that fact. A loan is written before the first step that moves the machine and
its state follows the steps, so an interrupted lend or give-back leaves a record saying how far
it got (``lending``, ``lent``, ``returning``); it is dropped only once the machine is back.
The book is a JSON file written atomically under a lock, so two commands never lose a loan.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from elastic import atomic
from elastic.errors import PtcError

State = Literal["lending", "lent", "returning"]
STATES: tuple[State, ...] = ("lending", "lent", "returning")


@dataclass(frozen=True)
class Loan:
    node: str  # the lender's node (its client_id, its name in the manager's pool)
    other: str  # the experiment it is lent to
    name: str  # the node it becomes there
    state: State = "lending"
    since: float = field(default_factory=time.time)

    def moved(self, state: State) -> Loan:
        return replace(self, state=state)


class LoanBook:
    """The loans of one experiment, kept in ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> dict[str, Loan]:
        if not self.path.is_file():
            return {}
        try:
            raw = json.loads(self.path.read_text())
            loans = {n: Loan(**v) for n, v in raw["loans"].items()}
        except (ValueError, KeyError, TypeError) as err:
            raise PtcError(f"{self.path}: not a loan book ({err})") from err
        for node, loan in loans.items():
            if loan.state not in STATES or loan.node != node:
                raise PtcError(f"{self.path}: loan of {node!r} is malformed ({loan})")
        return loans

    def get(self, node: str) -> Loan | None:
        return self.all().get(node)

    def put(self, loan: Loan) -> None:
        with self._locked():
            loans = self.all()
            loans[loan.node] = loan
            self._write(loans)

    def drop(self, node: str) -> None:
        with self._locked():
            loans = self.all()
            if loans.pop(node, None) is not None:
                self._write(loans)

    def _write(self, loans: dict[str, Loan]) -> None:
        data = {"loans": {n: asdict(loan) for n, loan in sorted(loans.items())}}
        atomic.write_text(self.path, json.dumps(data, indent=1) + "\n")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.with_suffix(".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
