"""The public traces the simulator's guide (docs/simulation.md) runs on: where each comes from,
its checksum, and a local cache.

``fetch`` downloads a trace once into the cache (``$PTC_CACHE/traces``, else
``~/.cache/ptc/traces``) and keeps it only if its SHA-256 is the one pinned here, so every
user simulates on the same bytes. A copy the user already has (``source_dir``) is checked the
same way and copied instead of downloading. Nothing is trusted by name: a file whose checksum
differs is refused and never lands in the cache.
"""

from __future__ import annotations

import gzip
import hashlib
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elastic import atomic, paths
from elastic.errors import FetchError, InputError
from elastic.events import OnEvent, Reporter

# Seconds to wait for a server; without a network the resolver fails at once anyway.
TIMEOUT_S = 20.0


@dataclass(frozen=True)
class PublicTrace:
    name: str  # what `ptc sim fetch NAME` takes
    file: str  # its file name in the cache (and in a data directory beside the repository)
    url: str
    sha256: str  # of the file as stored (after decompression)
    what: str
    licence: str
    gzipped: bool = False


TRACES: dict[str, PublicTrace] = {
    t.name: t
    for t in (
        PublicTrace(
            "kth-sp2",
            "KTH-SP2-1996-2.swf",
            "https://www.cs.huji.ac.il/labs/parallel/workload/l_kth_sp2/KTH-SP2-1996-2.swf.gz",
            "df76b94e5f670db52179688a98deec3e1887d10adb39f96c900b8e92abb386ab",
            "KTH IBM SP2 log, 28,489 jobs on 100 processors (SWF 2.2)",
            "Parallel Workloads Archive: free to use; acknowledge the log's Acknowledge line "
            "(Lars Malinowsky) and the archive",
            gzipped=True,
        ),
        PublicTrace(
            "htc-condor",
            "htc-condor-1120.submit",
            "https://raw.githubusercontent.com/dmdu/downscaling/"
            "0331a5bee3680eff3820872326fdb8394e0b5e07/workload/condor.submit",
            "9abf35a923691581764234238118960e3e417d8d4349553a26e81d66897db7dc",
            "HTCondor submit file of 1,120 sleep jobs, the HTC workload of the papers",
            "public repository dmdu/downscaling (no licence file): cite the repository",
        ),
        PublicTrace(
            "nrel-eagle",
            "nrel-eagle-sample-1000.csv",
            "https://raw.githubusercontent.com/NREL/eagle-jobs/"
            "ef34f9fa5edabb04b460dcf58929b841555a2e2d/data/sample_eagle_data.csv",
            "848e8dd418dfd5efcb4897c054489c21e0022ced637a6954216aa878e03bb513",
            "first 1,000 jobs of NREL's Eagle on or after 2019-01-01 (NREL/eagle-jobs sample)",
            "BSD-3-Clause, Copyright (c) 2023 Alliance for Sustainable Energy, LLC",
        ),
    )
}


def cache_dir() -> Path:
    return paths.image_cache_dir() / "traces"


def lookup(name: str) -> PublicTrace:
    try:
        return TRACES[name]
    except KeyError:
        raise InputError(
            f"unknown trace {name!r}: one of {', '.join(sorted(TRACES))} (ptc sim fetch --list)"
        ) from None


def cached(trace: PublicTrace) -> Path:
    """Where ``trace`` is (or would be) in the cache."""
    return cache_dir() / trace.file


def locate(name: str, *dirs: Path) -> Path:
    """The trace ``name`` from the first of ``dirs`` that has its file, else from the cache; an
    error naming the command that fetches it when neither has it."""
    trace = lookup(name)
    for path in (*(d / trace.file for d in dirs), cached(trace)):
        if path.is_file():
            return path
    raise TraceMissing(
        f"the {name} trace is not here: run `bin/ptc sim fetch {name}` (it goes to {cached(trace)})"
    )


class TraceMissing(InputError):
    """A public trace that is neither in a given directory nor in the cache."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch(
    names: Sequence[str],
    on_event: OnEvent | None = None,
    *,
    source_dir: Path | None = None,
) -> list[Path]:
    """Each named trace in the cache, checked against its pinned SHA-256; their paths.

    A trace already cached with the right checksum is not fetched again. ``source_dir``: copy
    the trace from there (a data directory the user has) instead of downloading it."""
    report = Reporter("fetch", on_event)
    traces = [lookup(n) for n in names]
    report.begin(f"{len(traces)} traces into {cache_dir()}", total=len(traces))
    out = []
    for done, trace in enumerate(traces, 1):
        path = cached(trace)
        if path.is_file() and sha256(path.read_bytes()) == trace.sha256:
            report.status(f"{trace.name}: cached, checksum verified", path=str(path))
        else:
            data = _read_local(trace, source_dir) if source_dir else _download(trace)
            got = sha256(data)
            if got != trace.sha256:
                where = source_dir / trace.file if source_dir else trace.url
                raise FetchError(
                    f"{trace.name}: {where} has SHA-256 {got}, not the pinned {trace.sha256}; "
                    f"nothing was written to {path}",
                    url=str(where),
                    path=path,
                )
            atomic.write_bytes(path, data)
            report.status(f"{trace.name}: {len(data)} bytes, checksum verified", path=str(path))
        out.append(path)
        report.progress(done, len(traces))
    report.end(f"{len(out)} traces in {cache_dir()}")
    return out


def _read_local(trace: PublicTrace, source_dir: Path) -> bytes:
    path = source_dir / trace.file
    if not path.is_file():
        raise InputError(f"--from {source_dir}: no {trace.file} there (the {trace.name} trace)")
    return path.read_bytes()


def _download(trace: PublicTrace) -> bytes:
    try:
        with urllib.request.urlopen(trace.url, timeout=TIMEOUT_S) as response:
            data: bytes = response.read()
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise FetchError(
            f"{trace.name}: cannot download {trace.url} ({reason}); no network? "
            f"Put {trace.file} in {cache_dir()} by other means, or fetch it from a copy with "
            f"`ptc sim fetch {trace.name} --from DIR`",
            url=trace.url,
            path=cached(trace),
        ) from None
    if trace.gzipped:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as err:
            raise FetchError(
                f"{trace.name}: {trace.url} is not a gzip file ({err})",
                url=trace.url,
                path=cached(trace),
            ) from None
    return data
