"""Where a resumed job's wait went: the overhead taxonomy of every provisioned node (after
Multiverse's Table I), from three records that exist anyway.

- Slurm's accounting (``sacct``, times as epoch seconds): when each job was submitted and when
  it started. Under power saving Slurm resets a job's start when its nodes come up, so the
  start is when the job's script began, not when the nodes were chosen.
- The client's resume timings (``resume-timings.jsonl`` on the controller, one line per
  ResumeProgram call): when it started, and how long each step took.
- The local testbed's provisioning log (``elastic.testbed.backends.local.provisioning``): for each node, when
  its part of the request got a slot and how long the testbed took.

One row per (job, node the job waited for), with these parts, in order, end to end::

    slurm_to_resume_s   Slurm: from submit to the ResumeProgram call
    manager_s           the elastic manager's AddNodes
    slot_wait_s         waiting for its turn: the controller's one power change at a time
                        (another resume's), the testbed's provisioning slots (other
                        requests', or the earlier parts of its own)
    testbed_s           the testbed's call for the node's part: start, reload or allocate
    network_ssh_s       from then to the end of power on: the rest of its request, the node
                        answering over SSH, its host keys
    configure_s         configuration: the playbook on the resumed nodes
    register_s          slurmd registering with slurmctld
    slurm_to_start_s    Slurm: from the resume's end to the job's start

They sum to the job's submit-to-start time but for the moments between the resume's steps
(``unaccounted_s``, normally well under a second). A node the testbed log does not cover (a
remote testbed, or a node already up) has no slot or testbed part: its whole power on is
``network_ssh_s``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from elastic import node_paths, sacct
from elastic.manager.workstation import controller
from elastic.remote import ssh

PARTS: dict[str, str] = {
    "slurm_to_resume_s": "Slurm: from submit to the ResumeProgram call",
    "manager_s": "the elastic manager's AddNodes",
    "slot_wait_s": "waiting for its turn (power lock, provisioning slot)",
    "testbed_s": "the testbed's call (start, reload or allocate)",
    "network_ssh_s": "the rest of power on: its request's other parts, SSH, host keys",
    "configure_s": "configuration (playbook)",
    "register_s": "slurmd registration",
    "slurm_to_start_s": "Slurm: from the nodes ready to the job's start",
}
COLUMNS: dict[str, tuple[str, str]] = {
    "job_id": ("Slurm job id", ""),
    "node": ("a node the job waited for", ""),
    "submit": ("when the job was submitted (epoch)", "s"),
    "start": ("when the job started (epoch), after its nodes came up", "s"),
    "submit_to_start_s": ("the job's wait, from Slurm's accounting", "s"),
    **{key: (meaning, "s") for key, meaning in PARTS.items()},
    "unaccounted_s": ("submit_to_start_s minus the parts (moments between steps)", "s"),
    "resume_nodes": ("nodes of the ResumeProgram call that brought this node up", ""),
    "waited_in_queue": ("the node's part waited for another request's slot", ""),
}


@dataclass(frozen=True)
class Job:
    job_id: str
    submit: float
    start: float
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Resume:
    started: float
    ended: float
    ready: tuple[str, ...]
    timings: Mapping[str, float]


SACCT_FIELDS = ("JobID", "Submit", "Start", "NodeList", "State")


def parse_sacct(text: str, expand: Mapping[str, Sequence[str]] | None = None) -> list[Job]:
    """``sacct -X -n -P -o JobID,Submit,Start,NodeList,State`` with SLURM_TIME_FORMAT=%s:
    the jobs that started. ``expand`` maps a hostlist expression to its nodes."""
    jobs = []
    for row in sacct.parse(text, SACCT_FIELDS):
        submit, start = sacct.epoch(row["Submit"]), sacct.epoch(row["Start"])
        nodelist = row["NodeList"]
        if start is None or submit is None or nodelist in ("", "None assigned"):
            continue  # never started (or pending)
        nodes = tuple((expand or {}).get(nodelist, nodelist.split(",")))
        jobs.append(Job(row["JobID"], submit, start, nodes))
    return jobs


def parse_resumes(text: str) -> list[Resume]:
    """The client's resume timings, one JSON object per line; a torn last line is skipped."""
    out = []
    for line in text.splitlines():
        try:
            raw = json.loads(line)
            timings = {str(k): float(v) for k, v in raw["timings"].items()}
            if "started" in raw:
                started = float(raw["started"])
            else:  # a line from before the client recorded its start: when it was written
                started = float(raw["time"]) - timings["total"]
            ended = started + timings["total"]
            out.append(Resume(started, ended, tuple(raw["ready"]), timings))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def _provision_of(node: str, resume: Resume, provisions: Iterable[Mapping[str, Any]]) -> Any:
    """The testbed log's record of ``node``'s provisioning within ``resume``, or None."""
    for record in provisions:
        started = float(record.get("started", 0))
        if node in record.get("nodes", []) and resume.started <= started <= resume.ended:
            return record
    return None


