"""Shared fixtures for the testbed tests: an isolated PTC_HOME and the repository's profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.testbed.backends.local import capacity


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # render logs and experiment state must not land in the developer's real PTC_HOME.
    home = tmp_path / "ptc-home"
    monkeypatch.setenv("PTC_HOME", str(home))
    # nor may a geni-lib context of the developer's (~/.bssw/geni/context.json) choose users
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    # nor may the machine-wide testbed's books; the fake backends here make no containers
    monkeypatch.setenv(capacity.ENV, str(tmp_path / "testbed"))
    monkeypatch.setattr(capacity, "listing", lambda testbed: [])
    return home
