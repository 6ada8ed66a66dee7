"""Real inputs of the ledger, as a 1+4 elastic test cluster gave them (Slurm 22.05).

The jobs: 1 (two nodes, 30 s), an array 2 of three one-node tasks (5 s each), 3 (one node,
requeued at reclamation r1's deadline after 39 s, then run again for 120 s on node-3) and 6
(requeued by hand with ``scontrol requeue`` after 8 s, then pending). Slurm keeps one record for
job 3: its client requeues with ``scontrol requeuehold`` and the next run overwrites the first,
whose 39 s survive only in the manager's ``jobs-requeued`` report. A plain ``scontrol requeue``
gives the job a new submit time, so sacct keeps job 6's runs apart.
"""

from __future__ import annotations

from typing import Any

# sacct -a -D -X --truncate -S 2026-11-30T10:00:00 -E 2026-11-30T10:50:00, runs.FIELDS
WHOLE = """\
1|1|ptc|main|COMPLETED|1796035120|1796035150|30|2|node-[0-1]
3|3|ptc|main|COMPLETED|1796035210|1796035330|120|1|node-3
2_0|4|ptc|main|COMPLETED|1796035120|1796035125|5|1|node-0
2_1|5|ptc|main|COMPLETED|1796035120|1796035125|5|1|node-1
2_2|2|ptc|main|COMPLETED|1796035120|1796035125|5|1|node-2
6|6|ptc|main|REQUEUED|1796035356|1796035364|8|1|node-0
6|6|ptc|main|PENDING|1796035399|1796035399|0|1|None assigned
"""
WHOLE_SINCE = 1796032800.0  # 2026-11-30T10:00:00Z
UNTIL = 1796035800.0  # 2026-11-30T10:50:00Z

# the same with -S 2026-11-30T10:39:00: job 1 ran across the boundary (10:38:40 to 10:39:10),
# so --truncate gives it 10 s from the boundary; the array had ended before it
ACROSS = """\
1|1|ptc|main|COMPLETED|1796035140|1796035150|10|2|node-[0-1]
3|3|ptc|main|COMPLETED|1796035210|1796035330|120|1|node-3
6|6|ptc|main|REQUEUED|1796035356|1796035364|8|1|node-0
6|6|ptc|main|PENDING|1796035399|1796035399|0|1|None assigned
"""
ACROSS_SINCE = 1796035140.0  # 2026-11-30T10:39:00Z

# -S 2026-11-30T09:00:00 -E 2026-11-30T09:50:00: nothing ran
NOTHING = ""

# before job 3 ran again: sacct still had its first run, as the REQUEUED record
BEFORE_RERUN = """\
3|3|ptc|main|REQUEUED|1796035120|1796035159|39|1|node-2
"""

EXPAND = {"node-[0-1]": ["node-0", "node-1"]}

