"""Where ptc keeps its state: one directory, whichever way ptc is started from its checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic import paths


def test_without_ptc_home_state_lives_in_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PTC_HOME", raising=False)
    assert (paths.REPO_ROOT / "site.yml").is_file()
    assert paths.home() == paths.REPO_ROOT / "state"
    assert paths.experiments_dir() == paths.REPO_ROOT / "state" / "experiments"


def test_the_checkout_s_state_is_ignored_by_git() -> None:
    ignored = (paths.REPO_ROOT / ".gitignore").read_text().split()
    assert "/state/" in ignored or "state/" in ignored or "/state" in ignored


def test_ptc_home_overrides_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PTC_HOME", str(tmp_path / "elsewhere"))
    assert paths.home() == tmp_path / "elsewhere"
    assert paths.experiments_dir() == tmp_path / "elsewhere" / "experiments"


def test_an_empty_ptc_home_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTC_HOME", "")
    assert paths.home() == paths.REPO_ROOT / "state"


def test_outside_a_checkout_state_follows_xdg(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PTC_HOME", raising=False)
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path / "not-a-checkout")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert paths.home() == tmp_path / "data" / "ptc"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert paths.home() == Path.home() / ".local" / "share" / "ptc"
