"""The etcd role's PKI on the controller is made again only when what it is made from, or one of
its files, changed since the run that made it last. Run on this machine with ansible-playbook
(the member is localhost, whose server PKI directory is inside the test's directory): a first
run makes the keys and certificates and records them; a second skips every step of the making,
and so does a run on a copy of the directory (new times, same contents and modes); a file whose
mode changed, or a member with a new address, makes it again."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import local_playbook
from local_playbook import INTERPRETER, local_host

MAKING = "etcd : Generate the CA key once"  # the first step of the making


def run_pki(
    tmp_path: Path, address: str = "127.0.0.1", pki: str = "pki"
) -> dict[str, dict[str, Any]]:
    """Each task's result on the member (by task name) of a run of the role's pki.yml."""
    play = {
        "name": "PKI",
        "hosts": "configserver",
        "gather_facts": False,
        "tasks": [
            {
                "name": "PKI",
                "ansible.builtin.include_role": {"name": "etcd", "tasks_from": "pki"},
                "vars": {
                    "etcd_pki_dir": str(tmp_path / pki),
                    "__etcd_server_pki": str(tmp_path / "member-pki"),
                },
            },
        ],
    }
    member = local_host(etcd_member_address=address)
    group = {"configserver": {"hosts": {"member": member}}}
    inventory = {"all": {"children": group, "vars": {**INTERPRETER, "etcd_group": "configserver"}}}
    tasks = local_playbook.run(tmp_path, play, inventory)["plays"][0]["tasks"]
    return {t["task"]["name"]: t["hosts"].get("member", {}) for t in tasks}


def test_the_pki_is_made_once_and_again_only_when_its_inputs_or_files_change(
    tmp_path: Path,
) -> None:
    first = run_pki(tmp_path)
    assert first[MAKING]["changed"] is True
    record = tmp_path / "pki" / ".ptc-pki-record"
    assert record.is_file() and oct(record.stat().st_mode & 0o777) == "0o600"
    made = record.read_text()

    again = run_pki(tmp_path)
    assert MAKING not in again, "an unchanged PKI was made again"
    assert again["etcd : Make the controller's PKI"]["skipped"] is True
    assert record.read_text() == made

    (tmp_path / "pki" / "ca.key").chmod(0o640)
    drifted = run_pki(tmp_path)
    assert drifted[MAKING]["changed"] is True  # the key's mode is set back
    assert oct((tmp_path / "pki" / "ca.key").stat().st_mode & 0o777) == "0o600"
    assert MAKING not in run_pki(tmp_path)

    # A copy elsewhere (the head keeps one for runs started there) is the same PKI.
    shutil.copytree(tmp_path / "pki", tmp_path / "copy", copy_function=shutil.copy)
    assert MAKING not in run_pki(tmp_path, pki="copy")

    moved = run_pki(tmp_path, address="127.0.0.2")  # a new address in the member's SANs
    assert moved["etcd : Sign the member certificates"]["changed"] is True
    assert record.read_text() != made
