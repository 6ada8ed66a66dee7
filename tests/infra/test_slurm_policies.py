"""Slurm as a production site runs it: memory is a resource and is enforced, accounting is
enforced, priority is multifactor with fair-share, partition limits hold at submission, compute
nodes check their own health, and slurmrestd answers with a JWT and refuses without one.

Each check reads what the inventory asks for (role defaults otherwise), so the suite runs against
any ptc inventory. Jobs here are tiny and run as the cluster user.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
from conftest import (
    cluster_var,
    group,
    name_of,
    require_group,
    skip_if_powered_down,
    variables,
)
from testinfra.host import Host

HEALTH_CHECK = "/usr/local/sbin/ptc-slurm-healthcheck"


def controller(host: Host, other: Any) -> Host:
    node: Host = other(group(host, "slurm_controller")[0])
    return node


def slurm_config(node: Host) -> dict[str, str]:
    """`scontrol show config` as a dict (keys as Slurm prints them)."""
    out = node.run("scontrol show config")
    assert out.rc == 0, f"scontrol show config failed: {out.stderr.strip()}"
    config: dict[str, str] = {}
    for line in out.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def cluster_user(host: Host) -> str:
    return str(cluster_var(host, "common_cluster_user", "ptc"))


def as_user(user: str, command: str) -> str:
    return f"cd /tmp && runuser -u {user} -- sh -c {shlex.quote(command)}"


def test_memory_is_a_consumable_resource(host: Host) -> None:
    require_group(host, "slurm_controller")
    config = slurm_config(host)
    wanted = str(cluster_var(host, "slurm_select_type_parameters", "CR_Core_Memory"))
    assert config.get("SelectTypeParameters", "").upper() == wanted.upper(), (
        f"{name_of(host)}: SelectTypeParameters is {config.get('SelectTypeParameters')}, not {wanted}"
    )
    if "MEMORY" in wanted.upper():
        assert config.get("DefMemPerCPU", "UNLIMITED") not in ("UNLIMITED", "0"), (
            f"{name_of(host)}: no DefMemPerCPU, so a job without --mem takes a whole node's memory"
        )


def test_node_memory_from_facts_minus_reserve(host: Host, other: Any) -> None:
    require_group(host, "slurm_compute")
    me = name_of(host)
    node = controller(host, other).run(f"scontrol show node {me}").stdout
    real = int(re.search(r"RealMemory=(\d+)", node).group(1))  # type: ignore[union-attr]
    total = int(host.run("awk '/^MemTotal/ {print int($2 / 1024)}' /proc/meminfo").stdout)
    reserve = int(cluster_var(host, "slurm_node_memory_reserve_mb", 1024))
    assert total // 2 <= real <= total - min(reserve, total // 2) + 1, (
        f"{me}: RealMemory={real} MiB, but MemTotal is {total} MiB and the reserve {reserve} MiB"
    )


def test_job_memory_and_cores_are_enforced(host: Host, other: Any) -> None:
    """A step over its --mem is killed; a step asking for one core is bound to fewer CPUs."""
    require_group(host, "slurm_compute")
    plugins = str(cluster_var(host, "slurm_task_plugin", "task/cgroup,task/affinity"))
    if "task/cgroup" not in plugins:
        pytest.skip(f"slurm_task_plugin is {plugins!r}: no task/cgroup to enforce limits")
    skip_if_powered_down(host, other)  # srun -w would resume an elastic pool node
    me = name_of(host)
    ctl = controller(host, other)
    user = cluster_user(host)
    srun = f"srun --immediate=120 -w {me} -N1 -n1"
    grab = "python3 -c 'x = bytearray(256 << 20); x[::4096] = b\"1\" * len(x[::4096])'"
    over = ctl.run(as_user(user, f"{srun} --mem=64M {grab}"))
    assert over.rc != 0 and "Out Of Memory" in over.stderr + over.stdout, (
        f"{me}: a step with --mem=64M used 256 MiB and was not killed (rc={over.rc}: "
        f"{(over.stderr + over.stdout).strip()[-300:]})"
    )
    within = ctl.run(as_user(user, f"{srun} --mem=512M {grab}"))
    assert within.rc == 0, f"{me}: a step within --mem=512M failed: {within.stderr.strip()[-300:]}"
    cpus = int(host.run("nproc --all").stdout)
    if cpus > 1:
        bound = ctl.run(as_user(user, f"{srun} -c1 grep Cpus_allowed_list /proc/self/status"))
        allowed = bound.stdout.split(":")[-1].strip()
        assert bound.rc == 0 and allowed and allowed != f"0-{cpus - 1}", (
            f"{me}: a one-core step may run on CPUs {allowed!r} of {cpus}: no CPU binding"
        )


def test_accounting_is_enforced(host: Host) -> None:
    require_group(host, "slurm_controller")
    if not group(host, "slurm_dbd"):
        pytest.skip("no accounting daemon in this cluster (slurm_dbd is empty)")
    config = slurm_config(host)
    wanted = str(
        cluster_var(host, "slurm_accounting_storage_enforce", "associations,limits,qos,safe")
    )
    have = set(config.get("AccountingStorageEnforce", "").split(","))
    assert set(wanted.split(",")) <= have, (
        f"{name_of(host)}: AccountingStorageEnforce is {config.get('AccountingStorageEnforce')!r}, "
        f"not {wanted}"
    )


def test_user_without_association_is_refused(host: Host) -> None:
    require_group(host, "slurm_controller")
    if not group(host, "slurm_dbd"):
        pytest.skip("no accounting daemon in this cluster (slurm_dbd is empty)")
    assoc = host.run(
        "sacctmgr --noheader --parsable2 show association where user=nobody format=user"
    )
    assert assoc.rc == 0 and not assoc.stdout.strip(), f"{name_of(host)}: nobody has an association"
    out = host.run(as_user("nobody", "sbatch --test-only -N1 --wrap true"))
    assert out.rc != 0 and "Invalid account" in out.stderr, (
        f"{name_of(host)}: a job of nobody (no association) was not refused: "
        f"{(out.stderr + out.stdout).strip()[-300:]}"
    )


def test_multifactor_priority_with_fairshare(host: Host) -> None:
    require_group(host, "slurm_controller")
    config = slurm_config(host)
    assert config.get("PriorityType") == "priority/multifactor", (
        f"{name_of(host)}: PriorityType is {config.get('PriorityType')}"
    )
    weights = dict(cluster_var(host, "slurm_priority_weights", {"Fairshare": 10000}))
    # Slurm prints its own spelling (PriorityWeightFairShare); keys are case-insensitive.
    lowered = {k.lower(): v for k, v in config.items()}
    for key, weight in weights.items():
        have = lowered.get(f"priorityweight{key}".lower())
        assert have == str(weight), f"{name_of(host)}: PriorityWeight{key} is {have}, not {weight}"

    sprio = host.run("sprio --weights --noheader")
    assert sprio.rc == 0 and sprio.stdout.strip(), f"{name_of(host)}: sprio -w shows no weights"
    if not group(host, "slurm_dbd"):  # the weights above are checked; fair share needs accounting
        return
    user = cluster_user(host)
    share = host.run(
        f"sshare --noheader --parsable2 --users={user} --format=Account,User,NormShares,FairShare"
    )
    mine = [line.split("|") for line in share.stdout.splitlines() if f"|{user}|" in line]
    assert share.rc == 0 and mine, (
        f"{name_of(host)}: sshare shows no share for {user}: {share.stdout}"
    )
    # FairShare is 0 until the first PriorityCalcPeriod after the association appeared.
    norm, fairshare = float(mine[0][2]), float(mine[0][3])
    assert norm > 0.0 and 0.0 <= fairshare <= 1.0, (
        f"{name_of(host)}: {user}'s NormShares is {norm} and FairShare {fairshare}"
    )


def test_partition_limits_hold_at_submission(host: Host) -> None:
    """EnforcePartLimits=ALL: a job beyond every partition's limits is refused, not queued."""
    require_group(host, "slurm_controller")
    config = slurm_config(host)
    assert config.get("EnforcePartLimits") == str(
        cluster_var(host, "slurm_enforce_part_limits", "ALL")
    )
    nodes = len(group(host, "slurm_compute"))
    out = host.run(as_user(cluster_user(host), f"sbatch --test-only -N{nodes + 1} --wrap true"))
    assert out.rc != 0 and "Node count specification invalid" in out.stderr, (
        f"{name_of(host)}: a {nodes + 1}-node job was not refused: {(out.stderr + out.stdout).strip()}"
    )
    part = host.run("scontrol show partition --oneliner").stdout.splitlines()
    default = next((p for p in part if "Default=YES" in p), part[0] if part else "")
    limit = re.search(r"MaxTime=(\S+)", default)
    if limit and limit.group(1) != "UNLIMITED":
        over = host.run(
            as_user(cluster_user(host), "sbatch --test-only -N1 --time=365-0 --wrap true")
        )
        assert over.rc != 0 and "time limit" in over.stderr, (
            f"{name_of(host)}: a job over MaxTime={limit.group(1)} was not refused: {over.stderr.strip()}"
        )


