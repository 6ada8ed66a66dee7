"""The vectorised path must agree with the scalar reference, value for value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from elastic.policies import (
    POLICY_NAMES,
    SnapshotBatch,
    make_policy,
    select_batch,
    select_nodes,
    wasted_batch,
    wasted_cycles,
)

GPS = (0.0, 30.0, 60.0, 600.0)


@st.composite
def batches(draw: st.DrawFn) -> SnapshotBatch:
    """Random snapshots of a partition with multi-node jobs, idle nodes and ties."""
    n_nodes = draw(st.integers(1, 8))
    n_snaps = draw(st.integers(1, 6))
    rows: list[list[int]] = []
    elapsed = np.zeros((n_snaps, n_nodes))
    remaining = np.zeros((n_snaps, n_nodes))
    count = np.zeros((n_snaps, n_nodes))
    priority = np.zeros((n_snaps, n_nodes))
    job_id = 0
    for s in range(n_snaps):
        row = [-1] * n_nodes
        col = 0
        while col < n_nodes:
            width = draw(st.integers(1, n_nodes - col))
            if draw(st.booleans()):
                cols = list(range(col, col + width))
                for c in cols:
                    row[c] = job_id
                elapsed[s, cols] = draw(st.sampled_from([0.0, 10.0, 30.0, 45.5, 3600.0]))
                remaining[s, cols] = draw(st.sampled_from([0.0, 30.0, 59.0, 60.0, 1e4]))
                count[s, cols] = width
                priority[s, cols] = draw(st.sampled_from([1.0, 1.0, 10.0, 0.5]))
                job_id += 1
            col += width
        rows.append(row)
    return SnapshotBatch(
        times=np.arange(n_snaps, dtype=np.float64),
        job=np.asarray(rows, dtype=np.int64),
        elapsed=elapsed,
        remaining=remaining,
        node_count=count,
        priority=priority,
    )


def _scalar_values(name: str, batch: SnapshotBatch) -> NDArray[np.float64]:
    policy = make_policy(name, seed=3)
    out = np.empty(batch.shape)
    for s in range(batch.shape[0]):
        pv = policy.evaluate(batch.snapshot(s))
        out[s] = list(pv.values.values())
    return out


@pytest.mark.parametrize("name", POLICY_NAMES)
@given(batch=batches(), preempt_share=st.floats(0.0, 1.0))
@settings(max_examples=60, deadline=None)
def test_batch_agrees_with_scalar(name: str, batch: SnapshotBatch, preempt_share: float) -> None:
    vector = make_policy(name, seed=3).evaluate_batch(batch)
    scalar = _scalar_values(name, batch)
    assert np.array_equal(vector, scalar)  # bit-identical, so ties resolve identically
    assert ((vector >= 0) & (vector <= 1)).all()  # PVs stay within [0, 1]
    assert (vector[~batch.busy] == 0).all()

    preempt = round(preempt_share * batch.shape[1])
    chosen = select_batch(vector, preempt)
    total, high = wasted_batch(batch, chosen, GPS)
    names = tuple(f"n{i:03d}" for i in range(batch.shape[1]))
    policy = make_policy(name, seed=3)
    for s in range(batch.shape[0]):
        snapshot = batch.snapshot(s, names)
        picked = select_nodes(policy.evaluate(snapshot), preempt)
        assert picked == [names[c] for c in chosen[s]]
        for g, gp in enumerate(GPS):
            waste = wasted_cycles(snapshot, picked, gp)
            assert total[g, s] == pytest.approx(waste.total)
            high_jobs = {j.job_id for j in snapshot.jobs if j.priority > 1.0}
            expected_high = sum(v for k, v in waste.per_job.items() if k in high_jobs)
            assert high[g, s] == pytest.approx(expected_high)
    assert (total >= 0).all()  # WC is never negative
    assert (high <= total + 1e-9).all()
