"""The manager's JSON file store: compact on disk, replaced atomically, and still reading the
indented files earlier versions wrote."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from elastic.atomic import write_json
from elastic.errors import PtcError
from elastic.manager.errors import RevisionConflict
from elastic.manager.store import JsonFileStore, encode

DOC = {"nodes": {"emu00002": {"owner": None}, "emu00001": {"owner": "elastic"}}, "events": []}


def test_a_write_is_compact_sorted_and_root_only(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = JsonFileStore(path)
    assert store.write(DOC, expect=0) == 1
    raw = path.read_bytes()
    # the encoding of an indent takes Python's pure-Python encoder: none on disk
    assert raw == encode({"revision": 1, "state": DOC}) + b"\n"
    assert b" " not in raw and raw.count(b"\n") == 1
    assert raw.startswith(b'{"revision":1,"state":{"events":[],"nodes":{"emu00001"')
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert store.read() == (1, DOC)


def test_an_indented_file_of_an_earlier_version_is_read_and_written_on(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json(path, {"revision": 7, "state": DOC}, mode=0o600)
    store = JsonFileStore(path)
    assert store.read() == (7, DOC)
    with pytest.raises(RevisionConflict):
        store.write({}, expect=6)
    assert store.write({**DOC, "events": [1]}, expect=7) == 8
    assert json.loads(path.read_text()) == {"revision": 8, "state": {**DOC, "events": [1]}}


def test_a_write_that_fails_leaves_the_old_state_and_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    store = JsonFileStore(path)
    store.write(DOC, expect=0)
    before = path.read_bytes()

    def no_replace(src: object, dst: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(OSError, match="disk gone"):
        store.write({"nodes": {}}, expect=1)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".state.json.lock", "state.json"]


def test_a_write_reads_the_revision_from_the_head_and_refuses_a_file_not_ours(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    store = JsonFileStore(path)
    store.write(DOC, expect=0)
    # another writer's revision is seen without parsing the state after it
    path.write_bytes(b'{"revision":41,"state":{"nodes":' + b" " * 1000 + b"{}}}\n")
    with pytest.raises(RevisionConflict, match="revision is 41"):
        store.write(DOC, expect=1)
    assert store.write(DOC, expect=41) == 42
    path.write_text("not json\n")
    with pytest.raises(PtcError, match="unreadable"):
        store.write(DOC, expect=42)
    path.write_text('{"state": {}}\n')
    with pytest.raises(PtcError, match="no revision"):
        store.write(DOC, expect=42)
    assert path.read_text() == '{"state": {}}\n'
