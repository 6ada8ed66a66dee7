"""The node containers' grants: named capabilities only, their own cgroup, ptc's state hidden."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.testbed.backends.local import privileges


def test_nodes_are_not_privileged_and_drop_every_capability_first() -> None:
    args = privileges.container_args()
    assert "--privileged" not in args
    assert args[:2] == ["--cap-drop", "all"]
    granted = set(args[args.index("--cap-add") + 1].split(","))
    assert granted == set(privileges.CAPABILITIES)
    # reading host files by handle: the experiment's file server's alone, no node's
    assert "DAC_READ_SEARCH" not in granted
    # Each of these would give root on a node the host (mounts, devices, modules, network).
    assert not granted & {"SYS_ADMIN", "NET_ADMIN", "MKNOD", "SYS_MODULE", "SYS_RAWIO"}
    assert not any(a.startswith("--device") for a in args)


def test_every_grant_says_why() -> None:
    grants = privileges.CAPABILITIES
    assert all(reason.strip() for reason in grants.values())


def test_a_node_sees_only_its_own_cgroup_and_it_goes_with_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "systemd").mkdir()
    (tmp_path / "systemd" / "cgroup.procs").write_text("")
    monkeypatch.setattr(privileges, "CGROUP_V1", tmp_path)
    args = privileges.cgroup_args("ptc-exp-node-0")
    parent = args[args.index("--cgroup-parent") + 1]
    assert "exp" not in parent  # other nodes list the parent's siblings' names
    volumes = [args[i + 1] for i, a in enumerate(args) if a == "--volume"]
    assert sorted(v.split(":")[1] for v in volumes) == sorted(
        str(tmp_path / c) for c in privileges.CGROUP_CONTROLLERS
    )
    for volume in volumes:
        source = Path(volume.split(":")[0])
        assert source == tmp_path / Path(volume.split(":")[1]).name / parent.lstrip("/")
        assert source.is_dir()
    (tmp_path / "memory" / parent.lstrip("/") / "system.slice" / "slurmd.service").mkdir(
        parents=True
    )
    privileges.release_cgroup("ptc-exp-node-0")
    assert not any((tmp_path / c / parent.lstrip("/")).exists() for c in ("memory", "cpuset"))


def test_ptc_state_inside_the_repository_is_hidden_from_nodes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "state").mkdir(parents=True)
    args = privileges.repository_masks(repo, [repo / "state", tmp_path / "elsewhere"])
    assert args == ["--tmpfs", "/local/repository/state:ro,size=4k,mode=0555,notmpcopyup"]


def test_only_the_outermost_existing_state_directory_is_covered(tmp_path: Path) -> None:
    """A mount point inside a covered directory would show its name to the node."""
    repo = tmp_path / "repo"
    (repo / "state" / "it-other").mkdir(parents=True)
    args = privileges.repository_masks(
        repo, [repo / "state" / "it-other", repo / "state", repo / "cache-not-made", repo]
    )
    assert args == ["--tmpfs", "/local/repository/state:ro,size=4k,mode=0555,notmpcopyup"]


def test_the_masked_directories_are_found_from_a_created_container(tmp_path: Path) -> None:
    """podman inspect's shape: HostConfig.Tmpfs maps the container path to its options."""
    repo = tmp_path / "repo"
    info = {
        "Mounts": [
            {"Destination": "/local/shared", "Source": str(tmp_path / "shared")},
            {"Destination": "/local/repository", "Source": str(repo)},
        ],
        "HostConfig": {
            "Tmpfs": {
                "/local/repository/state": "ro,size=4k,mode=0555,rprivate,nosuid,nodev",
                "/local/repository/.cache/ptc": "ro,size=4k",
                "/local/repository-other/x": "ro",
                "/local/repository/../escape": "ro",
                "/tmp": "rw",
            }
        },
    }
    assert privileges.mask_targets(info) == [repo / ".cache" / "ptc", repo / "state"]
    assert privileges.mask_targets({"HostConfig": {"Tmpfs": None}, "Mounts": None}) == []


def test_the_repository_is_mounted_read_only_without_the_mounts_beneath_it(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / "state").mkdir(parents=True)
    args = privileges.repository_args(repo, [repo / "state"])
    [volume] = [args[i + 1] for i, a in enumerate(args) if a == "--volume"]
    source, target, options = volume.split(":")
    assert (source, target) == (str(repo), "/local/repository")
    # "bind", not podman's default "rbind": an experiment's share mounted under ./state
    # would otherwise be in every node, writable
    assert set(options.split(",")) == {"ro", "bind"}
    assert args[args.index("--tmpfs") + 1].startswith("/local/repository/state:ro")