def rows(
    jobs: Iterable[Job],
    resumes: Sequence[Resume],
    provisions: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The taxonomy rows: each job that waited for a resume, once per node it waited for."""
    out = []
    for job in jobs:
        for node in job.nodes:
            resume = _resume_of(node, job, resumes)
            if resume is None:
                continue  # the node was up already: the job waited for no provisioning
            t = resume.timings
            manager = t.get("manager", 0.0)
            power_on = t.get("power_on", 0.0)
            power_on_started = resume.started + manager
            provision = _provision_of(node, resume, provisions)
            if provision is not None:
                slot_wait = float(provision["started"]) - power_on_started
                testbed = float(provision["ended"]) - float(provision["started"])
                queued = float(provision.get("waited_s", 0.0)) > 0.5
            else:
                slot_wait = testbed = 0.0
                queued = False
            # a job that started before the client's poll saw its node register did not wait
            # for that poll: the lag comes off registration, not off the parts before it
            register = t.get("register", 0.0)
            lag = max(0.0, resume.ended - job.start)
            parts = {
                "slurm_to_resume_s": resume.started - job.submit,
                "manager_s": manager,
                "slot_wait_s": slot_wait,
                "testbed_s": testbed,
                "network_ssh_s": power_on - slot_wait - testbed,
                "configure_s": t.get("playbook", 0.0),
                "register_s": register - min(lag, register),
                "slurm_to_start_s": job.start - resume.ended + min(lag, register),
            }
            total = job.start - job.submit
            out.append(
                {
                    "job_id": job.job_id,
                    "node": node,
                    "submit": job.submit,
                    "start": job.start,
                    "submit_to_start_s": total,
                    **{k: round(v, 3) for k, v in parts.items()},
                    "unaccounted_s": round(total - sum(parts.values()), 3),
                    "resume_nodes": ",".join(resume.ready),
                    "waited_in_queue": queued,
                }
            )
    return out


# The client notices a registration at its next poll of Slurm, so its resume can end after
# the job it woke has started: by a poll (two seconds) and an sinfo call, more under load.
POLL_LAG_S = 15.0


def _resume_of(node: str, job: Job, resumes: Sequence[Resume]) -> Resume | None:
    """The resume that brought ``node`` up for ``job``: the last one, with the node ready, to
    start between the job's submission and its start (a second either side, for accounting's
    whole seconds) and to end no later than the client's poll lag after the start."""
    found = [
        r
        for r in resumes
        if node in r.ready
        and job.submit - 1.0 <= r.started <= job.start + 1.0
        and r.ended <= job.start + POLL_LAG_S
    ]
    return max(found, key=lambda r: r.started, default=None)


def collect(
    inventory: Path,
    ssh_config: Path,
    provisions: Sequence[Mapping[str, Any]],
    *,
    since: float = 0.0,
    timings_file: str = node_paths.RESUME_TIMINGS,
) -> list[dict[str, Any]]:
    """The rows of an experiment's jobs that started since ``since`` (epoch), read from its
    Slurm controller over SSH."""
    head = controller(inventory, "to ask")
    # sacct reads -S in the controller's time zone; the nodes keep UTC, as ptc's images do
    window = datetime.fromtimestamp(max(since, 86400.0), UTC).strftime("%Y-%m-%dT%H:%M:%S")
    text = ssh.run(
        ssh_config, head, sacct.command(SACCT_FIELDS, "-a", "-X", "-S", window), timeout=120
    )
    nodelists = {row["NodeList"] for row in sacct.parse(text, SACCT_FIELDS)}
    expand = {}
    for nodelist in sorted(n for n in nodelists if n and n != "None assigned"):
        names = ssh.run(
            ssh_config, head, f"scontrol show hostnames {shlex.quote(nodelist)}", timeout=60
        )
        expand[nodelist] = names.split()
    timings = ssh.execute(ssh_config, head, f"cat {shlex.quote(timings_file)}", timeout=60)
    resumes = parse_resumes(timings.text if timings.returncode == 0 else "")
    return rows(parse_sacct(text, expand), resumes, provisions)
