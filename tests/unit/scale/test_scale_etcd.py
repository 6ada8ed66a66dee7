"""The scale harness's etcd store: the member it starts is one the manager's configuration
reaches, it is counted before anything starts, and the run's cleanup takes it down."""

from __future__ import annotations

import importlib.util
import shutil
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from benchmarks.scale.budget import MIB
from benchmarks.scale.cleanup import tear_down
from benchmarks.scale.cluster import Layout
from benchmarks.scale.etcd import STATE_KEY, client_directory, etcd_argv, start_etcd
from elastic.configserver.node import node_endpoints
from elastic.manager.etcd_store import from_config

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "scale_bench.py"


def load_script() -> Any:
    spec = importlib.util.spec_from_file_location("scale_script_etcd", SCRIPT)
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_member_is_configured_as_the_role_configures_one(tmp_path: Path) -> None:
    argv = etcd_argv(Path("/x/etcd"), tmp_path / "data", tmp_path / "pki", 2379, 2380, None)
    assert argv[0] == "/x/etcd"
    assert "--client-cert-auth" in argv and "--peer-client-cert-auth" in argv
    assert any(a.startswith("--auth-token=jwt,") for a in argv)
    assert f"--listen-client-urls=https://127.0.0.1:{2379}" in argv
    # etcd's own request limit unless asked: the role sets none
    assert not any(a.startswith("--max-request-bytes") for a in argv)
    more = etcd_argv(Path("/x/etcd"), tmp_path, tmp_path, 1, 2, 8 * MIB)
    assert more[-1] == f"--max-request-bytes={8 * MIB}"


def test_the_credential_directory_is_a_node_s(tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    for sub in ("clients", "users"):
        (pki / sub).mkdir(parents=True)
    (pki / "ca.crt").write_text("ca")
    (pki / "clients" / "manager.crt").write_text("crt")
    (pki / "clients" / "manager.key").write_text("key")
    (pki / "users" / "manager.password").write_text("pw\n")
    d = client_directory(pki, tmp_path / "client", "https://127.0.0.1:4001")
    assert sorted(p.name for p in d.iterdir()) == [
        "ca.crt", "endpoints", "manager.crt", "manager.key", "manager.password",
    ]  # fmt: skip
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in d.iterdir())
    assert [e.url for e in node_endpoints(d)] == ["https://127.0.0.1:4001"]


def test_etcd_s_memory_is_counted_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_script()
    monkeypatch.setattr(script, "mem_available", lambda: 10_000 * MIB)
    monkeypatch.setenv("PTC_HOME", str(tmp_path / "home"))
    started: list[str] = []
    monkeypatch.setattr(script, "unpack_etcd", lambda cache: started.append("unpack"))
    monkeypatch.setattr(script, "live_part", lambda *a: started.append("live"))
    monkeypatch.setattr(script, "rounds_part", lambda *a: started.append("rounds"))
    none = ["--baseline", str(tmp_path / "none.json"), "--parts", "live"]
    # 400 nodes of 12 MiB and 2 GiB fit 70% of 10,000 MiB; with etcd's 1 GiB more they do not
    assert script.budget_from(None).need(400) < 7000 * MIB < script.budget_from(None, 1024 * MIB).need(400)  # fmt: skip
    assert script.main(["--sizes", "400", "--store", "etcd", *none]) == 2
    assert started == []
    assert not (tmp_path / "home").exists()
    assert "error: size 400:" in capsys.readouterr().out


def test_a_baseline_of_the_other_store_is_not_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_script()
    base = tmp_path / "baseline.json"
    base.write_text('{"rounds": {"100": {"reclaim_s": 0.001}}}')
    monkeypatch.setenv("PTC_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(script, "unpack_etcd", lambda cache: Path("/x/etcd"))
    monkeypatch.setattr(script, "rounds_part", lambda *a: {"100": {"reclaim_s": 9.0}})
    argv = ["--sizes", "100", "--parts", "rounds", "--baseline", str(base), "--trace",
            str(Path(__file__).resolve().parents[2] / "data" / "traces" / "KTH-SP2-1996-2-first-100.swf"),
            "--out", str(tmp_path / "out.json")]  # fmt: skip
    assert script.main([*argv, "--store", "etcd"]) == 0
    assert "not compared: baseline.json measured the file store" in capsys.readouterr().out
    assert script.main(argv) == 1  # the same figures against a file store's baseline


@pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd is not installed (etcd-server)")
def test_the_member_serves_the_manager_s_store_and_the_cleanup_stops_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "run", Path("/nonexistent"), 1)
    layout.run.mkdir(parents=True)
    run_id = uuid.uuid4().hex[:12]
    etcd = start_etcd(layout, run_id, Path(str(shutil.which("etcd"))))
    try:
        assert etcd.data.is_relative_to(layout.run)
        store = from_config(etcd.store_settings(timeout=10))
        assert store.key == STATE_KEY
        revision = store.write({"nodes": {}}, expect=0)
        assert store.read() == (revision, {"nodes": {}})
        store.client.close()
    finally:
        done = tear_down(layout.ledger, run_id, remove=lambda p: None)
    assert etcd.proc.pid in done["stopped"]
    assert etcd.proc.wait(timeout=10) is not None
