"""Selection rules of active learning (thesis §6.5.2.4, §7.4).

Each rule picks the index of the next candidate from the model's predictions at the candidates
(``mu``, ``sigma``: mean and standard deviation of the log response):

- ``VR`` (Variance Reduction): argmax sigma;
- ``CE`` (Cost Efficiency): argmax sigma - C * mu. With log responses this is the
  variance/cost ratio of eq. 6.14 (C = 1 there; §7.4 tries C from 0.0625 to 1). When the
  response is a time and the cost is core-seconds, the caller passes ``log_cost`` = mu +
  log(cores), the predicted log *cost* of each candidate (the cores are a controlled variable,
  known exactly): Ch6 modelled the runtime and read it as the cost, Ch7 weighted by the
  expected node-hours; ptc counts cost in core-seconds, so it penalises the predicted
  core-seconds;
- ``Random``: uniformly at random, the baseline.

Candidates may repeat configurations already measured: the data are noisy, so measuring a point
again can be the best next experiment (§6.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from elastic.errors import InputError

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Rule:
    name: str
    cost_weight: float = 1.0

    def score(self, mu: Array, sigma: Array, log_cost: Array | None = None) -> Array:
        """The rule's criterion at each candidate; ``log_cost`` defaults to ``mu``."""
        if self.name == "VR":
            return sigma
        if self.name == "CE":
            return sigma - self.cost_weight * (mu if log_cost is None else log_cost)
        raise InputError(f"rule {self.name!r} has no score")

    def pick(
        self,
        mu: Array,
        sigma: Array,
        rng: np.random.Generator,
        log_cost: Array | None = None,
    ) -> int:
        """Index of the candidate with the highest score (the first of equals), or a random one."""
        if len(mu) == 0:
            raise InputError("no candidates to choose from")
        if self.name == "Random":
            return int(rng.integers(len(mu)))
        return int(np.argmax(self.score(mu, sigma, log_cost)))

    @property
    def label(self) -> str:
        return f"CE(C={self.cost_weight:g})" if self.name == "CE" else self.name


def parse(text: str, default_c: float = 1.0) -> Rule:
    """``VR``, ``Random``, ``CE`` (C = default_c) or ``CE:0.25``."""
    name, _, weight = text.strip().partition(":")
    canonical = {"vr": "VR", "ce": "CE", "random": "Random"}.get(name.lower())
    if canonical is None:
        raise InputError(f"--rules: unknown rule {text!r} (VR, CE, CE:C or Random)")
    if weight and canonical != "CE":
        raise InputError(f"--rules: only CE takes a cost weight, not {text!r}")
    try:
        c = float(weight) if weight else default_c
    except ValueError as err:
        raise InputError(f"--rules: cost weight of {text!r} is not a number") from err
    if c < 0:
        raise InputError(f"--rules: cost weight of {text!r} must not be negative")
    return Rule(canonical, c)


def parse_list(text: str, default_c: float = 1.0) -> list[Rule]:
    rules = [parse(part, default_c) for part in text.split(",") if part.strip()]
    if not rules:
        raise InputError("--rules: name at least one rule")
    return rules
