"""A job trace as columns: one array per attribute, one row per job, in file order."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

StrArray = NDArray[np.object_]


@dataclass(frozen=True)
class Trace:
    """Times in seconds. Missing numbers are NaN (``nodes``: -1); missing strings are ''.

    ``requested`` is the user's wall-clock request (EASY reservations use it). ``fields`` keeps
    every raw column of the source (all 18 for SWF); ``metadata`` keeps the header.
    """

    name: str
    job_id: NDArray[np.int64]
    submit: NDArray[np.float64]
    runtime: NDArray[np.float64]
    requested: NDArray[np.float64]
    nodes: NDArray[np.int64]
    completed: NDArray[np.bool_]
    status_known: NDArray[np.bool_]
    queue: StrArray
    application: StrArray
    user: StrArray
    priority: NDArray[np.float64]
    fields: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.job_id.shape[0])

    @property
    def missing(self) -> NDArray[np.bool_]:
        """Rows lacking a field the simulator needs."""
        return (
            np.isnan(self.submit)
            | np.isnan(self.runtime)
            | np.isnan(self.requested)
            | (self.nodes < 1)
            | ~self.status_known
        )

    def take(self, index: NDArray[np.int64] | NDArray[np.bool_]) -> Trace:
        return replace(
            self,
            job_id=self.job_id[index],
            submit=self.submit[index],
            runtime=self.runtime[index],
            requested=self.requested[index],
            nodes=self.nodes[index],
            completed=self.completed[index],
            status_known=self.status_known[index],
            queue=self.queue[index],
            application=self.application[index],
            user=self.user[index],
            priority=self.priority[index],
            fields={k: v[index] for k, v in self.fields.items()},
        )

    def with_priority(self, priority: NDArray[np.float64]) -> Trace:
        return replace(self, priority=np.asarray(priority, dtype=np.float64))

    def string_columns(self) -> dict[str, list[str]]:
        return {
            "queue": list(self.queue),
            "application": list(self.application),
            "user": list(self.user),
            "job_id": [str(j) for j in self.job_id],
        }


def str_array(values: list[str]) -> StrArray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def make_trace(
    name: str,
    *,
    job_id: list[int],
    submit: list[float],
    runtime: list[float],
    requested: list[float],
    nodes: list[int],
    completed: list[bool],
    status_known: list[bool],
    queue: list[str],
    application: list[str],
    user: list[str],
    fields: dict[str, NDArray[np.float64]] | None = None,
    metadata: dict[str, str] | None = None,
) -> Trace:
    return Trace(
        name=name,
        job_id=np.asarray(job_id, dtype=np.int64),
        submit=np.asarray(submit, dtype=np.float64),
        runtime=np.asarray(runtime, dtype=np.float64),
        requested=np.asarray(requested, dtype=np.float64),
        nodes=np.asarray(nodes, dtype=np.int64),
        completed=np.asarray(completed, dtype=bool),
        status_known=np.asarray(status_known, dtype=bool),
        queue=str_array(queue),
        application=str_array(application),
        user=str_array(user),
        priority=np.ones(len(job_id)),
        fields=fields or {},
        metadata=metadata or {},
    )
