"""What the elastic manager and the Slurm client must agree on over HTTP, beyond each one's
own routes: their ports, the client's endpoint the manager calls, and the header that names
the active manager.

Both sides import these (the manager may not import ``elastic.slurm``, and the header is read
by the manager's clients as well), so they live at the package's root. Code that cannot import
``elastic`` (``tests/support/probe.py``, run by a node's system Python as a file) keeps its own
copy, and ``tests/unit/test_facts.py`` holds that copy, and the elastic role's port defaults, to
these.
"""

from __future__ import annotations

MANAGER_PORT = 8700
CLIENT_PORT = 8701  # the Slurm client's NotifyDeletePending endpoint
# The Slurm client serves it; the manager POSTs every NotifyDeletePending there.
NOTIFY_PATH = "/v1/notify-delete-pending"
# A manager that is not the active one answers 503 and names the active one in this header.
ACTIVE_HEADER = "X-Ptc-Active-Manager"
