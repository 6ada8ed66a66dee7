"""Content-defined chunks of a stored state: whole, bounded, and local to a change."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.manager import chunks
from elastic.manager.store import encode


def pool(nodes: int) -> dict[str, object]:
    return {
        "nodes": {
            f"n{i:05d}": {"owner": "pool", "cpus": 4, "since": 1e9 + i} for i in range(nodes)
        },
        "values": {f"n{i:05d}": i / nodes for i in range(nodes)},
    }


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3 * chunks.MAX_BYTES).map(lambda b: b.replace(b"\x00", b"},")))
def test_the_chunks_are_the_data_and_within_bounds(data: bytes) -> None:
    parts = chunks.split(data)
    assert b"".join(parts) == data
    assert all(len(p) <= chunks.MAX_BYTES for p in parts)
    assert all(len(p) > 0 for p in parts) or data == b""


def test_a_large_state_is_cut_and_a_change_touches_few_chunks() -> None:
    before = pool(10_000)
    data = encode(before)
    parts = chunks.split(data)
    assert len(parts) > 10
    assert all(len(p) >= chunks.MIN_BYTES for p in parts[:-1])
    after = json.loads(data)
    after["nodes"]["n05000"]["owner"] = "slurm"
    new = set(map(chunks.name, chunks.split(encode(after)))) - set(map(chunks.name, parts))
    assert 1 <= len(new) <= 2


def test_an_insertion_shifts_only_the_chunks_around_it() -> None:
    before = pool(10_000)
    after = json.loads(encode(before))
    after["nodes"]["n04999a"] = {"owner": "pool", "cpus": 8, "since": 0.0}
    old = set(map(chunks.name, chunks.split(encode(before))))
    new = [p for p in chunks.split(encode(after)) if chunks.name(p) not in old]
    assert 1 <= len(new) <= 2


def test_a_chunk_is_named_by_its_bytes() -> None:
    assert chunks.name(b"{}") == chunks.name(b"{}") != chunks.name(b"[]")
    assert len(chunks.name(b"{}")) == 32
