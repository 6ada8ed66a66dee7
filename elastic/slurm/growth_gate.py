"""Growth across sites, live: the site a pool grows onto is chosen by a policy, and Slurm is
kept to it by holding the other sites' free nodes back.

Slurm 22.05 chooses among powered-down CLOUD nodes without regard to their weights (seen on the
elastic test pool: node-2/3 at weight 1, node-0/1 at weight 2, and ``sbatch --test-only -N1``
still chose node-0), so a policy cannot steer a resume by weight. Instead, at each round of the
client's loop, the gate reads every pool node's state, counts per site the free nodes (idle,
powered down or up), the running ones and those powering up, and asks a growth policy of
``elastic.policies.growth`` where the nodes the waiting jobs ask for (at least one, for the
next job to come) would go. Then it holds back from Slurm (a reservation per site,
``ptc-gated-SITE``, which the client keeps) the free nodes of every site the policy did not
choose, and those of a later choice beyond what the policy put there; the first choice keeps
all its free nodes. So jobs take the nodes where the policy grows the pool. When the chosen
sites fill up, the next round chooses others, and their nodes are let go.

- ``cheapest``: the cheapest site with free nodes first (``cheapest_first``);
- ``mycluster``: MyCluster's liability-adjusted throughput (``liability_adjusted``): a site
  whose nodes are slow to come up (many powering up against few running) loses to one whose
  nodes come up, over a window of rounds.

A job that needs more nodes than the chosen sites hold free waits at most one round (the
client's loop runs every few seconds) for the gate to open the next site. A job that asks for a
site by name (``--constraint=SITE``, or ``A|B``: each site is a node feature) made the choice
itself: while it waits, that site is not held back, whatever the policy.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from elastic.errors import InputError
from elastic.policies.growth import (
    DEFAULT_WINDOW,
    Placement,
    Sample,
    SiteState,
    cheapest_first,
    liability_adjusted,
)
from elastic.slurm.sites import SiteNodes

GATED_PREFIX = "ptc-gated-"
POLICIES: dict[str, Callable[[Sequence[SiteState], int], Placement]] = {
    "cheapest": cheapest_first,
    "mycluster": liability_adjusted,
}
_RUNNING = ("allocated", "mixed", "completing")


def free(state: str) -> bool:
    """A node a job may have now: idle, powered up or down (``idle``, ``idle~``), or so while
    held in a reservation of ours (``reserved``, ``reserved~``); never drained, down, failing or
    on its way up or down."""
    base = state.rstrip("~#%*$@^-!+")
    marks = set(state[len(base) :])
    return base in ("idle", "reserved") and marks <= {"~"}


@dataclass
class GrowthGate:
    """``policy``: ``cheapest`` or ``mycluster``; the runs' history (for MyCluster's window)
    is kept in memory, one sample per round."""

    policy: str
    window: int = DEFAULT_WINDOW
    history: dict[str, deque[Sample]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise InputError(f"growth policy: {self.policy!r} is not one of {', '.join(POLICIES)}")

    def held_back(
        self,
        sites: Sequence[SiteNodes],
        states: Mapping[str, str],
        demand: int,
        closed: frozenset[str] = frozenset(),
        asked: frozenset[str] = frozenset(),
    ) -> dict[str, list[str]]:
        """The reservations the gate wants, ``{ptc-gated-SITE: free nodes held back}``, for the
        waiting jobs' ``demand`` (nodes) and the nodes' ``states``; sites in ``closed`` (paused)
        are no candidates. A site named in ``asked`` (a waiting job's ``--constraint`` names
        it) keeps all its free nodes, as the first choice does: the gate steers the jobs that
        leave the choice to Slurm, and must not starve one that made it."""
        candidates, open_ = [], {}
        for site in sites:
            mine = [states.get(n, "") for n in site.nodes]
            # the free nodes, those already up first: they are the last a site holds back
            open_[site.name] = sorted(
                (n for n in site.nodes if free(states.get(n, ""))),
                key=lambda n: "~" in states.get(n, ""),
            )
            running = sum(s.rstrip("~#%*$@^-!+") in _RUNNING for s in mine)
            pending = sum("#" in s for s in mine)
            past = self.history.setdefault(site.name, deque(maxlen=self.window))
            if site.name not in closed:
                candidates.append(
                    SiteState(
                        site.name,
                        site.site.price,
                        len(open_[site.name]),
                        running,
                        pending,
                        history=tuple(past),
                    )
                )
            past.appendleft((running, pending))
        if not candidates:
            return {}
        placed = POLICIES[self.policy](candidates, max(demand, 1)).counts
        if not placed:
            return {}  # no free node anywhere: nothing to steer
        first = next(iter(placed))
        held = {}
        for site in sites:
            if site.name in closed or site.name == first or site.name in asked:
                continue  # a paused site is the pause's; the first choice keeps all its room
            extra = open_[site.name][placed.get(site.name, 0) :]
            if extra:
                held[GATED_PREFIX + site.name] = extra
        return held
