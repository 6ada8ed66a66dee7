"""The slurm role's templates, rendered by Ansible on this machine from a three-node inventory.

Checks what the role promises: NodeName lines from facts, repeated keys from lists, null
removes a key, and which changes land in the restart digests (node list: slurmctld only); and the
production settings from variables: memory as a resource, enforced accounting, multifactor
priority, partition limits, the health check, Prolog/Epilog, JWT for slurmrestd, and MailProg.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "slurm"
TEMPLATES = (
    "slurm.conf",
    "slurmctld-restart.keys",
    "slurmd-restart.keys",
    "slurmd.default",
    "cgroup.conf",
    "ptc-healthcheck.conf",
    "slurmrestd.conf",
    "ptc-slurm-mail",
    "ptc-per-job-epilog",
)

INVENTORY = """
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: {python}
  children:
    slurm_controller: {{hosts: {{head: {{ptc_lan_address: 10.10.1.1}}}}}}
    slurm_dbd: {{hosts: {{head: {{}}}}}}
    slurm_compute:
      hosts:
        node-0: {{ptc_lan_address: 10.10.1.2}}
        node-1: {{ptc_lan_address: 10.10.1.3}}
"""

PLAYBOOK = """
- hosts: all
  gather_facts: true
  gather_subset: ["!all", "!min", hardware]
  vars_files:
    - {role}/defaults/main.yml
    - {role}/vars/main.yml
  tasks:
    # Every template of a host in one task (the template lookup renders as the template module
    # does, with the host's variables): a module run per template made this file the slowest
    # of the unit tests.
    - ansible.builtin.copy:
        content: "{{{{ dict(names | zip(query('ansible.builtin.template', *paths))) | to_json }}}}"
        dest: "{out}/{{{{ inventory_hostname }}}}.json"
        mode: "0644"
      vars:
        names: {templates}
        paths: "{{{{ names | map('regex_replace', '^(.*)$', '{role}/templates/\\\\1.j2') | list }}}}"