# GET /v1/events of the same cluster (reclamation-started's pv left out)
EVENTS: list[dict[str, Any]] = [
    {"seq": 1, "time": 1796035050.3, "kind": "node-registered", "data": {"node": "node-0"}},
    {"seq": 5, "time": 1796035050.3, "kind": "partition-created",
     "data": {"endpoint": "https://10.10.1.1:8701", "partition": "slurm"}},
    {"seq": 6, "time": 1796035050.3, "kind": "partition-created",
     "data": {"endpoint": None, "partition": "ref"}},
    {"seq": 7, "time": 1796035111.7, "kind": "nodes-added",
     "data": {"nodes": ["node-0", "node-1", "node-2"], "partition": "slurm"}},
    {"seq": 8, "time": 1796035116.8, "kind": "resume-reported",
     "data": {"called_off": [], "failed": {}, "nodes": ["node-0", "node-1", "node-2"],
              "partition": "slurm", "ready": ["node-0", "node-1", "node-2"],
              "timings": {"manager": 0.06, "playbook": 4.09, "power_on": 0.98,
                          "register": 0.01, "total": 5.13}}},
    {"seq": 9, "time": 1796035146.6, "kind": "reclamation-started",
     "data": {"beneficiary": None, "chosen": ["node-0", "node-1", "node-2"],
              "deadline": 1796035161.6, "grace": 15.0,
              "jobs": [{"application": "wrap", "elapsed": 22.0, "job_id": "1",
                        "nodes": ["node-0", "node-1"], "priority": 1.0, "queue": "normal",
                        "remaining": None, "user": "ptc"},
                       {"application": "wrap", "elapsed": 22.0, "job_id": "3",
                        "nodes": ["node-2"], "priority": 1.0, "queue": "normal",
                        "remaining": None, "user": "ptc"}],
              "partition": "slurm", "policy": "LIFO", "predicted_wasted_cycles": None,
              "reclamation": "r1", "requested_by": "admin"}},
    {"seq": 10, "time": 1796035151.2, "kind": "nodes-deleted",
     "data": {"nodes": ["node-0", "node-1"], "partition": "slurm"}},
    {"seq": 11, "time": 1796035159.7, "kind": "jobs-requeued",
     "data": {"jobs": [{"detail": "", "elapsed": 39.0, "job_id": "3", "node_count": 1,
                        "requeued": True}],
              "partition": "slurm", "reclamation": "r1"}},
    {"seq": 12, "time": 1796035159.7, "kind": "reclamation-finished",
     "data": {"chosen": ["node-0", "node-1", "node-2"], "forced": [], "grace": 15.0,
              "jobs_killed": [{"elapsed": 26.55, "job_id": "3", "node_count": 1,
                               "nodes": ["node-2"], "wasted_cycles": 41.55}],
              "partition": "slurm", "policy": "LIFO", "predicted_wasted_cycles": None,
              "reclamation": "r1",
              "released": {"node-0": 4.54, "node-1": 4.54, "node-2": 13.12},
              "wasted_cycles": 41.55}},
    {"seq": 13, "time": 1796035159.7, "kind": "nodes-deleted",
     "data": {"nodes": ["node-2"], "partition": "slurm"}},
    {"seq": 14, "time": 1796035181.4, "kind": "nodes-added",
     "data": {"nodes": ["node-3"], "partition": "slurm"}},
    {"seq": 16, "time": 1796035352.8, "kind": "nodes-deleted",
     "data": {"nodes": ["node-3"], "partition": "slurm"}},
    {"seq": 17, "time": 1796035357.7, "kind": "nodes-added",
     "data": {"nodes": ["node-0"], "partition": "slurm"}},
    {"seq": 19, "time": 1796035387.2, "kind": "nodes-deleted",
     "data": {"nodes": ["node-0"], "partition": "slurm"}},
]  # fmt: skip


def lending(t0: float = 1796036000.0) -> list[dict[str, Any]]:
    """A lend and its give-back, as the manager logs them (elastic.lending.loan): the
    reference partition acquires node-1 through reclamation r2 (its beneficiary), so the node
    goes to ref before slurm's DeleteNodes is logged; an hour later ref releases it. node-2 is
    lent at t0 + 1800 s and still is."""
    return [
        {"seq": 30, "time": t0 - 100, "kind": "nodes-added",
         "data": {"nodes": ["node-1"], "partition": "slurm"}},
        {"seq": 31, "time": t0 - 10, "kind": "reclamation-started",
         "data": {"reclamation": "r2", "partition": "slurm", "beneficiary": "ref",
                  "chosen": ["node-1"], "jobs": []}},
        {"seq": 32, "time": t0, "kind": "nodes-added",
         "data": {"nodes": ["node-1"], "partition": "ref", "reclamation": "r2"}},
        {"seq": 33, "time": t0, "kind": "reclamation-finished",
         "data": {"reclamation": "r2", "partition": "slurm", "forced": [], "jobs_killed": []}},
        {"seq": 34, "time": t0, "kind": "nodes-deleted",
         "data": {"nodes": ["node-1"], "partition": "slurm"}},
        {"seq": 35, "time": t0 + 1800, "kind": "nodes-added",
         "data": {"nodes": ["node-2"], "partition": "ref"}},
        {"seq": 36, "time": t0 + 3600, "kind": "nodes-deleted",
         "data": {"nodes": ["node-1"], "partition": "ref"}},
    ]  # fmt: skip
