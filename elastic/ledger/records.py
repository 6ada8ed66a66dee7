"""The ledger's rows, folded from the runs (sacct) and the pool's history (the manager's log),
and their sums by job, user, site or experiment. Pure: no I/O, no clock.

- **used**: each run's ``ElapsedRaw x NNodes`` (:mod:`elastic.ledger.runs`), every run of a
  requeued job included.
- **lost**: the node-time of a run a reclamation threw away: the run of a job the reclamation
  killed (``jobs-requeued``, or ``jobs_killed`` of a node taken at the deadline) that ended
  between the reclamation's start and the manager hearing of it (:data:`SLACK_S` either side).
  Its node-time counts as used and as lost.
- **lent**: the time a pool node was held by a lending partition (``ref``: the reference
  client's, which holds the machines lent to other experiments), from its ``nodes-added`` to its
  ``nodes-deleted``. The borrower is the experiment the loan book names for a node lent now, else
  the partition.
- **instances**: the time a pool node was held by the cluster's own partitions (every other
  one): its machine ran for the cluster. A site's cost is its price per node-hour times that
  time, or, with ``round_hours``, times each hold's started hours (the thesis's billing).

Every time is clipped to the period: the runs by sacct itself (``--truncate``), the holds here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from elastic.errors import InputError
from elastic.ledger.period import iso
from elastic.ledger.pool import Kill, PoolHistory
from elastic.ledger.runs import Run

LOCAL = "local"  # the site of the cluster's own pool, and of nodes no sites file names
LENDERS = frozenset({"ref"})  # the partitions that hold machines lent to other experiments
BY = ("job", "user", "site", "experiment")
SLACK_S = 30.0  # a killed run ends around the deadline; the manager hears of it just after
KILLED_STATES = frozenset({"REQUEUED", "CANCELLED", "PREEMPTED", "NODE_FAIL", "FAILED"})


class EmptyPeriod(InputError):
    """No job ran and no pool node was held in the period."""


@dataclass(frozen=True)
class Site:
    name: str
    price: float  # per node-hour


@dataclass(frozen=True)
class RunRow:
    job_id: str
    user: str
    partition: str
    state: str
    start: float
    end: float | None
    nodes: int
    hosts: str  # the nodes it ran on, comma-separated
    elapsed_s: int
    used_node_s: int
    lost_node_s: int
    reclamation: str  # the reclamation that killed this run, or ""
    source: str = "sacct"  # or "manager": a killed run sacct no longer has (see build)


@dataclass(frozen=True)
class LoanRow:
    node: str
    site: str
    partition: str
    borrower: str
    start: float
    end: float | None  # None: still lent
    node_s: float  # within the period


@dataclass(frozen=True)
class InstanceRow:
    node: str
    site: str
    partition: str
    start: float
    end: float | None  # None: still held
    instance_s: float  # within the period
    price: float
    cost: float


@dataclass(frozen=True)
class Ledger:
    experiment: str
    since: float
    until: float
    round_hours: bool
    sites: tuple[Site, ...]  # the local site first
    node_sites: Mapping[str, str]  # node -> its site's name, for nodes a sites file names
    runs: tuple[RunRow, ...]
    loans: tuple[LoanRow, ...]
    instances: tuple[InstanceRow, ...]

    def totals(self) -> dict[str, Any]:
        used = sum(r.used_node_s for r in self.runs)
        lost = sum(r.lost_node_s for r in self.runs)
        lent = sum(loan.node_s for loan in self.loans)
        held = sum(i.instance_s for i in self.instances)
        return {
            "jobs": len({r.job_id for r in self.runs}),
            "runs": len(self.runs),
            **_seconds_and_hours("used_node", used),
            **_seconds_and_hours("lost_node", lost),
            **_seconds_and_hours("lent_node", lent),
            **_seconds_and_hours("instance", held),
            "cost": round(sum(i.cost for i in self.instances), 6),
        }

    def to_json(self, by: str) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "since": self.since,
            "until": self.until,
            "since_iso": iso(self.since) + "Z",
            "until_iso": iso(self.until) + "Z",
            "by": by,
            "round_hours": self.round_hours,
            "sites": [asdict(s) for s in self.sites],
            "rows": summarise(self, by),
            "totals": self.totals(),
            "runs": [asdict(r) for r in self.runs],
            "loans": [asdict(loan) for loan in self.loans],
            "instances": [asdict(i) for i in self.instances],
        }


def build(
    experiment: str,
    since: float,
    until: float,
    runs: Sequence[Run],
    history: PoolHistory,
    *,
    sites: Mapping[str, Site] | None = None,
    local: Site = Site(LOCAL, 0.0),
    expand: Mapping[str, Sequence[str]] | None = None,
    borrowers: Mapping[str, str] | None = None,
    lenders: frozenset[str] = LENDERS,
    round_hours: bool = False,
) -> Ledger:
    """The ledger of ``experiment`` from ``since`` to ``until`` (epoch s). ``sites`` maps a
    node to its site (others are ``local``'s); ``expand`` a Slurm hostlist to its nodes;
    ``borrowers`` a node lent now to the experiment holding it. EmptyPeriod, naming
    ``--since``, when no job ran and no node was held in the period."""
    node_site = dict(sites or {})
    killed, matched = _killed_runs(runs, history.kills)
    rows = [
        RunRow(
            job_id=run.job_id,
            user=run.user,
            partition=run.partition,
            state=run.state,
            start=run.start,
            end=run.end,
            nodes=run.nodes,
            hosts=",".join((expand or {}).get(run.nodelist) or _plain(run.nodelist)),
            elapsed_s=run.elapsed_s,
            used_node_s=run.node_s,
            lost_node_s=run.node_s if index in killed else 0,
            reclamation=killed.get(index, ""),
        )
        for index, run in enumerate(runs)
    ]
    for index, kill in enumerate(history.kills):
        if index not in matched and (row := _reported_run(kill, runs, since, until)):
            rows.append(row)
    run_rows = tuple(sorted(rows, key=lambda r: r.start))
    loans: list[LoanRow] = []
    instances: list[InstanceRow] = []
    for hold in history.holds:
        inside = min(until, hold.end if hold.end is not None else until) - max(since, hold.start)
        if inside <= 0:
            continue
        site = node_site.get(hold.node, local)
        if hold.partition in lenders:
            borrower = (borrowers or {}).get(hold.node) if hold.end is None else None
            loans.append(
                LoanRow(
                    hold.node,
                    site.name,
                    hold.partition,
                    borrower or hold.partition,
                    hold.start,
                    hold.end,
                    inside,
                )
            )
            continue
        hours = math.ceil(inside / 3600.0) if round_hours else inside / 3600.0
        instances.append(
            InstanceRow(
                hold.node,
                site.name,
                hold.partition,
                hold.start,
                hold.end,
                inside,
                site.price,
                site.price * hours,
            )
        )
    if not run_rows and not loans and not instances:
        raise EmptyPeriod(
            f"--since {iso(since)}Z: no job ran and no pool node was held between then and "
            f"{iso(until)}Z on {experiment}"
        )
    known = {s.name: s for s in [local, *node_site.values()]}
    return Ledger(
        experiment,
        since,
        until,
        round_hours,
        tuple(sorted(known.values(), key=lambda s: (s.name != local.name, s.name))),
        {node: site.name for node, site in sorted(node_site.items())},
        run_rows,
        tuple(loans),
        tuple(instances),
    )


def _plain(nodelist: str) -> list[str]:
    """A node list with no brackets, split (``node-1`` or ``a,b``); a hostlist with brackets
    that ``expand`` did not cover stays whole."""
    if nodelist in ("", "None assigned"):
        return []
    return [nodelist] if "[" in nodelist else nodelist.split(",")


def _killed_runs(runs: Sequence[Run], kills: Sequence[Kill]) -> tuple[dict[int, str], set[int]]:
    """Run index -> the reclamation that killed it, and the kills so matched: for each kill,
    the run of that job, with node-time, that ended within the reclamation (the one ending
    nearest the kill's report), each run once."""
    taken: dict[int, str] = {}
    matched: set[int] = set()
    for number, kill in enumerate(kills):
        candidates = [
            (abs(run.end - kill.at), index)
            for index, run in enumerate(runs)
            if index not in taken
            and kill.job_id in (run.job_id, run.raw_id)
            and run.state in KILLED_STATES
            and run.end is not None
            and run.node_s > 0
            and kill.started - SLACK_S <= run.end <= kill.at + SLACK_S
        ]
        if candidates:
            taken[min(candidates)[1]] = kill.reclamation
            matched.add(number)
    return taken, matched


def _reported_run(kill: Kill, runs: Sequence[Run], since: float, until: float) -> RunRow | None:
    """A killed run sacct no longer has, from the Slurm client's report of it (Slurm's
    elapsed time and node count at the requeue); None when the report has neither or the run
    lies outside the period. Slurm 22.05 keeps one accounting record for a job requeued with
    ``scontrol requeuehold`` (the client's way), so the job's next run overwrites this one."""
    if kill.elapsed is None or not kill.node_count:
        return None
    start = kill.at - kill.elapsed
    inside = round(min(kill.at, until) - max(start, since))
    if inside <= 0:
        return None
    same = [r for r in runs if kill.job_id in (r.job_id, r.raw_id)]
    node_s = inside * kill.node_count
    return RunRow(
        job_id=same[0].job_id if same else kill.job_id,
        user=same[0].user if same else "",
        partition=same[0].partition if same else "",
        state="REQUEUED" if kill.requeued else "CANCELLED",
        start=max(start, since),
        end=kill.at,
        nodes=kill.node_count,
        hosts=",".join(kill.nodes),
        elapsed_s=inside,
        used_node_s=node_s,
        lost_node_s=node_s,
        reclamation=kill.reclamation,
        source="manager",
    )


def _seconds_and_hours(name: str, seconds: float) -> dict[str, float]:
    return {f"{name}_s": seconds, f"{name}_h": round(seconds / 3600.0, 6)}


def summarise(ledger: Ledger, by: str) -> list[dict[str, Any]]:
    """The ledger's rows summed by ``by`` (job, user, site or experiment); InputError naming
    ``--by`` for another word."""
    if by not in BY:
        raise InputError(f"--by {by!r}: not one of {', '.join(BY)}")
    if by == "job":
        return _by_job(ledger)
    if by == "user":
        return _by_user(ledger)
    if by == "site":
        return _by_site(ledger)
    return _by_experiment(ledger)


def _by_job(ledger: Ledger) -> list[dict[str, Any]]:
    jobs: dict[str, list[RunRow]] = {}
    for run in ledger.runs:
        jobs.setdefault(run.job_id, []).append(run)
    return [
        {
            "job_id": job,
            "user": rows[0].user,
            "runs": len(rows),
            "state": rows[-1].state,
            **_seconds_and_hours("used_node", sum(r.used_node_s for r in rows)),
            **_seconds_and_hours("lost_node", sum(r.lost_node_s for r in rows)),
            "reclamations": ",".join(r.reclamation for r in rows if r.reclamation),
        }
        for job, rows in jobs.items()
    ]


def _by_user(ledger: Ledger) -> list[dict[str, Any]]:
    users: dict[str, list[RunRow]] = {}
    for run in ledger.runs:
        users.setdefault(run.user, []).append(run)
    return [
        {
            "user": user,
            "jobs": len({r.job_id for r in rows}),
            "runs": len(rows),
            **_seconds_and_hours("used_node", sum(r.used_node_s for r in rows)),
            **_seconds_and_hours("lost_node", sum(r.lost_node_s for r in rows)),
        }
        for user, rows in sorted(users.items())
    ]


def _run_site_shares(run: RunRow, node_site: Mapping[str, str], local: str) -> dict[str, float]:
    """The share of a run's node-time on each site, by its nodes."""
    nodes = [n for n in run.hosts.split(",") if n]
    if not nodes:
        return {local: 1.0}
    shares: dict[str, float] = {}
    for node in nodes:
        site = node_site.get(node, local)
        shares[site] = shares.get(site, 0.0) + 1.0 / len(nodes)
    return shares


def _by_site(ledger: Ledger) -> list[dict[str, Any]]:
    local = ledger.sites[0].name
    names = [s.name for s in ledger.sites]
    used: dict[str, float] = dict.fromkeys(names, 0.0)
    lost: dict[str, float] = dict.fromkeys(names, 0.0)
    lent: dict[str, float] = dict.fromkeys(names, 0.0)
    held: dict[str, float] = dict.fromkeys(names, 0.0)
    cost: dict[str, float] = dict.fromkeys(names, 0.0)
    for run in ledger.runs:
        for site, share in _run_site_shares(run, ledger.node_sites, local).items():
            used[site] += run.used_node_s * share
            lost[site] += run.lost_node_s * share
    for loan in ledger.loans:
        lent[loan.site] += loan.node_s
    for inst in ledger.instances:
        held[inst.site] += inst.instance_s
        cost[inst.site] += inst.cost
    return [
        {
            "site": site.name,
            "price": site.price,
            **_seconds_and_hours("instance", held[site.name]),
            "cost": round(cost[site.name], 6),
            **_seconds_and_hours("used_node", round(used[site.name], 3)),
            **_seconds_and_hours("lost_node", round(lost[site.name], 3)),
            **_seconds_and_hours("lent_node", lent[site.name]),
        }
        for site in ledger.sites
    ]


def _by_experiment(ledger: Ledger) -> list[dict[str, Any]]:
    totals = ledger.totals()
    own = {
        "experiment": ledger.experiment,
        **_seconds_and_hours("used_node", totals["used_node_s"]),
        **_seconds_and_hours("lost_node", totals["lost_node_s"]),
        **_seconds_and_hours("lent_node", totals["lent_node_s"]),
        **_seconds_and_hours("borrowed_node", 0.0),
        **_seconds_and_hours("instance", totals["instance_s"]),
        "cost": totals["cost"],
    }
    borrowed: dict[str, float] = {}
    for loan in ledger.loans:
        borrowed[loan.borrower] = borrowed.get(loan.borrower, 0.0) + loan.node_s
    others = [
        {
            "experiment": borrower,
            **_seconds_and_hours("used_node", 0),
            **_seconds_and_hours("lost_node", 0),
            **_seconds_and_hours("lent_node", 0.0),
            **_seconds_and_hours("borrowed_node", seconds),
            **_seconds_and_hours("instance", 0.0),
            "cost": 0.0,
        }
        for borrower, seconds in sorted(borrowed.items())
    ]
    return [own, *others]
