"""Two experiments share a small local testbed's machines through node release and allocate.

A (1 + 2) gives node-1 back to the testbed's free pool; B (1 + 1) takes a machine from it as
a new node copied from its node-0, which its head reaches by name on B's LAN; with the testbed
full another allocation is refused and changes nothing; then the machine goes back to A, whose
node-1 returns with its name and LAN address on a fresh disk."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from naming import experiment_name
from remote import containers, ssh

from elastic.profile import rspec
from elastic.testbed.backends.local import capacity

pytestmark = [pytest.mark.integration, pytest.mark.slow]

A, B = experiment_name("sharea"), experiment_name("shareb")
PROFILE = "profiles/slurm_cluster.py"
Runner = Callable[..., subprocess.CompletedProcess[str]]


def free(ptc: Runner) -> int:
    proc = ptc("testbed", "show", "--json")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return int(data["free"])


def manifest_nodes(expdir: Path) -> dict[str, list[str]]:
    """node -> its LAN addresses, from the experiment's manifest."""
    manifest = rspec.parse_manifest((expdir / "manifest.xml").read_bytes())
    return {n.client_id: [i.ip for i in n.interfaces if i.ip] for n in manifest.nodes}


def hosts_of(expdir: Path, node: str) -> str:
    return ssh(expdir, node, "cat /etc/hosts").stdout


def names(hosts: str, address: str) -> list[str]:
    """The names /etc/hosts gives ``address``."""
    return [
        n for line in hosts.splitlines() if line.split()[:1] == [address] for n in line.split()[1:]
    ]


def test_two_experiments_share_a_small_testbed(
    ptc: Runner,
    experiment_factory: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(capacity.ENV, str(tmp_path / "small-testbed"))
    assert ptc("testbed", "set", "--machines", "5").returncode == 0
    home = Path(os.environ["PTC_HOME"]) / "experiments"
    try:
        a = experiment_factory(A, PROFILE, "computeNodeCount=2")
        b = experiment_factory(B, PROFILE, "computeNodeCount=1")
        assert free(ptc) == 0
        before = manifest_nodes(a)["node-1"]
        ssh(a, "node-1", "touch /root/the-old-disk")

        # A gives node-1 back: its container is gone, nothing of A names it, a machine is free.
        proc = ptc("node", "release", A, "node-1", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["nodes"]["node-1"] == "missing"
        assert f"ptc-{A}-node-1" not in containers(A)
        assert "node-1" not in manifest_nodes(a)
        assert "node-1" not in (a / "inventory" / "hosts.yml").read_text()
        assert "node-1" not in (a / "inventory" / "ssh_config").read_text()
        for node in ("head", "node-0"):
            assert "node-1" not in hosts_of(a, node)
        assert free(ptc) == 1
        # A later modify to the same profile parameters does not bring it back.
        assert ptc("modify", A, "-p", "computeNodeCount=2").returncode == 0
        assert "node-1" not in manifest_nodes(a) and f"ptc-{A}-node-1" not in containers(A)
        # Releasing it again, or the last nodes, is refused naming them.
        again = ptc("node", "release", A, "node-1")
        assert again.returncode != 0 and "node-1" in again.stderr
        last = ptc("node", "release", B, "head", "node-0")
        assert last.returncode != 0 and "last" in " ".join(last.stderr.split())

        # B takes the machine as a copy of its node-0, on its LAN at a free address.
        proc = ptc("node", "allocate", B, "lent-0", "--like", "node-0", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["nodes"]["lent-0"] == "running"
        assert f"ptc-{B}-lent-0" in containers(B)
        addresses = manifest_nodes(b)
        assert addresses["lent-0"] and addresses["lent-0"][0] not in (
            addresses["head"] + addresses["node-0"]
        )
        assert "lent-0" in (b / "inventory" / "hosts.yml").read_text()
        assert free(ptc) == 0
        for node in ("head", "node-0", "lent-0"):
            assert "lent-0" in names(hosts_of(b, node), addresses["lent-0"][0])
        run = ptc("run", B, "lent-0", "--", "hostname")
        assert run.returncode == 0 and "lent-0" in run.stdout, run.stderr
        # From B's head by name, over B's LAN, with the experiment's key.
        over_lan = ssh(
            b,
            "head",
            # The nodes' ssh config trusts new host keys of head, node-*, cfg-* and LAN
            # addresses only: a copy of another name is accepted the same way, by option.
            "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new "
            "-o UserKnownHostsFile=/root/.ssh/known_hosts.ptc lent-0 hostname && "
            "ip -o route get $(getent hosts lent-0 | cut -d' ' -f1)",
        )
        assert over_lan.stdout.splitlines()[0] == "lent-0"
        assert f"{addresses['lent-0'][0]} dev eth1" in over_lan.stdout

        # With the testbed full, another allocation is refused naming the free count, and
        # nothing changes.
        manifest_b = (b / "manifest.xml").read_bytes()
        full = ptc("node", "allocate", B, "lent-1", "--like", "node-0")
        assert full.returncode == 3, full.stderr
        assert "has 0 free of 5" in " ".join(full.stderr.split())
        assert f"ptc-{B}-lent-1" not in containers(B)
        assert (b / "manifest.xml").read_bytes() == manifest_b
        refused = ptc("node", "allocate", A, "node-1")
        assert refused.returncode == 3 and "0 free" in " ".join(refused.stderr.split())
        assert "node-1" not in manifest_nodes(a)

        # B's status, a modify and a rebuilt inventory keep the copy.
        status = ptc("status", B)
        assert status.returncode == 0 and "lent-0" in status.stdout, status.stderr
        assert ptc("modify", B, "-p", "computeNodeCount=1").returncode == 0
        assert "lent-0" in manifest_nodes(b) and f"ptc-{B}-lent-0" in containers(B)
        assert ptc("inventory", B).returncode == 0
        assert "lent-0" in (b / "inventory" / "hosts.yml").read_text()

        # lent-0 goes back to the pool, and A's node-1 comes back: same name and address,
        # a fresh disk, reachable from the host and by name from A's head.
        assert ptc("node", "release", B, "lent-0").returncode == 0
        assert f"ptc-{B}-lent-0" not in containers(B)
        assert "lent-0" not in hosts_of(b, "head")
        assert free(ptc) == 1
        present = ptc("node", "allocate", A, "node-0")
        assert present.returncode != 0 and "node-0" in present.stderr
        proc = ptc("node", "allocate", A, "node-1")
        assert proc.returncode == 0, proc.stderr
        assert manifest_nodes(a)["node-1"] == before
        assert ssh(a, "node-1", "test -e /root/the-old-disk", check=False).returncode == 1
        assert ssh(a, "head", "ssh -o BatchMode=yes node-1 hostname").stdout.strip() == "node-1"
        assert "node-1" in names(hosts_of(a, "node-0"), before[0])
        assert free(ptc) == 0
    finally:
        for name in (A, B):
            if (home / name).exists():
                ptc("down", name)
