"""The scale harness refuses sizes the machine cannot hold, and takes down what it started."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from benchmarks.scale.budget import MIB, Budget, TooBig, check_sizes, mem_available
from benchmarks.scale.cleanup import Interrupted, Ledger, signals_unwind, tear_down

BUDGET = Budget(per_node=10 * MIB, fixed=1000 * MIB, headroom=0.5)


def test_a_size_that_fits_passes() -> None:
    check_sizes([100, 1000], BUDGET, available=24_000 * MIB)  # 11,000 MiB of 12,000 usable


def test_the_first_size_that_does_not_fit_is_named() -> None:
    with pytest.raises(TooBig) as err:
        check_sizes([100, 1000, 10000], BUDGET, available=24_000 * MIB)
    text = str(err.value)
    assert text.startswith("size 10000:")
    assert "101,000 MiB" in text and "at most 1,100 nodes fit" in text


def test_sizes_are_checked_before_any_starts() -> None:
    # the small size first does not let the run start: every size is checked up front
    with pytest.raises(TooBig):
        check_sizes([10, 100_000], BUDGET, available=24_000 * MIB)


def test_nonsense_sizes_are_refused() -> None:
    with pytest.raises(Exception, match="size 0"):
        check_sizes([0], BUDGET, available=24_000 * MIB)


def test_mem_available_reads_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable:    2048 kB\n")
    assert mem_available(meminfo) == 2 * MIB


def test_the_refusal_in_the_harness_comes_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "scale_script", Path(__file__).resolve().parents[3] / "benchmarks" / "scale_bench.py"
    )
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "mem_available", lambda: 10_000 * MIB)
    monkeypatch.setenv("PTC_HOME", str(tmp_path))
    started: list[str] = []
    monkeypatch.setattr(script, "live_part", lambda *a: started.append("live"))
    monkeypatch.setattr(script, "rounds_part", lambda *a: started.append("rounds"))
    status = script.main(["--sizes", "100,10000", "--baseline", str(tmp_path / "none.json")])
    assert status == 2
    assert started == []
    assert list(tmp_path.iterdir()) == []  # no run directory either
    assert "error: size 10000:" in capsys.readouterr().out


class Fakes:
    def __init__(self, live: set[int], strays: list[int]) -> None:
        self.live = live
        self.strays = strays
        self.stopped: list[list[int]] = []
        self.removed: list[Path] = []

    def stop(self, pids: list[int]) -> list[int]:
        self.stopped.append(list(pids))
        self.live -= set(pids)
        return list(pids)

    def alive(self, pid: int, started: int | None) -> bool:
        return pid in self.live

    def marked(self, run: str) -> list[int]:
        return [p for p in self.strays if p in self.live]

    def remove(self, path: Path) -> None:
        self.removed.append(path)


def ledger_with(tmp_path: Path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.directory(tmp_path / "run")
    ledger._append({"kind": "process", "pid": 11, "started": 1, "what": "munged"})
    ledger._append({"kind": "process", "pid": 12, "started": 1, "what": "slurmctld"})
    ledger.directory(tmp_path / "run" / "size-100")
    ledger._append({"kind": "process", "pid": 13, "started": 1, "what": "slurmd emu00001"})
    return ledger


def test_tear_down_stops_the_newest_first_then_strays_then_removes(tmp_path: Path) -> None:
    fakes = Fakes(live={11, 12, 13, 40}, strays=[40, 13])
    done = tear_down(ledger_with(tmp_path), "run-1", stop_pids=fakes.stop,
                     find_marked=fakes.marked, alive=fakes.alive, remove=fakes.remove)  # fmt: skip
    assert fakes.stopped == [[13, 12, 11], [40]]
    assert fakes.removed == [tmp_path / "run" / "size-100", tmp_path / "run"]
    assert done["stopped"] == [13, 12, 11, 40]


def test_a_process_already_gone_or_reused_is_left_alone(tmp_path: Path) -> None:
    fakes = Fakes(live={12}, strays=[])
    tear_down(ledger_with(tmp_path), "run-1", stop_pids=fakes.stop, find_marked=fakes.marked,
              alive=fakes.alive, remove=fakes.remove)  # fmt: skip
    assert fakes.stopped == [[12]]


def test_tear_down_twice_stops_nothing_more(tmp_path: Path) -> None:
    fakes = Fakes(live={11, 12, 13}, strays=[])
    ledger = ledger_with(tmp_path)
    kw = {"stop_pids": fakes.stop, "find_marked": fakes.marked, "alive": fakes.alive,
          "remove": fakes.remove}  # fmt: skip
    tear_down(ledger, "run-1", **kw)  # type: ignore[arg-type]
    assert tear_down(ledger, "run-1", **kw)["stopped"] == []  # type: ignore[arg-type]


def test_an_empty_ledger_tears_down_nothing(tmp_path: Path) -> None:
    fakes = Fakes(live=set(), strays=[])
    done = tear_down(Ledger(tmp_path / "none.jsonl"), "r", stop_pids=fakes.stop,
                     find_marked=fakes.marked, alive=fakes.alive, remove=fakes.remove)  # fmt: skip
    assert done == {"stopped": [], "removed": []}


def test_sigterm_unwinds_like_ctrl_c() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted), signals_unwind():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100):  # the handler runs between bytecodes, at the latest here
            pass
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_real_process_in_the_ledger_is_stopped(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.Popen(["sleep", "60"])
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.process(proc.pid, "sleep")
    done = tear_down(ledger, "no-such-run", find_marked=lambda run: [])
    assert done["stopped"] == [proc.pid]
    assert proc.wait(timeout=10) != 0


def load_script() -> object:
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "scale_bench.py"
    spec = importlib.util.spec_from_file_location("scale_script_compare", path)
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


TOLERANCE = {
    "default": {"relative": 0.5, "absolute": 0.0},
    "compared": {"round_s": {"relative": 1.0, "absolute": 0.5}, "writes_per_s": {}},
}


def test_a_figure_beyond_its_tolerance_is_a_regression() -> None:
    script = load_script()
    base = {
        "rounds": {"1000": {"jobs": {"10000": {"round_s": 1.0}}, "store": {"writes_per_s": 40.0}}}
    }
    worse = {
        "rounds": {"1000": {"jobs": {"10000": {"round_s": 2.6}}, "store": {"writes_per_s": 19.0}}}
    }
    found = script.compare(worse, base, TOLERANCE)  # type: ignore[attr-defined]
    assert [line.split(":")[0] for line in found] == [
        "rounds.1000.jobs.10000.round_s",
        "rounds.1000.store.writes_per_s",
    ]


def test_figures_within_tolerance_or_not_compared_pass() -> None:
    script = load_script()
    base = {"rounds": {"1000": {"jobs": {"10000": {"round_s": 1.0}}, "reclaim_s": 0.1}}}
    now = {"rounds": {"1000": {"jobs": {"10000": {"round_s": 2.4}}, "reclaim_s": 9.0}}}
    assert script.compare(now, base, TOLERANCE) == []  # type: ignore[attr-defined]
    # a size the baseline lacks, or one the run lacks, is not compared
    assert script.compare({"rounds": {}}, base, TOLERANCE) == []  # type: ignore[attr-defined]