def test_health_check_installed_and_passing(host: Host, other: Any) -> None:
    require_group(host, "slurm_compute")
    skip_if_powered_down(host, other)  # the check runs with slurmd, which is not running
    interval = int(cluster_var(host, "slurm_health_check_interval", 300))
    if interval <= 0:
        pytest.skip(f"slurm_health_check_interval is {interval}: no health check")
    config = slurm_config(controller(host, other))
    assert config.get("HealthCheckProgram") == HEALTH_CHECK, (
        f"{name_of(host)}: HealthCheckProgram is {config.get('HealthCheckProgram')}"
    )
    assert host.file(HEALTH_CHECK).mode & 0o111, (
        f"{name_of(host)}: {HEALTH_CHECK} is not executable"
    )
    out = host.run(f"{HEALTH_CHECK} --dry-run")
    assert out.rc == 0 and out.stdout.strip() == "ok", (
        f"{name_of(host)}: the health check fails here: {(out.stdout + out.stderr).strip()}"
    )
    for key, var in (
        ("MOUNTS", "slurm_health_check_mounts"),
        ("COMMANDS", "slurm_health_check_commands"),
    ):
        checked = host.run(
            f"bash -c '. /etc/slurm/ptc-healthcheck.conf; echo ${{{key}[@]}}'"
        ).stdout.split()
        wanted = cluster_var(host, var, None)
        if isinstance(wanted, list):
            assert checked == wanted, (
                f"{name_of(host)}: the health check requires {key.lower()} {checked}, not {wanted}"
            )


