"""The report's building blocks: a spread of values, a paper's number, rows, tables, sections.

A row sets the paper's own number (typed in, with where it is and what it is: a mean of runs,
one run, a statement) beside ours (a :class:`Spread` over job orders or seeds, computed by the
run), the difference and why. Every table has the columns of :data:`COLUMNS`, in that order,
with one or more "ours" columns in the middle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from elastic.errors import InputError

QUANTITY, WHERE, DIFFERENCE, WHY = "quantity", "where, and what it is", "difference", "why"
# The columns every table has, "ours" standing for one or more columns that start so.
COLUMNS = (QUANTITY, "NUMBER", WHERE, "ours", DIFFERENCE, WHY)
MISSING = "n/a"


@dataclass(frozen=True)
class Spread:
    """Values of one quantity over job orders or seeds: their mean and sample standard deviation."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        return cls(tuple(float(v) for v in values))

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def finite(self) -> tuple[float, ...]:
        return tuple(v for v in self.values if math.isfinite(v))

    @property
    def mean(self) -> float:
        good = self.finite
        return math.fsum(good) / len(good) if good else math.nan

    @property
    def sd(self) -> float:
        """Sample standard deviation (n - 1); 0 for a single value."""
        good = self.finite
        if len(good) < 2:
            return 0.0 if good else math.nan
        mean = self.mean
        return math.sqrt(math.fsum((v - mean) ** 2 for v in good) / (len(good) - 1))

    @property
    def low(self) -> float:
        return min(self.finite, default=math.nan)

    @property
    def high(self) -> float:
        return max(self.finite, default=math.nan)

    def text(self, digits: int = 1, unit: str = "") -> str:
        """``274 ± 32`` (a single value alone: ``463``); a dash when nothing is finite."""
        if not self.finite:
            return MISSING
        mean = number(self.mean, digits)
        if len(self.finite) == 1:
            return f"{mean}{unit}"
        return f"{mean} ± {number(self.sd, digits)}{unit}"


def number(value: float, digits: int = 1) -> str:
    """A number with ``digits`` decimals and thousands separators; a dash for NaN."""
    if not math.isfinite(value):
        return MISSING
    text = f"{value:,.{digits}f}"
    return "0" if text.strip("-0.,") == "" else text


def difference(ours: float, paper: float | None, digits: int = 1, relative: bool = True) -> str:
    """``ours - paper``, with the relative change when the paper's number is not 0."""
    if paper is None or not (math.isfinite(ours) and math.isfinite(paper)):
        return MISSING
    delta = ours - paper
    size = number(abs(delta), digits)
    if size == "0":
        return "0"
    text = f"{'+' if delta >= 0 else '-'}{size}"
    if relative and paper != 0:
        text += f" ({100 * delta / abs(paper):+.0f}%)"
    return text


def count_text(hits: int, total: int) -> str:
    """``holds in 18 of 20``."""
    return f"holds in {hits} of {total}"


@dataclass(frozen=True)
class PaperValue:
    """A number (or statement) as the paper gives it, typed in from the paper.

    ``value`` is what differences are taken against (None for a statement), ``text`` how the
    paper says it, ``where`` its section, table or figure, and ``kind`` what it is: a mean of
    so many runs, one run, a value read off a plot, a statement.
    """

    value: float | None
    text: str
    where: str
    kind: str

    def __post_init__(self) -> None:
        if not (self.text and self.where and self.kind):
            raise InputError("paper value: fields 'text', 'where' and 'kind' must not be empty")

    @property
    def place(self) -> str:
        return f"{self.where}: {self.kind}"


@dataclass(frozen=True)
class Row:
    quantity: str
    paper: PaperValue
    ours: tuple[str, ...]  # one cell per "ours" column of the table
    difference: str
    why: str


@dataclass(frozen=True)
class Table:
    """One paper's comparison. ``owner`` is the possessive naming the source: "the thesis's"."""

    title: str
    owner: str
    ours_headers: tuple[str, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.ours_headers or not all(h.startswith("ours") for h in self.ours_headers):
            raise InputError("table: every 'ours' header must start with 'ours'")
        for row in self.rows:
            if len(row.ours) != len(self.ours_headers):
                raise InputError(
                    f"table {self.title!r}: row {row.quantity!r} has {len(row.ours)} 'ours' "
                    f"cells for {len(self.ours_headers)} columns"
                )

    @property
    def headers(self) -> tuple[str, ...]:
        return (QUANTITY, f"{self.owner} number", WHERE, *self.ours_headers, DIFFERENCE, WHY)

    def cells(self) -> list[tuple[str, ...]]:
        return [
            (
                r.quantity,
                f"{r.paper.text} ({self.owner})",
                r.paper.place,
                *r.ours,
                r.difference,
                r.why,
            )
            for r in self.rows
        ]


@dataclass(frozen=True)
class Figure:
    file: str  # a PNG's name in the report's figure directory
    caption: str


@dataclass(frozen=True)
class Section:
    """One paper's part of the report: prose, tables, figures and plain statements."""

    title: str
    intro: tuple[str, ...]
    tables: tuple[Table, ...]
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()
    extra_tables: tuple[tuple[str, Sequence[str], Sequence[Sequence[str]]], ...] = field(
        default=()
    )  # (title, headers, rows): context that is not a comparison (e.g. whose choice a setting is)
