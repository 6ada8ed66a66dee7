"""A FAKE EC2 region for one local-testbed experiment: an emulation, not AWS.

moto's server (a local fake of AWS's API) answers EC2's API, and a realiser turns each
instance moto shows into a fresh machine of the local testbed, booted from the prepared image
(the software, nothing of any cluster: what a user's baked AMI would be), on the experiment's
LAN at the instance's private address. Users without an AWS account can burst a pool to it;
nothing here has been compared with EC2 beyond its API's answers.

- ``plan``: the VPC and subnet the region gives the experiment's LAN (pure);
- ``faults``: injected faults (capacity, spot interruptions), on disk under a lock;
- ``realiser``: what to do about the instances moto shows (pure decisions, and their doing);
- ``machines``: an instance's machine, made and removed at runtime;
- ``imds``: the metadata service (IMDSv2) each machine runs, a standalone program;
- ``region``: moto in this process, the region's set-up, the API as the head reaches it;
- ``service``: the region as a background service of its experiment (start, stop, status).

How the head reaches the API: moto listens on 127.0.0.1 inside the head's own network
namespace, and nowhere else, so no other node, no instance and nothing on the host's networks
can talk to it (the head's root can; it is the controller the region serves).
"""

from __future__ import annotations

from elastic.testbed.backends.local.control import MOUNT

# Where the head sees the API (its own loopback) and the region's credentials (the control
# service's directory, which only the Slurm controller mounts).
API_HOST = "127.0.0.1"
API_PORT = 4566
CREDENTIALS_NAME = "fake-ec2-credentials"
HEAD_CREDENTIALS = MOUNT / CREDENTIALS_NAME
DEFAULT_REGION = "us-east-1"
# On each instance's machine: what an instance reads from its metadata service, which serves
# these files over HTTP at 169.254.169.254 (``imds``).
METADATA_DIR = "/run/ptc-fake-ec2/latest/meta-data"
USER_DATA_LOG = "/var/log/cloud-init-output.log"
