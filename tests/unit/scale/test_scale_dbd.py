"""The scale harness's accounting: slurmctld sends it to the run's slurmdbd, which reaches its
MariaDB on loopback as the one user the harness makes."""

from __future__ import annotations

from pathlib import Path

from benchmarks.scale.cluster import Layout, slurm_conf
from benchmarks.scale.dbd import DATABASE, USER, grants, slurmdbd_conf


def settings(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_without_slurmdbd_accounting_is_off(tmp_path: Path) -> None:
    conf = settings(slurm_conf(Layout(tmp_path, tmp_path, 2)))
    assert conf["AccountingStorageType"] == "accounting_storage/none"
    assert "AccountingStoragePort" not in conf


def test_with_slurmdbd_slurmctld_sends_its_accounting_there(tmp_path: Path) -> None:
    conf = settings(slurm_conf(Layout(tmp_path, tmp_path, 2, dbd_port=6819)))
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert (conf["AccountingStorageHost"], conf["AccountingStoragePort"]) == ("127.0.0.1", "6819")
    # not the default /run/munge socket: the run's munged signs messages to slurmdbd too
    assert conf["AccountingStoragePass"] == str(Layout(tmp_path, tmp_path, 2).munge_socket)


def test_slurmdbd_listens_on_loopback_and_uses_mariadb_over_tcp(tmp_path: Path) -> None:
    text = slurmdbd_conf(tmp_path / "root", tmp_path / "dbd", tmp_path / "munge.socket", 6819,
                         3307, "secret")  # fmt: skip
    conf = settings(text)
    assert (conf["DbdAddr"], conf["DbdPort"]) == ("127.0.0.1", "6819")
    assert conf["AuthInfo"] == f"socket={tmp_path / 'munge.socket'}"
    assert conf["StorageType"] == "accounting_storage/mysql"
    assert (conf["StorageHost"], conf["StoragePort"]) == ("127.0.0.1", "3307")
    assert (conf["StorageUser"], conf["StoragePass"], conf["StorageLoc"]) == (
        USER, "secret", DATABASE,
    )  # fmt: skip
    assert conf["PluginDir"].startswith(str(tmp_path / "root"))


def test_the_slurm_user_gets_its_database_only() -> None:
    sql = grants("pw")
    assert f"GRANT ALL ON {DATABASE}.* TO '{USER}'@'127.0.0.1'" in sql
    assert "*.*" not in sql
