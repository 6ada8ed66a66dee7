"""Slurm daemons on their groups, every compute node usable, accounting answering.

On an elastic cluster (`ptc deploy NAME -e ptc_elastic=true`) the pool nodes outside Slurm's
partition are powered down as Slurm sees them: slurmd is stopped there until Slurm resumes the
node, so the checks of slurmd and of the node's state skip them and say so."""

from __future__ import annotations

import re
import shlex
import time
from typing import Any

import pytest
from conftest import cluster_var, group, name_of, require_group, skip_if_powered_down
from testinfra.host import Host

MAIL_PROGRAM = "/usr/local/sbin/ptc-slurm-mail"
MAIL_LOG = "/var/log/slurm/mail.log"


def test_slurmctld_active(host: Host) -> None:
    require_group(host, "slurm_controller")
    assert host.service("slurmctld").is_running, f"{name_of(host)}: slurmctld is not running"


def test_slurmctld_comes_back_after_a_failure(host: Host) -> None:
    """systemd restarts a slurmctld that dies (Debian's unit does not), and leaves the power
    programs it started to finish."""
    require_group(host, "slurm_controller")
    unit = host.check_output("systemctl show slurmctld --property=Restart,KillMode")
    found = dict(line.split("=", 1) for line in unit.splitlines())
    assert found == {"Restart": "on-failure", "KillMode": "process"}, f"{name_of(host)}: {found}"


def test_slurmdbd_active(host: Host) -> None:
    require_group(host, "slurm_dbd")
    assert host.service("slurmdbd").is_running, f"{name_of(host)}: slurmdbd is not running"


def test_slurmd_active(host: Host, other: Any) -> None:
    require_group(host, "slurm_compute")
    skip_if_powered_down(host, other)
    assert host.service("slurmd").is_running, f"{name_of(host)}: slurmd is not running"


def test_node_idle_in_sinfo(host: Host, other: Any) -> None:
    require_group(host, "slurm_compute")
    skip_if_powered_down(host, other)
    me = name_of(host)
    controller = other(group(host, "slurm_controller")[0])
    out = controller.run(f"sinfo --noheader --nodes={me} --format=%T")
    state = out.stdout.strip() or out.stderr.strip()
    assert out.rc == 0 and state == "idle", (
        f"{me}: sinfo on the controller says {state!r}, not idle"
    )


def test_accounting_knows_cluster(host: Host) -> None:
    require_group(host, "slurm_controller")
    if not group(host, "slurm_dbd"):
        pytest.skip("no accounting daemon in this cluster (slurm_dbd is empty)")
    out = host.run("sacctmgr --noheader --parsable2 show cluster format=cluster")
    assert out.rc == 0 and out.stdout.strip(), (
        f"{name_of(host)}: sacctmgr lists no cluster ({out.stderr.strip()})"
    )


def test_mail_requests_are_recorded_not_lost(host: Host) -> None:
    """slurmctld accepts its MailProg, and with no mailer (slurm_mail_prog empty, the default) a
    job's mail request is recorded, unsent, in the controller's mail log."""
    require_group(host, "slurm_controller")
    me = name_of(host)
    log = host.file("/var/log/slurm/slurmctld.log").content_string
    # Since slurmctld last started: earlier lines may predate the current configuration.
    current = log[max(0, log.rfind("slurmctld version")) :]
    errors = [ln for ln in current.splitlines() if "error" in ln and "MailProg" in ln]
    assert not errors, f"{me}: slurmctld.log: {errors[:2]}"
    mailer = str(cluster_var(host, "slurm_mail_prog", ""))
    if mailer:
        pytest.skip(
            f"{me}: slurm_mail_prog is {mailer}, the site's mailer; its delivery is the site's"
        )
    assert host.file(MAIL_PROGRAM).mode & 0o111, f"{me}: {MAIL_PROGRAM} is not executable"
    # Under power saving (an elastic pool), a test job would resume a powered-down pool node
    # and leave it up: verify must not change the cluster it checks.
    config = host.run("scontrol show config").stdout
    if re.search(r"^SuspendProgram\s*=\s*/", config, re.MULTILINE):
        pytest.skip(
            f"{me}: power saving is on (SuspendProgram): a test job would resume a powered-down "
            "pool node"
        )
    user = str(cluster_var(host, "common_cluster_user", "ptc"))
    submit = (
        f"sbatch --parsable -N1 -t 1 -o /dev/null --mail-type=END --mail-user={user} --wrap true"
    )
    out = host.run(f"cd /tmp && runuser -u {user} -- sh -c {shlex.quote(submit)}")
    assert out.rc == 0, f"{me}: sbatch --mail-type=END failed: {out.stderr.strip()[-300:]}"
    job = out.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        recorded = host.run(f"grep -F ' job={job} ' {MAIL_LOG}")
        if recorded.rc == 0:
            break
        time.sleep(2)
    assert recorded.rc == 0, f"{me}: job {job}'s mail request is not in {MAIL_LOG}"
    assert f"to={user} " in recorded.stdout and "not sent" in recorded.stdout, recorded.stdout
