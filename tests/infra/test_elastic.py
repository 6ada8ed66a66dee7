"""Elastic partitions (`ptc deploy NAME -e ptc_elastic=true`): a manager on every
configuration-server node (one of them active, HTTPS only, with a certificate of the
cluster's CA) and the Slurm client run as services on the experiment LAN, the programs slurmctld runs are in place, and the tokens are root-only and
appear in no log. Skipped on clusters deployed without elastic partitions."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from conftest import group, name_of, require_group, variables
from testinfra.host import Host

from elastic import node_paths, wire
from elastic.cluster_groups import CONFIG_SERVER, SLURM_CONTROLLER

CONFIG_DIR = node_paths.ELASTIC_CONFIG_DIR
TOKENS = node_paths.ELASTIC_TOKENS_DIR
LOGS = node_paths.ELASTIC_LOG_DIR
UNITS = ("ptc-elastic-manager", "ptc-elastic-slurm-client")


def _first(host: Host, group_name: str) -> str:
    members = (
        sorted(group(host, group_name)) if group_name == CONFIG_SERVER else group(host, group_name)
    )
    return members[0] if members else ""


def require_elastic(host: Host, role_group: str) -> None:
    """Skip unless this host runs ``role_group``'s part (a manager runs on every
    configuration-server host, the Slurm client on the first controller), and it is deployed."""
    require_group(host, role_group)
    me = name_of(host)
    if role_group != CONFIG_SERVER and me != _first(host, role_group):
        pytest.skip(f"{me} is not the first host of {role_group}")
    if not host.file(
        node_paths.SLURM_CLIENT_CONFIG
        if role_group == SLURM_CONTROLLER
        else node_paths.MANAGER_CONFIG
    ).exists:
        pytest.skip(f"{me}: elastic partitions are not deployed (no {CONFIG_DIR})")


def manager_config(host: Host) -> dict[str, Any]:
    conf = yaml.safe_load(host.file(node_paths.MANAGER_CONFIG).content_string) or {}
    assert isinstance(conf, dict)
    return conf


def _get(url: str, ca: str | None) -> str:
    """A python3 one-liner that GETs ``url``, trusting only ``ca`` (None: the system's CAs)."""
    context = f"ssl.create_default_context(cafile='{ca}')" if ca else "ssl.create_default_context()"
    return (
        f'python3 -c "import ssl, urllib.request as u; '
        f"print(u.urlopen('{url}', timeout=5, context={context}).read().decode())\""
    )


def health_of(host: Host, url: str) -> dict[str, object]:
    out = host.run(_get(f"{url}/v1/health", node_paths.ELASTIC_CA))
    assert out.rc == 0, f"{name_of(host)}: {url}/v1/health did not answer: {out.stderr.strip()}"
    found = json.loads(out.stdout)
    assert isinstance(found, dict)
    return found


def lan_address(host: Host) -> str:
    return str(variables(host).get("ptc_lan_address", ""))


@pytest.mark.parametrize(("unit", "role_group", "port"), [
    ("ptc-elastic-manager", CONFIG_SERVER, wire.MANAGER_PORT),
    ("ptc-elastic-slurm-client", SLURM_CONTROLLER, wire.CLIENT_PORT),
])  # fmt: skip
def test_service_runs_on_the_lan_address_only(
    host: Host, unit: str, role_group: str, port: int
) -> None:
    require_elastic(host, role_group)
    me = name_of(host)
    service = host.service(unit)
    assert service.is_running, f"{me}: {unit} is not running"
    assert service.is_enabled, f"{me}: {unit} does not start at boot"
    address = lan_address(host)
    listening = host.run(f"ss -Hltn 'sport = :{port}'").stdout
    assert f"{address}:{port}" in listening, (
        f"{me}: {unit} does not listen on {address}:{port} ({listening.strip() or 'nothing'})"
    )
    for everywhere in (f"0.0.0.0:{port}", f"*:{port}", f"[::]:{port}"):
        assert everywhere not in listening, f"{me}: {unit} listens on {everywhere}"


def test_manager_answers_on_the_lan(host: Host) -> None:
    require_elastic(host, CONFIG_SERVER)
    health = health_of(host, f"https://{lan_address(host)}:{wire.MANAGER_PORT}")
    assert health.get("ok") is True, f"{name_of(host)}: the manager is not healthy: {health}"


@pytest.mark.parametrize(("role_group", "port"), [
    (CONFIG_SERVER, wire.MANAGER_PORT),  # the manager
    (SLURM_CONTROLLER, wire.CLIENT_PORT),  # the Slurm client's NotifyDeletePending endpoint
])  # fmt: skip
def test_the_services_speak_tls_only(host: Host, role_group: str, port: int) -> None:
    """Plain HTTP is refused; a client that does not trust the cluster's CA is refused; the
    node's key is root's."""
    require_elastic(host, role_group)
    me = name_of(host)
    address = lan_address(host)
    plain = host.run(_get(f"http://{address}:{port}/v1/health", None))
    assert plain.rc != 0, f"{me}: port {port} answered plain HTTP: {plain.stdout.strip()}"
    untrusting = host.run(_get(f"https://{address}:{port}/v1/health", None))
    assert untrusting.rc != 0 and "CERTIFICATE_VERIFY_FAILED" in untrusting.stderr, (
        f"{me}: a client without the cluster's CA was not refused on port {port}: "
        f"{untrusting.stderr.strip()[-300:]}"
    )
    trusting = host.run(_get(f"https://{address}:{port}/v1/health", node_paths.ELASTIC_CA))
    assert trusting.rc == 0, f"{me}: port {port} did not answer HTTPS: {trusting.stderr[-300:]}"
    key = host.file(node_paths.ELASTIC_NODE_KEY)
    assert key.user == "root" and key.mode == 0o600, (
        f"{me}: {node_paths.ELASTIC_NODE_KEY} is not root's alone (mode {oct(key.mode)})"
    )


def test_every_manager_knows_one_and_the_same_active_manager(host: Host) -> None:
    """Every member's manager answers; exactly one is active, and every one names it."""
    require_elastic(host, CONFIG_SERVER)
    me = name_of(host)
    conf = manager_config(host)
    peers = [str(u) for u in conf.get("peers") or []]
    members = group(host, CONFIG_SERVER)
    if conf.get("store"):
        assert len(peers) == len(members), (
            f"{me}: the managers' configuration lists {peers}, not one per member of {members}"
        )
    mine = f"https://{lan_address(host)}:{wire.MANAGER_PORT}"
    assert mine in peers, f"{me}: its own manager {mine} is not among the peers {peers}"
    health = {url: health_of(host, url) for url in peers}
    active = [url for url, h in health.items() if h.get("active")]
    assert len(active) == 1, f"{me}: not exactly one active manager: {health}"
    named = {url: h.get("active_manager") for url, h in health.items()}
    assert set(named.values()) == {active[0]}, (
        f"{me}: the managers disagree on the active one: {named}"
    )


def test_the_slurm_client_is_given_every_manager(host: Host) -> None:
    require_elastic(host, SLURM_CONTROLLER)
    conf = yaml.safe_load(host.file(node_paths.SLURM_CLIENT_CONFIG).content_string) or {}
    given = sorted(u for u in str(conf.get("manager_url", "")).split(",") if u)
    members = group(host, CONFIG_SERVER)
    assert len(given) == len(members), (
        f"{name_of(host)}: the Slurm client is given {given}, not every manager of {members}"
    )


def test_tokens_are_root_only(host: Host) -> None:
    require_elastic(host, CONFIG_SERVER)
    me = name_of(host)
    directory = host.file(TOKENS)
    assert directory.is_directory and directory.user == "root" and directory.mode == 0o700, (
        f"{me}: {TOKENS} is not a root-only directory (mode {oct(directory.mode)})"
    )
    names = host.run(f"ls {TOKENS}").stdout.split()
    assert "admin.token" in names and "partition-slurm.token" in names, (
        f"{me}: {TOKENS} lacks the admin or the slurm partition's token ({names})"
    )
    for name in names:
        f = host.file(f"{TOKENS}/{name}")
        assert f.user == "root" and f.group == "root" and f.mode == 0o600, (
            f"{me}: {TOKENS}/{name} is {f.user}:{f.group} {oct(f.mode)}, not root:root 0600"
        )


def test_tokens_are_in_no_log(host: Host) -> None:
    require_elastic(host, CONFIG_SERVER)
    me = name_of(host)
    # grep reads the tokens from their files: no token on a command line either.
    sources = [
        f"journalctl --no-pager -u {UNITS[0]} -u {UNITS[1]} -u slurmctld",
        f"cat {LOGS}/* /var/log/slurm/*.log {node_paths.PLAYBOOK_STATE_DIR}/ansible.log 2>/dev/null",
    ]
    for source in sources:
        found = host.run(f"{source} | grep -c -F -f <(cat {TOKENS}/*.token)", shell="bash")
        count = found.stdout.strip() or "0"
        assert count == "0", f"{me}: a token appears {count} time(s) in `{source}`"


def test_programs_slurmctld_runs_are_installed(host: Host) -> None:
    require_elastic(host, SLURM_CONTROLLER)
    me = name_of(host)
    conf = host.file("/etc/slurm/slurm.conf").content_string
    for key, program in (
        ("ResumeProgram", "ptc-slurm-resume"),
        ("SuspendProgram", "ptc-slurm-suspend"),
        ("ResumeFailProgram", "ptc-slurm-resume-fail"),
    ):
        path = f"/usr/local/sbin/{program}"
        assert f"{key}={path}" in conf, f"{me}: slurm.conf does not name {path} as {key}"
        f = host.file(path)
        assert f.exists and f.user == "root" and f.mode & 0o111, f"{me}: {path} not executable"
    sudo = host.run("sudo -n -l -U slurm")
    assert "/usr/local/sbin/ptc-elastic-hook" in sudo.stdout, (
        f"{me}: SlurmUser may not run the elastic hook through sudo: {sudo.stdout.strip()}"
    )
    assert "(ALL)" not in sudo.stdout and "ALL : ALL" not in sudo.stdout, (
        f"{me}: SlurmUser may run more than the elastic hook through sudo"
    )


def test_pool_nodes_are_cloud_nodes(host: Host) -> None:
    require_elastic(host, SLURM_CONTROLLER)
    conf = host.file("/etc/slurm/slurm.conf").content_string
    nodes = [line for line in conf.splitlines() if line.startswith("NodeName=")]
    assert nodes and all("State=CLOUD" in line for line in nodes), (
        f"{name_of(host)}: not every compute node is State=CLOUD: {nodes}"
    )
