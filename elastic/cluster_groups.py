"""The Ansible groups of a cluster, by name: what a profile gives each node, ``site.yml``
targets and the code looks nodes up by.

The names live at the package's root so that every layer can ask for a group by the same
name: the testbed (which knows the groups, ``elastic.testbed.groups.KNOWN_GROUPS``), the
manager and the Slurm client's workstation side, the configuration server and lending, none of
which may import the testbed package for a string. The elastic role's group defaults are held
to these by ``tests/unit/test_facts.py``.
"""

from __future__ import annotations

SLURM_CONTROLLER = "slurm_controller"
SLURM_DBD = "slurm_dbd"
SLURM_COMPUTE = "slurm_compute"
NFS_SERVER = "nfs_server"
NFS_CLIENT = "nfs_client"
CONFIG_SERVER = "config_server"

ALL = (SLURM_CONTROLLER, SLURM_DBD, SLURM_COMPUTE, NFS_SERVER, NFS_CLIENT, CONFIG_SERVER)
