"""The runs behind the MyCluster comparison: a calibration to the slides' 410K, and the cap's sweep.

The slides give no number of proxies per site for their simulation and no limit on how many a
site may hold. Both change the absolute figures: without migration the jobs completed grow
with the proxies per site, and with migration the cap bounds how far proxies pile onto the best
sites. So: no migration at each candidate number of proxies per site, to find the one nearest
the slides' 410K; then migration at the module's default and at that one, under a sweep of caps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from elastic.errors import InputError
from elastic.events import OnEvent
from elastic.sim.mycluster import MyClusterConfig
from elastic.sim.mycluster_runs import run_seeds

SLIDES_OFF = 410_000  # the slides' CDF of 1000 runs, migration disabled


@dataclass(frozen=True)
class MyClusterSettings:
    seeds: int = 16
    proxies: tuple[int, ...] = (6, 7, 8, 9, 10, 11, 12)  # per site, tried for the calibration
    ticks: int = 600  # the slides'; smaller only to test the report

    def __post_init__(self) -> None:
        if self.seeds < 1 or not self.proxies or min(self.proxies) < 1 or self.ticks < 1:
            raise InputError("mycluster settings: 'seeds', 'proxies' and 'ticks' must be >= 1")

    @property
    def base(self) -> MyClusterConfig:
        return replace(MyClusterConfig(), ticks=self.ticks)


def caps(per_site: int) -> tuple[int | None, ...]:
    """The caps tried at ``per_site`` proxies per site: a little room up to plenty, then none."""
    return (*sorted({per_site + 1, per_site + 2, 2 * per_site, 4 * per_site, 8 * per_site}), None)


def _name(migration: str, per_site: int, cap: int | None) -> str:
    return f"{migration} p={per_site} cap={'none' if cap is None else cap}"


def _config(
    base: MyClusterConfig, migration: str, per_site: int, cap: int | None
) -> MyClusterConfig:
    return replace(base, migration=migration, proxies_per_site=per_site, capacity=cap)


def _label(frame: pd.DataFrame) -> pd.DataFrame:
    parts = frame["variant"].str.extract(r"^(\S+) p=(\d+) cap=(\S+)$")
    return frame.assign(
        migration=parts[0],
        per_site=parts[1].astype(int),
        cap=pd.to_numeric(parts[2].where(parts[2] != "none"), errors="coerce"),
    )


def calibrated(frame: pd.DataFrame) -> int:
    """The proxies per site whose mean without migration is nearest the slides' 410K."""
    none = frame[frame.migration == "none"].groupby("per_site")["completed"].mean()
    gaps = {int(str(p)): abs(float(m) - SLIDES_OFF) for p, m in none.items()}
    return min(gaps, key=lambda p: (gaps[p], p))


def run(settings: MyClusterSettings, on_event: OnEvent | None = None) -> pd.DataFrame:
    """One row per variant and seed: ``mycluster_runs.COLUMNS`` plus migration, per_site, cap."""
    base = settings.base
    seeds = list(range(settings.seeds))
    off = {_name("none", p, None): _config(base, "none", p, None) for p in settings.proxies}
    calibration = _label(run_seeds(off, seeds, on_event))
    chosen = sorted({settings.proxies[0], calibrated(calibration)})
    on = {
        _name("liability", p, cap): _config(base, "liability", p, cap)
        for p in chosen
        for cap in caps(p)
    }
    migration = _label(run_seeds(on, seeds, on_event))
    return pd.concat([calibration, migration], ignore_index=True)


def crossing(frame: pd.DataFrame, per_site: int, target: float) -> float:
    """The cap (interpolated) at which the mean with migration first reaches ``target``; NaN if
    no finite cap does."""
    rows = frame[(frame.migration == "liability") & (frame.per_site == per_site)]
    means = rows.dropna(subset=["cap"]).groupby("cap")["completed"].mean().sort_index()
    previous: tuple[float, float] | None = None
    for key, value in means.items():
        cap, mean = float(str(key)), float(value)
        if mean >= target:
            if previous is None or mean == previous[1]:
                return cap
            c0, m0 = previous
            return c0 + (target - m0) * (cap - c0) / (mean - m0)
        previous = (cap, mean)
    return math.nan
