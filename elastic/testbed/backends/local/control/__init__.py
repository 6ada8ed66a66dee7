"""The testbed's control service: a node asks the host to power its experiment's nodes on or off
or reload them, as a CloudLab head asks the portal's API.

One service per experiment, HTTP over a unix socket in ``Experiment.control_dir``, which the
experiment's Slurm controller mounts at ``MOUNT`` (no other node asks the testbed for power, so
no other node holds it); a per-experiment credential beside it. The service
acts only on the nodes of its own experiment and only through ``elastic.testbed.nodeops``. Its
journal, pid file and log sit in ``Experiment.control_state_dir``, which no node mounts.

- ``credential``: the per-experiment secret and its digest;
- ``journal``: operations recorded before they start and after they end;
- ``names``: which node a name means (ours, another experiment's, or none);
- ``app``: the FastAPI app; ``service``: start, stop and ensure-running of the daemon;
- ``client``: ``ControlClient`` for the head (the Slurm hooks) and the host's CLI.
"""

from __future__ import annotations

from pathlib import Path

MOUNT = Path("/run/ptc-testbed")
SOCKET_NAME = "api.sock"
CREDENTIAL_NAME = "credential"
# Where a node finds the service and its credential: the defaults of the head's client.
SOCKET = MOUNT / SOCKET_NAME
CREDENTIAL = MOUNT / CREDENTIAL_NAME
