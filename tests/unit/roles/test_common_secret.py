"""The common role's secret entry point (the munge key, the JWT key and the accounting database
password): generated once on its holder, read back for the caller, restored from a value kept elsewhere,
recorded by name on the holder; a second run changes nothing. Run on this machine with
ansible-playbook (the holder is localhost; the files live in a temporary directory)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import local_playbook
from local_playbook import INTERPRETER, local_host


def run_role(tmp_path: Path, **params: object) -> dict[str, Any]:
    play = {
        "name": "Secret",
        "hosts": "holder",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Secret",
                "ansible.builtin.include_role": {"name": "common", "tasks_from": "secret"},
                "vars": params,
            },
            {
                "name": "Show",
                "ansible.builtin.debug": {
                    "msg": {
                        "content": "{{ common_secret_slurp['content'] | b64decode }}",
                        "files": "{{ common_secret_files }}",
                    }
                },
            },
        ],
    }
    inventory = {"all": {"hosts": {"holder": local_host()}, "vars": INTERPRETER}}
    out = local_playbook.run(tmp_path, play, inventory)
    tasks = out["plays"][-1]["tasks"]
    return {
        "shown": tasks[-1]["hosts"]["holder"]["msg"],
        "changed": out["stats"]["holder"]["changed"],
    }


def test_generated_once_read_back_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "jwt.key"
    first = run_role(tmp_path, common_secret_holder="holder", common_secret_path=str(path))
    content = path.read_text()
    assert len(base64.b64decode(content)) == 48
    assert first["shown"] == {"content": content, "files": {"jwt.key": str(path)}}
    assert first["changed"] > 0
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    again = run_role(tmp_path, common_secret_holder="holder", common_secret_path=str(path))
    assert again["changed"] == 0 and path.read_text() == content


def test_alphanumeric_and_named(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "password"
    shown = run_role(
        tmp_path,
        common_secret_holder="holder",
        common_secret_path=str(path),
        common_secret_random_bytes=96,
        common_secret_alphanumeric=40,
        common_secret_name="db",
    )["shown"]
    assert len(shown["content"]) == 40 and shown["content"].isalnum()
    assert shown["files"] == {"db": str(path)}


def test_a_value_kept_elsewhere_is_restored(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "munge.key"
    params = {"common_secret_holder": "holder", "common_secret_path": str(path)}
    run_role(tmp_path, **params)
    shown = run_role(tmp_path, **params, common_secret_value="a2VwdA==")["shown"]
    assert path.read_text() == "a2VwdA==" and shown["content"] == "a2VwdA=="
