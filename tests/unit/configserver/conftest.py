"""Fixtures: a real single-member etcd on loopback (see etcd_env), one per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from etcd_env import EtcdServer, apply_auth, etcd_binary, make_pki, start_etcd


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if etcd_binary() is not None:
        return
    # CI installs etcd-server (make setup); there a missing etcd is a failure, not a skip.
    if os.environ.get("CI"):
        raise pytest.UsageError("etcd is not installed: apt-get install etcd-server (make setup)")
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.skip(reason="etcd is not installed (etcd-server)"))


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("etcd-pki"))


@pytest.fixture(scope="session")
def etcd(pki: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    work = tmp_path_factory.mktemp("etcd")
    server = start_etcd(pki, work / "data", work / "etcd.log")
    try:
        apply_auth(server)
        yield server
    finally:
        server.stop()


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    """A key prefix of this test's own under /ptc/manager/ (the manager user may write it)."""
    return f"/ptc/manager/{request.node.name}/"
