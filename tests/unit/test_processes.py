"""``elastic.processes`` on a fake /proc and on real processes: start times tell a pid's reuse
apart, and a zombie does not run."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from elastic import processes


def fake_proc(tmp_path: Path, pid: int, state: str, parent: int, started: int) -> Path:
    rest = [state, str(parent)] + ["0"] * 17 + [str(started)] + ["0"] * 10
    (tmp_path / str(pid)).mkdir()
    # a command name with spaces and a ')' of its own: fields are counted from the last ')'
    (tmp_path / str(pid) / "stat").write_text(f"{pid} (odd) name) " + " ".join(rest) + "\n")
    return tmp_path


def test_fields_are_read_past_a_command_name_with_parentheses(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 42, "S", 7, 12345)
    assert processes.parent(42, proc) == 7
    assert processes.start_time(42, proc) == 12345
    assert processes.running(42, proc)
    assert processes.start_time(43, proc) is None and not processes.running(43, proc)


def test_a_zombie_does_not_run(tmp_path: Path) -> None:
    assert not processes.running(42, fake_proc(tmp_path, 42, "Z", 7, 1))


def test_a_live_child_and_its_end() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert processes.running(child.pid)
        started = processes.start_time(child.pid)
        assert processes.alive(child.pid, started)
        assert not processes.alive(child.pid, (started or 0) + 1)  # another process's pid
        child.kill()
        deadline = time.monotonic() + 10
        while processes.running(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # exited but not reaped: a zombie, which does not run
        assert not processes.running(child.pid)
    finally:
        child.kill()
        child.wait()
