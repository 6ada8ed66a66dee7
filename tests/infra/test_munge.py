"""MUNGE: running on every Slurm host, one key per cluster, credentials valid across nodes."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import group, name_of, powered_off, require_group
from testinfra.host import Host

SLURM_GROUPS = ("slurm_controller", "slurm_dbd", "slurm_compute")
KEY = "/etc/munge/munge.key"


def munge_hosts(host: Host) -> list[str]:
    members: list[str] = []
    for g in SLURM_GROUPS:
        members += [h for h in group(host, g) if h not in members]
    return members


def key_digest(node: Host) -> str:
    # Only the hash leaves the node; the key itself is never read here.
    out = node.run(f"sha256sum {KEY}")
    assert out.rc == 0, f"cannot hash {KEY}: {out.stderr.strip()}"
    return out.stdout.split()[0]


def test_munge_active(host: Host) -> None:
    require_group(host, *SLURM_GROUPS)
    assert host.service("munge").is_running, f"{name_of(host)}: munge is not running"


def test_munge_key_owner_and_mode(host: Host) -> None:
    require_group(host, *SLURM_GROUPS)
    key = host.file(KEY)
    assert key.exists, f"{name_of(host)}: {KEY} is missing"
    assert (key.user, key.mode) == ("munge", 0o400), (
        f"{name_of(host)}: {KEY} is {key.user} {oct(key.mode)}, expected munge 0o400"
    )


def test_munge_key_matches_controller(host: Host, other: Any) -> None:
    require_group(host, *SLURM_GROUPS)
    reference = group(host, "slurm_controller")[0]
    if name_of(host) == reference:
        pytest.skip(f"{reference} is the reference the other nodes' keys are compared with")
    assert key_digest(host) == key_digest(other(reference)), (
        f"{name_of(host)}: munge key differs from {reference}'s (sha256 compared)"
    )


def test_munge_credential_decodes_on_next_node(host: Host) -> None:
    """munge -n here | ssh NEXT unmunge: the credential is accepted by another node."""
    require_group(host, *SLURM_GROUPS)
    me = name_of(host)
    # a node the testbed powered off cannot decode anything: the next one that runs does
    nodes = [n for n in munge_hosts(host) if n == me or n not in powered_off()]
    if len(nodes) < 2:
        pytest.skip(f"{me}: no other munge node up to decode a credential")
    peer = nodes[(nodes.index(me) + 1) % len(nodes)]
    out = host.run(f"munge -n | ssh -o BatchMode=yes -o ConnectTimeout=10 {peer} unmunge")
    assert out.rc == 0, (
        f"{me}: a munge credential from {me} was not accepted by {peer} "
        f"(rc={out.rc}: {(out.stderr or out.stdout).strip()[-300:]})"
    )
    assert "STATUS:          Success" in out.stdout, f"{me}: unmunge on {peer}: {out.stdout}"
