"""The nfs_client role's probe, ptc-nfs-cat: which nfs-cat failures it retries, and which not.

The real collision is reproduced on the local testbed (tests/integration/test_cluster.py); here
a stand-in nfs-cat on PATH replays each failure deterministically, so the retry rule is pinned.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from elastic.paths import REPO_ROOT

PROBE = REPO_ROOT / "roles" / "nfs_client" / "files" / "ptc-nfs-cat"
URL = "nfs://head/home/.ptc-export?version=4"
STALE = (
    "Failed to mount nfs share : mount_cb: NFS4: SETCLIENTID_CONFIRM (path /home) failed with "
    "NFS4ERR_STALE_CLIENTID(-5)"
)


def stand_in(tmp_path: Path, *outcomes: tuple[int, str]) -> Path:
    """An nfs-cat that answers call N with outcomes[N] (the last repeats) and logs each call."""
    script = [
        "#!/bin/sh",
        f'n=$(wc -l < "{tmp_path}/calls" 2>/dev/null || echo 0)',
        f'echo "$1" >> "{tmp_path}/calls"',
    ]
    for index, (rc, stderr) in enumerate(outcomes):
        test = f'[ "$n" -eq {index} ]' if index < len(outcomes) - 1 else "true"
        body = 'echo "ptc NFS export /home"' if rc == 0 else f"echo '{stderr}' >&2"
        script.append(f"if {test}; then {body}; exit {rc}; fi")
    path = tmp_path / "bin" / "nfs-cat"
    path.parent.mkdir()
    path.write_text("\n".join(script) + "\n")
    path.chmod(0o755)
    return path.parent


def probe(
    tmp_path: Path, *outcomes: tuple[int, str]
) -> tuple[subprocess.CompletedProcess[str], int]:
    bin_dir = stand_in(tmp_path, *outcomes)
    env = os.environ | {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run([str(PROBE), URL], capture_output=True, text=True, env=env, timeout=60)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert set(calls) == {URL}
    return proc, len(calls)


@pytest.mark.parametrize(
    "error", ["NFS4ERR_STALE_CLIENTID", "NFS4ERR_EXPIRED", "NFS4ERR_CLID_INUSE"]
)
def test_a_client_id_collision_is_retried(tmp_path: Path, error: str) -> None:
    proc, calls = probe(tmp_path, (10, STALE.replace("NFS4ERR_STALE_CLIENTID", error)), (0, ""))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ptc NFS export /home\n" and proc.stderr == ""
    assert calls == 2


def test_a_read_cut_short_by_a_takeover_is_retried(tmp_path: Path) -> None:
    """The takeover can fall between the open and the read: nfs-cat then names no NFS4ERR."""
    proc, calls = probe(tmp_path, (10, "Failed to read from file"), (0, ""))
    assert (proc.returncode, calls) == (0, 2), proc.stderr


def test_a_refusal_fails_at_once_with_nfs_cats_message(tmp_path: Path) -> None:
    refused = (
        "Failed to mount nfs share : mount_cb: NFS4: PUTROOTFH failed with NFS4ERR_ACCESS(-13)"
    )
    proc, calls = probe(tmp_path, (10, refused))
    assert (proc.returncode, calls) == (10, 1)
    assert "NFS4ERR_ACCESS" in proc.stderr


def test_a_collision_that_persists_gives_up_after_five_tries(tmp_path: Path) -> None:
    proc, calls = probe(tmp_path, (10, STALE))
    assert (proc.returncode, calls) == (10, 5)
    assert "NFS4ERR_STALE_CLIENTID" in proc.stderr


def test_usage_is_explained(tmp_path: Path) -> None:
    proc = subprocess.run([str(PROBE)], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage: ptc-nfs-cat" in proc.stderr
