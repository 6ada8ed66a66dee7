"""Where the cost grows faster than the work: the manager's start with a pool of N nodes.

The manager's service registers its configured pool when it starts (``apply_config``). Timed
in this process with the real ``build_manager`` and JSON file store, for growing N; the store's
writes are counted too (a wrapper around the real store), since each write replaces the whole
state document."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from elastic.manager import service
from elastic.manager.store import JsonFileStore


def manager_start(n: int, directory: Path) -> dict[str, Any]:
    writes = 0
    real_write = JsonFileStore.write

    def counted(self: JsonFileStore, document: dict[str, Any], *, expect: int) -> int:
        nonlocal writes
        writes += 1
        return real_write(self, document, expect=expect)

    config = service.ServiceConfig(
        listen="127.0.0.1",
        state=directory / "state.json",
        tokens=directory / "tokens",
        pool=tuple({"name": f"emu{i:05d}", "cpus": 16, "memory_mb": 1000} for i in range(1, n + 1)),
        partitions=({"name": "elastic"},),
    )
    JsonFileStore.write = counted  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        service.build_manager(config)
        seconds = time.perf_counter() - t0
    finally:
        JsonFileStore.write = real_write  # type: ignore[method-assign]
    return {"nodes": n, "seconds": seconds, "store_writes": writes}


def curve(sizes: list[int], base: Path, limit: float = 120.0) -> list[dict[str, Any]]:
    """Each size in a fresh directory; stops after a point that took more than ``limit``."""
    points = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="scale-curve-", dir=base) as d:
            point = manager_start(n, Path(d))
        points.append(point)
        print(f"  manager start, pool of {n:>6,}: {point['seconds']:8.2f} s, "
              f"{point['store_writes']:,} store writes", flush=True)  # fmt: skip
        if point["seconds"] > limit:
            break
    return points
