"""Where the roles put things on a cluster's nodes, for the Python code that reads them there.

The roles decide these paths (each in its ``defaults/main.yml``); the code that runs on a node
(the elastic manager, the Slurm client and the programs slurmctld runs, the head's inventory)
or reaches into one over SSH (``ptc elastic``, ``ptc sim run --on``, benchmark campaigns) finds
them here, and nowhere else in Python. A role cannot import Python, so
``tests/unit/test_facts.py`` holds the roles' defaults and templates to these values: change
one, and the test names the other.

They are strings, not ``Path``: they name files on another machine, mostly inside shell
commands sent there.
"""

from __future__ import annotations

# The repository on every node: CloudLab clones the profile's repository there and the local
# testbed mounts the checkout there; the head runs the playbooks and the elastic services
# from it (the elastic and ansible_controller roles' *_repository).
REPOSITORY = "/local/repository"

# The software share: the nfs_server exports it and every node mounts it, so what is built
# once there (benchmarks, the simulator's packages) runs on every node.
SHARED_SOFTWARE = "/opt/ptc"
# The simulator's unpacked Python packages, one directory per pinned set (elastic.sim.on_cluster).
SIM_SITE_ROOT = f"{SHARED_SOFTWARE}/sim"
# The hpgmg role's hpgmg_prefix for its pinned hpgmg_version (the first 12 hex digits of it),
# and the hpcc role's hpcc_prefix: where campaigns find the benchmarks.
HPGMG_PREFIX = f"{SHARED_SOFTWARE}/hpgmg/a93ff2376fbc"
HPCC_PREFIX = f"{SHARED_SOFTWARE}/bench/hpcc"

# The elastic role: its configuration, TLS material and tokens (elastic_config_dir,
# elastic_tls_dir), the services' state (elastic_state_dir) and logs (elastic_log_dir), and the
# virtualenv they run in (elastic_venv).
ELASTIC_CONFIG_DIR = "/etc/ptc-elastic"
ELASTIC_TLS_DIR = f"{ELASTIC_CONFIG_DIR}/tls"
ELASTIC_CA = f"{ELASTIC_TLS_DIR}/ca.crt"
ELASTIC_NODE_CERT = f"{ELASTIC_TLS_DIR}/node.crt"
ELASTIC_NODE_KEY = f"{ELASTIC_TLS_DIR}/node.key"
ELASTIC_TOKENS_DIR = f"{ELASTIC_CONFIG_DIR}/tokens"  # admin.token, partition-NAME.token
MANAGER_CONFIG = f"{ELASTIC_CONFIG_DIR}/manager.yml"
SLURM_CLIENT_CONFIG = f"{ELASTIC_CONFIG_DIR}/slurm-client.yml"
SITES_FILE = f"{ELASTIC_CONFIG_DIR}/sites.yml"  # the rebalancing round's sites
ELASTIC_STATE_DIR = "/var/lib/ptc-elastic"
# The manager's state file (its file store): the elastic role's manager.yml names it, and a
# configuration that names none gets the same.
MANAGER_STATE = f"{ELASTIC_STATE_DIR}/manager-state.json"
CLIENT_KNOWN_HOSTS = f"{ELASTIC_STATE_DIR}/known_hosts"  # the Slurm client's, for its SSH
# the Slurm partitions the client put DOWN for protected mode (and will put UP again)
PROTECTED_PARTITIONS = f"{ELASTIC_STATE_DIR}/protected-partitions.json"
ELASTIC_LOG_DIR = "/var/log/ptc-elastic"
HOOKS_LOG = f"{ELASTIC_LOG_DIR}/slurm-hooks.log"  # slurmctld drops the programs' output
RESUME_TIMINGS = f"{ELASTIC_LOG_DIR}/resume-timings.jsonl"  # one JSON line per resume
REBALANCE_LOG = f"{ELASTIC_LOG_DIR}/rebalance.jsonl"  # one JSON line per rebalancing round
ELASTIC_VENV = "/opt/ptc-elastic/venv"

# Playbook runs on the head (the ansible_controller role): the wrapper that runs them, and
# its state (inventory, fact cache, known_hosts).
PLAYBOOK_COMMAND = "/usr/local/sbin/ptc-playbook"
PLAYBOOK_STATE_DIR = "/var/lib/ptc/ansible"
# root's key of the SSH mesh the profile's startup script installs on every node.
MESH_KEY = "/root/.ssh/id_ed25519"
# The configuration server's client directory the etcd role fills: CA, endpoints, credentials.
ETCD_CLIENT_DIR = "/etc/ptc/etcd"
