"""A provider's notice that it is about to end a node's machine, as the node tells Slurm.

A spot instance hears of its interruption from its own metadata service (EC2 gives two minutes),
and nothing on the controller hears it sooner. So the node drains itself, with a reason in this
form, and the controller's Slurm client, which reads every pool node's reason anyway, turns the
reason into a reclamation of that node whose deadline is the provider's. The node's side is a
shell script (the user data writes it); this module is the one place the form is said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from elastic.errors import InputError

# Slurm keeps a reason as the node gave it; the time is the provider's, in UTC.
PREFIX = "ptc notice: "
_REASON = re.compile(
    r"^ptc notice: (?P<source>[a-z0-9 _.-]{1,80}) at (?P<when>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$"
)


@dataclass(frozen=True)
class Notice:
    source: str  # who ends the machine and how, e.g. "ec2 spot terminate"
    deadline: float  # the epoch


def reason(source: str, deadline: float) -> str:
    """The drain reason that carries a notice (what the node's script writes)."""
    when = datetime.fromtimestamp(deadline, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = f"{PREFIX}{source} at {when}"
    if parse(text) is None:
        raise InputError(f"source: {source!r} is not lower-case words of at most 80 characters")
    return text


def parse(text: str) -> Notice | None:
    """The notice a Slurm reason carries; None for any other reason (or a garbled one)."""
    found = _REASON.match(text.strip())
    if found is None:
        return None
    when = datetime.strptime(found["when"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return Notice(found["source"], when.timestamp())