"""


def render(tmp_path: Path, extravars: dict[str, Any]) -> dict[str, str]:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "hosts.yml").write_text(INVENTORY.format(python=sys.executable))
    (tmp_path / "play.yml").write_text(
        PLAYBOOK.format(role=ROLE, out=out, templates=json.dumps(list(TEMPLATES)))
    )
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "hosts.yml", "play.yml",
         "-e", json.dumps(extravars)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env=os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return {
        f"{host.stem}-{name}": text
        for host in out.iterdir()
        for name, text in json.loads(host.read_text()).items()
    }


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render(tmp_path_factory.mktemp("default"), {})


def lines(text: str, key: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{key}=")]


def test_nodes_from_inventory_and_facts(default: dict[str, str]) -> None:
    conf = default["head-slurm.conf"]
    nodes = lines(conf, "NodeName")
    assert [n.split()[0] for n in nodes] == ["NodeName=node-0", "NodeName=node-1"]
    cpus = os.cpu_count()
    for node, address in zip(nodes, ("10.10.1.2", "10.10.1.3"), strict=True):
        assert f"NodeAddr={address}" in node
        assert f"CPUs={cpus}" in node and "RealMemory=" in node and "State=UNKNOWN" in node
    assert lines(conf, "SlurmctldHost") == ["SlurmctldHost=head(10.10.1.1)"]
    assert lines(conf, "PartitionName") == [
        "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    ]
    assert "SlurmctldParameters=enable_configless" in conf
    assert "AccountingStorageHost=head" in conf
    assert default["node-0-slurmd.default"].strip().endswith('"--conf-server head:6817"')


def test_config_dict_merges_lists_repeat_and_null_removes(tmp_path: Path) -> None:
    out = render(
        tmp_path,
        {
            "slurm_config": {
                "SlurmctldHost": ["head(10.10.1.1)", "backup(10.10.1.9)"],
                "Waittime": None,
                "DebugFlags": "Gang",
                "PartitionName": ["debug Nodes=node-0", {"PartitionName": "all", "Nodes": "ALL"}],
            },
            "slurm_node_options": {"Feature": "avx2"},
        },
    )
    conf = out["head-slurm.conf"]
    assert lines(conf, "SlurmctldHost") == [
        "SlurmctldHost=head(10.10.1.1)",
        "SlurmctldHost=backup(10.10.1.9)",
    ]
    assert lines(conf, "Waittime") == []
    assert "DebugFlags=Gang" in conf
    assert lines(conf, "PartitionName") == [
        "PartitionName=debug Nodes=node-0",
        "PartitionName=all Nodes=ALL",
    ]
    assert all("Feature=avx2" in n for n in lines(conf, "NodeName"))


def test_restart_digests(default: dict[str, str], tmp_path: Path) -> None:
    ctld = default["head-slurmctld-restart.keys"]
    slurmd = default["node-0-slurmd-restart.keys"]
    # Adding or removing a node restarts slurmctld but must leave slurmd alone.
    assert len(lines(ctld, "NodeName")) == 2 and lines(slurmd, "NodeName") == []
    assert "ProctrackType=proctrack/cgroup" in slurmd
    # A partition change is a reconfigure: neither digest moves.
    changed = render(tmp_path, {"slurm_partitions": [{"PartitionName": "p2", "Nodes": "ALL"}]})
    assert changed["head-slurmctld-restart.keys"] == ctld
    assert changed["node-0-slurmd-restart.keys"] == slurmd
    assert changed["head-slurm.conf"] != default["head-slurm.conf"]


def value(text: str, key: str) -> str:
    found = lines(text, key)
    assert len(found) == 1, f"{key}: {found}"
    return found[0].split("=", 1)[1]


def test_production_defaults(default: dict[str, str]) -> None:
    conf = default["head-slurm.conf"]
    # Memory is scheduled: RealMemory per node, and a default per CPU that fills a node.
    assert value(conf, "SelectTypeParameters") == "CR_Core_Memory"
    real = [int(n.split("RealMemory=")[1].split()[0]) for n in lines(conf, "NodeName")]
    cpus = [int(n.split("CPUs=")[1].split()[0]) for n in lines(conf, "NodeName")]
    assert int(value(conf, "DefMemPerCPU")) == min(r // c for r, c in zip(real, cpus, strict=True))
    assert value(conf, "AccountingStorageEnforce") == "associations,limits,qos,safe"
    assert value(conf, "PriorityType") == "priority/multifactor"
    assert value(conf, "PriorityWeightFairshare") == "10000"
    assert value(conf, "EnforcePartLimits") == "ALL"
    assert value(conf, "ProctrackType") == "proctrack/cgroup"
    assert value(conf, "TaskPlugin") == "task/cgroup,task/affinity"
    assert value(conf, "HealthCheckProgram") == "/usr/local/sbin/ptc-slurm-healthcheck"
    assert value(conf, "HealthCheckInterval") == "300"
    assert lines(conf, "Prolog") == [] and lines(conf, "Epilog") == []
    assert value(conf, "AuthAltTypes") == "auth/jwt"
    assert value(conf, "AuthAltParameters") == "jwt_key=/etc/slurm/jwt_hs256.key"
    assert "ConstrainRAMSpace=yes" in default["head-cgroup.conf"]
    # slurmrestd listens on the controller's cluster-network address, JWT only.
    assert "rest_auth/jwt 10.10.1.1:6820" in default["head-slurmrestd.conf"]
    # The health check knows the node, and the MPI plugin and library it must find.
    check = default["node-1-ptc-healthcheck.conf"]
    assert "NODE=node-1" in check and "MOUNTS=()" in check and "MPI_PLUGIN=none" in check
    # A change of the JWT settings restarts slurmctld; weights and health checks do not.
    assert "AuthAltTypes=auth/jwt" in default["head-slurmctld-restart.keys"]


def test_production_settings_from_variables(default: dict[str, str], tmp_path: Path) -> None:
    out = render(
        tmp_path,
        {
            "slurm_select_type_parameters": "CR_CPU_Memory",
            "slurm_def_mem_per_cpu_mb": 512,
            "slurm_priority_weights": {"Fairshare": 5, "QOS": 7},
            "slurm_enforce_part_limits": "ANY",
            "slurm_accounting_storage_enforce": "",
            "slurm_health_check_interval": 0,
            "slurm_health_check_mounts": ["/home", "/opt/my share"],
            # out of order: rendered sorted, as the head's playbooks (which read the settings
            # back from YAML with sorted keys) render it, so a repaired node's file is the same
            "slurm_health_check_free_mb": {"/scratch dir": 10, "/": 2048},
            "slurm_mpi_default": "pmix",
            "slurm_prolog": "#!/bin/sh\ntrue\n",
            "slurm_restd_enabled": False,
        },
    )
    conf = out["head-slurm.conf"]
    assert value(conf, "SelectTypeParameters") == "CR_CPU_Memory"
    assert value(conf, "DefMemPerCPU") == "512"
    assert value(conf, "PriorityWeightQOS") == "7" and lines(conf, "PriorityWeightAge") == []
    assert value(conf, "EnforcePartLimits") == "ANY"
    assert lines(conf, "AccountingStorageEnforce") == []
    assert lines(conf, "HealthCheckProgram") == [] and lines(conf, "HealthCheckInterval") == []
    assert value(conf, "Prolog") == "/etc/slurm/ptc-prolog" and lines(conf, "Epilog") == []
    assert lines(conf, "AuthAltTypes") == []
    check = out["node-0-ptc-healthcheck.conf"]
    assert "MOUNTS=(/home '/opt/my share')" in check
    assert "FREE_PATHS=(/ '/scratch dir')" in check and "FREE_MB=(2048 10)" in check
    assert "MPI_PLUGIN=pmix" in check and "LIBRARIES=(libpmix.so)" in check
    # Only the JWT keys left the slurmctld digest; the slurmd digest holds none of these keys.
    assert out["node-0-slurmd-restart.keys"] == default["node-0-slurmd-restart.keys"]
    ctld = out["head-slurmctld-restart.keys"]
    assert "AuthAltTypes" not in ctld and "SelectTypeParameters=CR_CPU_Memory" in ctld


def test_power_saving_keeps_the_excluded_nodes_up(tmp_path: Path) -> None:
    """An elastic partition's minimum: node-0 is an ordinary node, never powered down; node-1
    is a CLOUD node whose slurmd boots when Slurm resumes it."""
    out = render(
        tmp_path,
        {"slurm_power_save_enabled": True, "slurm_power_save_exclude_nodes": ["node-0"]},
    )
    conf = out["head-slurm.conf"]
    states = {n.split()[0]: n.split()[-1] for n in lines(conf, "NodeName")}
    assert states == {"NodeName=node-0": "State=UNKNOWN", "NodeName=node-1": "State=CLOUD"}
    assert lines(conf, "SuspendExcNodes") == ["SuspendExcNodes=node-0"]
    assert lines(conf, "ResumeProgram") == ["ResumeProgram=/usr/local/sbin/ptc-slurm-resume"]
    assert not out["node-0-slurmd.default"].strip().endswith(' -b"')
    assert out["node-1-slurmd.default"].strip().endswith(' -b"')
    (tmp_path / "none").mkdir()
    nothing = render(tmp_path / "none", {"slurm_power_save_enabled": True})
    assert lines(nothing["head-slurm.conf"], "SuspendExcNodes") == []
    assert all(n.endswith("State=CLOUD") for n in lines(nothing["head-slurm.conf"], "NodeName"))


def test_per_job_power_saving_powers_a_pool_node_down_from_its_epilog(tmp_path: Path) -> None:
    """Per-job: Epilog is the glob over epilog.d (the site's epilog and the power down); the
    power down acts on pool nodes only, never on the partition's minimum."""
    out = render(
        tmp_path,
        {
            "slurm_power_save_enabled": True,
            "slurm_power_save_exclude_nodes": ["node-0"],
            "slurm_power_save_per_job": True,
            "slurm_epilog": "#!/bin/sh\ntrue\n",
        },
    )
    assert value(out["head-slurm.conf"], "Epilog") == "/etc/slurm/epilog.d/*"
    script = out["node-1-ptc-per-job-epilog"]
    assert 'case " node-1 " in' in script and "State=POWER_DOWN_ASAP" in script
    assert script.rstrip().endswith("exit 0"), "a failing epilog would drain the node"
    (tmp_path / "off").mkdir()
    off = render(tmp_path / "off", {"slurm_power_save_per_job": True})
    assert lines(off["head-slurm.conf"], "Epilog") == [], "per-job without power saving"


def test_mail_requests_are_recorded_when_there_is_no_mailer(
    default: dict[str, str], tmp_path: Path
) -> None:
    """No mailer: MailProg is ptc's program, which records the request instead of dropping it."""
    assert lines(default["head-slurm.conf"], "MailProg") == [
        "MailProg=/usr/local/sbin/ptc-slurm-mail"
    ]
    log = tmp_path / "mail.log"
    (tmp_path / "log").mkdir()
    out = render(tmp_path / "log", {"__slurm_mail_log": str(log)})
    program = tmp_path / "ptc-slurm-mail"
    program.write_text(out["head-ptc-slurm-mail"])
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "42", "SLURM_JOB_MAIL_TYPE": "Ended"}
    proc = subprocess.run(
        ["sh", str(program), "-s", "Slurm Job_id=42 Name=x Ended", "alice"],
        input="", capture_output=True, text=True, env=env, check=False, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (line,) = log.read_text().splitlines()
    assert "not sent, this cluster has no mailer" in line
    assert "to=alice job=42 type=Ended subject=Slurm Job_id=42 Name=x Ended" in line
    (tmp_path / "site").mkdir()
    site = render(tmp_path / "site", {"slurm_mail_prog": "/usr/bin/mail"})
    assert lines(site["head-slurm.conf"], "MailProg") == ["MailProg=/usr/bin/mail"]


def test_a_cloud_site_s_nodes_are_cloud_lines_and_slurmctld_takes_their_addresses(
    tmp_path: Path,
) -> None:
    """An ec2 site's nodes (no inventory host): powered down CLOUD lines with the site's size
    and feature, and SlurmctldParameters for instances that register with their own addresses;
    without power saving they are left out."""
    cloud = [{"name": "ec2-0", "site": "cloud", "cpus": 2, "memory_mb": 3800}]
    out = render(tmp_path, {"slurm_power_save_enabled": True, "slurm_cloud_nodes": cloud})
    conf = out["head-slurm.conf"]
    assert lines(conf, "NodeName")[-1] == (
        "NodeName=ec2-0 CPUs=2 RealMemory=3800 Features=cloud State=CLOUD"
    )
    assert lines(conf, "SlurmctldParameters") == [
        "SlurmctldParameters=enable_configless,cloud_reg_addrs"
    ]
    (tmp_path / "off").mkdir()
    off = render(tmp_path / "off", {"slurm_cloud_nodes": cloud})["head-slurm.conf"]
    assert "ec2-0" not in off and "cloud_reg_addrs" not in off
