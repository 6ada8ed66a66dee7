"""The nfs_client role's check, ptc-nfs-check: every check of an export in one command, each
failure naming the export and why.

The exports are directories under a temporary root, the host's mounts are symlinks or copies of
them, and a stand-in ptc-nfs-cat on PATH answers as the server would (the real one runs on the
local testbed, in every deploy).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from elastic.paths import REPO_ROOT

CHECK = REPO_ROOT / "roles" / "nfs_client" / "files" / "ptc-nfs-check"
MARKER = "ptc NFS export {path} served by head\n"


def layout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Exports home and opt-ptc under a root, each with its marker, and the host's paths for
    them (symlinks: the same directories)."""
    root = tmp_path / "exports"
    paths = {}
    for name in ("home", "opt-ptc"):
        (root / name).mkdir(parents=True)
        (root / name / ".ptc-export").write_text(MARKER.format(path=f"/{name}"))
        paths[name] = str(tmp_path / "mnt" / name)
        Path(paths[name]).parent.mkdir(exist_ok=True)
        Path(paths[name]).symlink_to(root / name)
    return root, paths


def server(tmp_path: Path, served: dict[str, str]) -> dict[str, str]:
    """An environment whose ptc-nfs-cat serves ``served`` (URL -> marker); any other URL
    fails as a refusal does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    cases = "".join(f'  "{url}") printf %s "{text}" ;;\n' for url, text in served.items())
    (bin_dir / "ptc-nfs-cat").write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"{cases}"
        '  *) echo "nfs-cat: mount failed: NFS4ERR_ACCESS" >&2; exit 10 ;;\n'
        "esac\n"
    )
    (bin_dir / "ptc-nfs-cat").chmod(0o755)
    return os.environ | {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def check(
    root: Path, paths: dict[str, str], env: dict[str, str], *flags: str, premounted: str = "true"
) -> subprocess.CompletedProcess[str]:
    mounts = [f"{name}:{path}" for name, path in paths.items()]
    argv = [str(CHECK), *flags, "head", str(root), premounted, "version=4", *mounts]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


def served_all(paths: dict[str, str]) -> dict[str, str]:
    return {
        f"nfs://head{path}/.ptc-export?version=4": Path(path, ".ptc-export").read_text()
        for path in paths.values()
    }


def test_exports_mounted_and_served_pass(tmp_path: Path) -> None:
    root, paths = layout(tmp_path)
    done = check(root, paths, server(tmp_path, served_all(paths)))
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_missing_marker_says_to_run_the_server_role_first_also_with_visible(
    tmp_path: Path,
) -> None:
    root, paths = layout(tmp_path)
    env = server(tmp_path, served_all(paths))
    (root / "opt-ptc" / ".ptc-export").unlink()
    for flags in ((), ("--visible",)):
        done = check(root, paths, env, *flags)
        assert done.returncode == 1
        assert f"{root}/opt-ptc holds no .ptc-export marker: run the nfs_server role on head" in (
            done.stderr
        )
        assert "home" not in done.stderr.replace(f"{root}/opt-ptc", "")  # home is fine


def test_visible_alone_does_not_ask_the_server(tmp_path: Path) -> None:
    root, paths = layout(tmp_path)
    env = server(tmp_path, {})  # it refuses every URL
    assert check(root, paths, env, "--visible").returncode == 0


def test_a_path_that_is_not_the_export_is_named(tmp_path: Path) -> None:
    root, paths = layout(tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / ".ptc-export").write_text(MARKER.format(path="/home"))
    Path(paths["home"]).unlink()
    Path(paths["home"]).symlink_to(other)
    env = server(tmp_path, served_all(paths))
    done = check(root, paths, env)
    assert done.returncode == 1
    assert f"{paths['home']} is not {root}/home mounted by the host" in done.stderr
    # Not premounted (the role bind-mounted it): only the markers are compared, and they match.
    assert check(root, paths, env, premounted="false").returncode == 0


def test_a_refusal_and_a_different_marker_over_nfs_are_named(tmp_path: Path) -> None:
    root, paths = layout(tmp_path)
    served = served_all(paths)
    home_url = f"nfs://head{paths['home']}/.ptc-export?version=4"
    served[home_url] = "ptc NFS export /srv served by head"
    del served[f"nfs://head{paths['opt-ptc']}/.ptc-export?version=4"]
    done = check(root, paths, server(tmp_path, served))
    assert done.returncode == 1
    assert f"nfs://head{paths['home']} is not served as the directory mounted at" in done.stderr
    assert f"nfs://head{paths['opt-ptc']} is not served to this host" in done.stderr
    assert "NFS4ERR_ACCESS" in done.stderr
