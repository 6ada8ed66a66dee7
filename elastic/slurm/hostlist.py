"""Slurm's hostlist notation (``node-[0-3,7],head``) expanded without Slurm, for files read
where no ``scontrol`` runs (the workstation checking a sites file before a deploy).

On a Slurm node, ``Slurm.expand`` asks ``scontrol`` instead; both give the same names for the
forms a sites file uses: comma-separated names, each with at most one bracketed range list of
numbers (``a[01-10]b``: the width of the lower bound is kept).
"""

from __future__ import annotations

import re

from elastic.errors import InputError

_ONE = re.compile(r"^(?P<pre>[^\[\]]*)(?:\[(?P<ranges>[^\[\]]+)\](?P<post>[^\[\]]*))?$")
_RANGE = re.compile(r"^(?P<lo>\d+)(?:-(?P<hi>\d+))?$")
MAX_NAMES = 100_000  # a typo such as node-[0-99999999] is refused, not expanded


def expand(hostlist: str) -> list[str]:
    """Every name ``hostlist`` stands for, in order; InputError naming the part at fault."""
    names: list[str] = []
    for part in _split(hostlist):
        match = _ONE.match(part)
        if match is None or not part:
            raise InputError(f"hostlist {hostlist!r}: {part!r} is not a name or name[ranges]")
        if match["ranges"] is None:
            names.append(part)
            continue
        for piece in match["ranges"].split(","):
            found = _RANGE.match(piece.strip())
            if found is None:
                raise InputError(f"hostlist {hostlist!r}: [{match['ranges']}]: {piece!r}")
            lo, hi = found["lo"], found["hi"] or found["lo"]
            if int(hi) < int(lo):
                raise InputError(f"hostlist {hostlist!r}: range {piece!r} runs backwards")
            if int(hi) - int(lo) + len(names) >= MAX_NAMES:
                raise InputError(f"hostlist {hostlist!r}: more than {MAX_NAMES} names")
            width = len(lo) if lo.startswith("0") else 0
            names += [
                f"{match['pre']}{str(n).zfill(width)}{match['post']}"
                for n in range(int(lo), int(hi) + 1)
            ]
    return names


def _split(hostlist: str) -> list[str]:
    """The comma-separated parts outside brackets."""
    parts, depth, current = [], 0, ""
    for char in hostlist.strip():
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if depth != 0:
        raise InputError(f"hostlist {hostlist!r}: brackets do not match")
    parts.append(current.strip())
    return [p for p in parts if p] if hostlist.strip() else []
