"""E-HPC (in Souza's thesis) beside ptc's job resizing: read from a live run's stored result.

Nothing here runs: ``benchmarks/elastic_workflow.py`` stored its last run's ``results.json``
(node-seconds of the elastic job and of a static one, and the terms of E-HPC's Eq. 3 and 7).
The file records no date; the caller passes the date it was committed, if known.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from elastic.errors import InputError
from elastic.papers.table import MISSING, PaperValue, Row, Section, Table, difference, number

OWNER = "the paper's"
FIG7 = "E-HPC, §5.4.1, Fig. 7b (Montage on Cori, 256 cores)"
SAVING = PaperValue(76.0, "76% fewer core-hours", FIG7, "mean of 3 repetitions")
EQ3 = PaperValue(
    None,
    "saves only if resize overheads are below the gain",
    "E-HPC, §4, Eq. 3",
    "statement: sum CR_i n_i < sum (n - n_i) t_i",
)


def _number(data: dict[str, Any], *keys: str) -> float:
    value: Any = data
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, int | float):
        raise InputError(f"e-hpc results: no number at {'.'.join(keys)}")
    return float(value)


def ideal_saving(data: dict[str, Any]) -> float:
    """The saving with no resize time: 1 - sum n_i t_i / (n sum t_i), in percent."""
    stages = data.get("elastic", {}).get("stages", [])
    width = _number(data, "width")
    used = sum(float(s["nodes"]) * float(s["step_s"]) for s in stages)
    total = sum(float(s["step_s"]) for s in stages)
    return 100 * (1 - used / (width * total)) if total > 0 and width > 0 else float("nan")


def section(path: Path, committed: str | None) -> Section:
    data = json.loads(path.read_text())
    elastic, static = _number(data, "elastic", "node_s"), _number(data, "static", "node_s")
    saving = 100 * (1 - elastic / static)
    overhead = _number(data, "equations", "eq3_overhead_node_s")
    gain = _number(data, "equations", "eq3_gain_node_s")
    width = int(_number(data, "width"))
    col = (f"ours: a Montage-like workflow of sleep stages on {width} nodes (one run)",)
    rows = (
        Row(
            "node-seconds, elastic against static",
            SAVING,
            (f"{saving:.1f}% fewer ({number(elastic, 0)} against {number(static, 0)})",),
            difference(saving, SAVING.value, 1, relative=False),
            f"With no resize time this workflow could save {ideal_saving(data):.0f}% at most: "
            "E-HPC's Montage has long narrow stages beside very wide ones, ours short stages on "
            f"{width} nodes. Ours include the helper allocations that hold new nodes while "
            "they boot.",
        ),
        Row(
            "Eq. 3 on this run",
            EQ3,
            (f"overheads {number(overhead, 0)} node-s against a gain of {number(gain, 0)}",),
            MISSING,
            "By Eq. 3 this run should lose; it saved because an expanding job waits at its old "
            "width, not the new one the equation multiplies by.",
        ),
    )
    when = f"committed on {committed}" if committed else "its date is not recorded in the file"
    return Section(
        "E-HPC (Souza's thesis): jobs that change their size",
        (
            f"Read from `{path.parent.name}/{path.name}`, the last run of "
            f"`benchmarks/elastic_workflow.py` on a 1+{width} elastic experiment of the local "
            f"testbed ({when}).",
        ),
        (Table("E-HPC: elastic against static core-hours (stored live run)", OWNER, col, rows),),
        notes=(
            "What a fuller comparison needs, live: repeats, and a workflow with longer and "
            "wider stages.",
        ),
    )
