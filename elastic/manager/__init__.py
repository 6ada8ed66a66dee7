"""The elastic manager (Part-Time Cloud §3.1): one service per hosting cluster.

It keeps the pool of nodes (with CPUs, memory and features), the partitions, which node is
whose (a node belongs to at most one partition), every partition's latest preemption vector
(PV) with its time, the pending reclamations with their wall-clock deadlines, and an
append-only event log. Pieces:

- ``core.Manager``: the RPCs as methods taking the caller (``auth.Principal``). CreatePartition,
  AddNodes (named nodes, or a count that may reclaim a shortfall from other partitions),
  DeleteNodes, DiscoverResources, SetResourceValues, the manager's own values (0.0 free, 1.0
  held by another partition), Reclaim (admin). Each call checks everything first and then makes
  its change with one compare-and-swap on the store, so a refused request changes nothing.
- ``reclamation``: Reclamation, as functions of the state that ``core`` calls inside its writes:
  the P lowest-valued nodes of the partition's latest PV, through
  ``elastic.policies.select_nodes`` after ``check_fresh`` (a stale or missing PV is refused,
  409). Nodes the PV does not cover count as 1.0. ``tick`` (the app's background loop, every
  second) sends NotifyDeletePending to the client's endpoint (``POST <endpoint>/v1/notify-
  delete-pending`` with the partition's token) every ``notify_interval`` s until the deadline,
  and at the deadline takes the nodes the client has not released (DeleteNodes) by force. A
  reclaimed node goes to the partition that asked for it (reference client) or to the pool.
- Event log: ``reclamation-started`` (time, policy, GP, chosen nodes, the PV, the jobs on the
  chosen nodes, predicted waste from time limits) and ``reclamation-finished`` (released and
  forced nodes, jobs killed with elapsed and node counts, wasted cycles computed by
  ``elastic.policies.wasted_cycles`` on what happened: a job on a forced node had
  remaining >= GP, every other one finished). ``jobs-requeued`` holds the client's account.
- ``store.Store``: ``read() -> (revision, doc)``, ``write(doc, expect=revision)``;
  ``JsonFileStore`` (one root-only JSON file, replaced atomically) and ``etcd_store.EtcdStore``
  (one key of the configuration server, a transaction on its mod revision). Deadlines are wall-clock times, so a restarted manager
  finishes a reclamation at its deadline.
- ``model``: the state's records; ``JobRecord`` is a running job from the Slurm client's
  ``squeue`` to the store, the one shape on the wire.
- ``auth.Tokens``: admin and per-partition tokens in root-only files, compared in constant
  time; never in the state, the log or the event log.
- ``app.create_app``: the FastAPI app (OpenAPI at /openapi.json); ``service``: the YAML
  configuration and ``python -m elastic.manager --config FILE`` (uvicorn on the LAN address).
- ``client.ManagerClient`` (httpx) and ``client.ReferenceClient`` (acquire/release).
- ``core.Leadership``: whether this manager is the active one, the single place that decides
  it; only the active manager runs ``tick`` (``AlwaysActive`` for a lone manager).
"""

from elastic.manager.auth import Principal, Tokens
from elastic.manager.core import AlwaysActive, Leadership, Manager, ManagerConfig
from elastic.manager.store import JsonFileStore, MemoryStore, Store

__all__ = [
    "AlwaysActive",
    "JsonFileStore",
    "Leadership",
    "Manager",
    "ManagerConfig",
    "MemoryStore",
    "Principal",
    "Store",
    "Tokens",
]