def test_prolog_and_epilog_as_set(host: Host, other: Any) -> None:
    require_group(host, "slurm_compute")
    config = slurm_config(controller(host, other))
    for key, var in (("Prolog", "slurm_prolog"), ("Epilog", "slurm_epilog")):
        text = cluster_var(host, var, "")
        path = f"/etc/slurm/ptc-{key.lower()}"
        if text:
            assert config.get(key) == path and host.file(path).mode & 0o111, (
                f"{name_of(host)}: {key} is {config.get(key)!r}; {path} should be an executable"
            )
        else:
            assert config.get(key, "(null)") == "(null)", (
                f"{name_of(host)}: {key} is set but unwanted"
            )


def restd_request(node: Host, url: str, user: str | None, token: str | None) -> tuple[str, str]:
    headers = f"-H 'X-SLURM-USER-NAME: {user}' -H 'X-SLURM-USER-TOKEN: {token}'" if token else ""
    out = node.run(f"curl -s -m 20 -w '\\n%{{http_code}}' {headers} {url}")
    body, _, code = out.stdout.rpartition("\n")
    return code.strip(), body


def test_slurmrestd_needs_a_token(host: Host, other: Any) -> None:
    """From a compute node over the cluster LAN: 200 with a JWT, 401 without one."""
    require_group(host, "slurm_compute")
    if not cluster_var(host, "slurm_restd_enabled", True):
        pytest.skip("slurm_restd_enabled is false")
    ctl_name = group(host, "slurm_controller")[0]
    ctl = other(ctl_name)
    address_var = str(cluster_var(host, "slurm_node_address_var", "ptc_lan_address"))
    ctl_vars = variables(ctl)
    address = ctl_vars.get(address_var, ctl_vars.get("ansible_host", ctl_name))
    port = int(cluster_var(host, "slurm_restd_port", 6820))
    url = f"http://{address}:{port}/slurm/v0.0.38/ping"
    user = cluster_user(host)
    code, body = restd_request(host, url, None, None)
    assert code == "401", f"{name_of(host)}: {url} without a token answered {code}, not 401"
    token = ctl.run(f"scontrol token username={user} lifespan=120").stdout.strip()
    assert token.startswith("SLURM_JWT="), f"{ctl_name}: scontrol token gave no token"
    code, body = restd_request(host, url, user, token.split("=", 1)[1])
    assert code == "200" and '"ping": "UP"' in body, (
        f"{name_of(host)}: {url} with {user}'s token answered {code}: {body[-300:]}"
    )
    code, _ = restd_request(host, url, user, "not-a-token")
    assert code != "200", f"{name_of(host)}: {url} accepted a forged token"


def test_jwt_key_is_private(host: Host) -> None:
    require_group(host, "slurm_controller", "slurm_dbd")
    if not cluster_var(host, "slurm_restd_enabled", True):
        pytest.skip("slurm_restd_enabled is false")
    path = str(cluster_var(host, "slurm_jwt_key_path", "/etc/slurm/jwt_hs256.key"))
    key = host.file(path)
    assert key.exists and (key.user, key.mode) == ("slurm", 0o400), (
        f"{name_of(host)}: {path} should be slurm 0o400"
        + (f", is {key.user} {oct(key.mode)}" if key.exists else ", is missing")
    )
