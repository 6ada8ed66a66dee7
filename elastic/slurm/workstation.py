"""A rebalancing round on an experiment's Slurm controller, from the workstation.

The sites file is the workstation's: it goes to the head under a name of its own, the round
runs there with it (``python -m elastic.slurm rebalance``, the same program a timer on the head
runs), and only a round that accepted it makes it the head's current sites file
(``elastic.node_paths.SITES_FILE``). A file the round refuses is taken away again, and its error names the
workstation's file and the field, so a bad file never replaces a good one.
"""

from __future__ import annotations

import json
import shlex
import uuid
from pathlib import Path
from typing import Any

from elastic import node_paths
from elastic.errors import InputError, PtcError
from elastic.manager.workstation import controller
from elastic.policies.downscaling import make_downscaling_policy
from elastic.remote import ssh

# A round waits for Slurm to power each terminated node down: minutes at most.
TIMEOUT_S = 900.0


class RoundFailed(PtcError):
    """The round ran on the head and failed there (not the sites file's fault)."""


def rebalance(inventory: Path, ssh_config: Path, sites: Path | None, policy: str) -> dict[str, Any]:
    """One round under ``policy`` (OI, FO, AP-X) with the sites in ``sites`` (None: the
    head's current sites, the deploy's or the last round's); its report
    (``RoundReport.to_json``), as the head logged it."""
    try:  # a wrong name is refused before anything moves
        make_downscaling_policy(policy)
    except InputError as err:
        raise InputError(f"--policy {policy}: {err}") from err
    head = controller(inventory, "to run it on")
    if sites is None:
        return _round(ssh_config, head, node_paths.SITES_FILE, policy, shown=node_paths.SITES_FILE)
    try:
        text = sites.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"--sites {sites}: cannot read it ({err.strerror})") from err
    # a name of its own: two operators' rounds at once do not take each other's file
    config_dir = node_paths.ELASTIC_CONFIG_DIR
    staged = f"{config_dir}/.sites-{uuid.uuid4().hex[:12]}.yml"
    ssh.run(
        ssh_config,
        head,
        f"install -d -m 0755 {config_dir} && cat > {staged}.part && mv -f {staged}.part {staged}",
        stdin=text,
        timeout=60,
    )
    try:
        report = _round(ssh_config, head, staged, policy, shown=str(sites))
    except PtcError:  # the head keeps its current file, and no stray copy
        ssh.execute(ssh_config, head, f"rm -f {staged}", timeout=60)
        raise
    ssh.run(ssh_config, head, f"mv -f {staged} {node_paths.SITES_FILE}", timeout=60)
    return report


def _round(ssh_config: Path, head: str, sites: str, policy: str, shown: str) -> dict[str, Any]:
    """The round on ``head`` over the sites file ``sites`` there (``shown``: its name for the
    user, in a refusal); its report."""
    program = (
        f"cd / && PYTHONPATH={node_paths.REPOSITORY} {node_paths.ELASTIC_VENV}/bin/python "
        f"-m elastic.slurm rebalance --sites {sites} --policy {shlex.quote(policy)} "
        f"--log {node_paths.REBALANCE_LOG}"
    )
    done = ssh.execute(ssh_config, head, program, timeout=TIMEOUT_S)
    if done.returncode == InputError.exit_code:
        why = (done.error_text.strip().splitlines() or ["refused"])[-1]
        raise InputError(why.replace(sites, shown))
    if done.returncode != 0:
        tail = " | ".join((done.error_text or done.text).strip().splitlines()[-3:])
        raise RoundFailed(f"{head}: the rebalancing round failed (exit {done.returncode}): {tail}")
    try:
        report: dict[str, Any] = json.loads(done.text.strip().splitlines()[-1])
    except (ValueError, IndexError) as err:
        raise RoundFailed(f"{head}: the round's report is not JSON: {done.text[-300:]!r}") from err
    return report
