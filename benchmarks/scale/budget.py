"""Whether a size fits this machine, decided before anything starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elastic.errors import InputError

MIB = 1024 * 1024


@dataclass(frozen=True)
class Budget:
    """What a run of ``nodes`` emulated nodes needs: each node's slurmd (measured, bytes) and
    its share of the jobs' processes, plus a fixed part (slurmctld, munged, the manager, this
    harness), against ``headroom`` of what the kernel says is available."""

    per_node: int
    fixed: int
    headroom: float = 0.7

    def need(self, nodes: int) -> int:
        return self.fixed + self.per_node * nodes


class TooBig(InputError):
    """A size this machine cannot hold; nothing was started."""


def mem_available(meminfo: Path = Path("/proc/meminfo")) -> int:
    """MemAvailable in bytes."""
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise InputError(f"{meminfo}: no MemAvailable line")


def check_sizes(sizes: list[int], budget: Budget, available: int) -> None:
    """Refuse the first size whose need exceeds the usable part of ``available``, naming it.
    Every size is checked before the first one starts, so a refused run starts nothing."""
    usable = int(available * budget.headroom)
    for size in sizes:
        if size < 1:
            raise InputError(f"size {size}: at least one node")
        need = budget.need(size)
        if need > usable:
            raise TooBig(
                f"size {size}: {size} emulated nodes need about {need / MIB:,.0f} MiB "
                f"({budget.per_node / MIB:.1f} MiB each + {budget.fixed / MIB:,.0f} MiB), "
                f"more than {budget.headroom:.0%} of the {available / MIB:,.0f} MiB available; "
                f"at most {max(0, (usable - budget.fixed) // budget.per_node):,} nodes fit"
            )
