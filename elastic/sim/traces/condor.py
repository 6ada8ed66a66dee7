"""HTCondor submit descriptions whose jobs are ``sleep <seconds>``.

Understood statements: ``key = value`` (keys case-insensitive), ``Queue [count]``, comments
(``#``) and blank lines. Each ``Queue`` emits ``count`` jobs (default 1) that sleep for the
current ``Arguments``. Every job is single-node, submitted at t=0 and completes; with no
wall-clock request in the file, the request is the runtime itself (exact estimates).
"""

from __future__ import annotations

import re
from pathlib import Path

from elastic.errors import InputError
from elastic.sim.traces.model import Trace, make_trace

_ASSIGN = re.compile(r"^\s*([A-Za-z_+][\w.+]*)\s*=\s*(.*?)\s*$")
_QUEUE = re.compile(r"^\s*queue(?:\s+(\S+))?\s*$", re.IGNORECASE)


def load_condor_submit(path: Path) -> Trace:
    settings: dict[str, tuple[str, int]] = {}
    runtimes: list[float] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            queue = _QUEUE.match(text)
            if queue:
                count = _count(path, lineno, queue.group(1))
                runtimes.extend([_sleep_seconds(path, lineno, settings)] * count)
                continue
            assign = _ASSIGN.match(text)
            if not assign:
                raise InputError(f"{path}:{lineno}: not a 'key = value' or 'Queue' line: {text!r}")
            settings[assign.group(1).lower()] = (assign.group(2), lineno)
    n = len(runtimes)
    return make_trace(
        path.name,
        job_id=list(range(1, n + 1)),
        submit=[0.0] * n,
        runtime=runtimes,
        requested=runtimes,
        nodes=[1] * n,
        completed=[True] * n,
        status_known=[True] * n,
        queue=[""] * n,
        application=["sleep"] * n,
        user=[""] * n,
        metadata={"format": "HTCondor submit description"},
    )


def _count(path: Path, lineno: int, text: str | None) -> int:
    if text is None:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"{path}:{lineno}: field Queue: count {text!r} is not a positive integer")
    return int(text)


def _sleep_seconds(path: Path, queue_line: int, settings: dict[str, tuple[str, int]]) -> float:
    executable, exe_line = settings.get("executable", ("", queue_line))
    if executable.rsplit("/", 1)[-1] != "sleep":
        raise InputError(
            f"{path}:{exe_line}: field Executable: {executable!r} is not sleep; "
            "only `sleep <seconds>` jobs can be simulated"
        )
    if "arguments" not in settings:
        raise InputError(f"{path}:{queue_line}: field Arguments: Queue before any Arguments")
    arguments, arg_line = settings["arguments"]
    try:
        seconds = float(arguments.strip().strip('"'))
    except ValueError:
        raise InputError(
            f"{path}:{arg_line}: field Arguments: {arguments!r} is not a number of seconds"
        ) from None
    if not seconds >= 0 or seconds == float("inf"):
        raise InputError(f"{path}:{arg_line}: field Arguments: {arguments!r} must be >= 0 seconds")
    return seconds
