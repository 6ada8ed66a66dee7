"""The ptc_facts cache plugin: facts kept per experiment across runs, decoded once per run, and
the files the jsonfile plugin wrote before it still read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic.deploy import runner

REPO_ROOT = Path(__file__).resolve().parents[3]
PLUGINS = REPO_ROOT / "plugins" / "cache"


def plugin(directory: Path) -> Any:
    from ansible.plugins.loader import cache_loader

    cache_loader.add_directory(str(PLUGINS))
    return cache_loader.get("ptc_facts", _uri=str(directory))


def test_ansible_core_hands_it_out_unwrapped_so_a_read_returns_what_it_holds(
    tmp_path: Path,
) -> None:
    cache = plugin(tmp_path / "facts")
    facts = {"processor_vcpus": 2, "memtotal_mb": 1024, "distribution": "Debian"}
    cache.set("node-1", facts)
    # A persistent plugin is wrapped so that every read decodes JSON into a new dict.
    assert type(cache).__module__.endswith("ptc_facts")
    assert cache.get("node-1") is facts
    assert json.loads((tmp_path / "facts" / "node-1").read_text()) == facts
    assert plugin(tmp_path / "facts").get("node-1") == facts  # the next run reads the file
    with pytest.raises(KeyError):
        cache.get("node-2")


def test_a_host_without_a_file_of_its_own_gets_what_jsonfile_wrote(tmp_path: Path) -> None:
    facts = {"processor_vcpus": 4, "architecture": "x86_64"}
    (tmp_path / "s1_node-3").write_text(json.dumps({"__payload__": json.dumps(facts)}))
    (tmp_path / "s1_node-4").write_text("{not json")
    (tmp_path / "xs1_node-5").write_text(json.dumps({"__payload__": json.dumps(facts)}))
    cache = plugin(tmp_path)
    assert cache.get("node-3") == facts
    for unreadable in ("node-4", "node-5"):
        with pytest.raises(KeyError):
            cache.get(unreadable)
    cache.set("node-3", {"processor_vcpus": 8})
    assert plugin(tmp_path).get("node-3") == {"processor_vcpus": 8}  # its own file wins


def run(tmp_path: Path, plays: list[dict[str, Any]], *args: str, cache: str) -> str:
    (tmp_path / "site.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"vars": local, "hosts": {"a": {}, "b": {}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(
        os.environ,
        ANSIBLE_CACHE_PLUGINS=str(PLUGINS),
        ANSIBLE_GATHERING="smart",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
        ANSIBLE_NOCOLOR="1",
        **runner.fact_cache_environment(tmp_path / "facts"),
    )
    env["ANSIBLE_CACHE_PLUGIN"] = cache
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventory.yml"]
    done = subprocess.run(
        [*argv, *args, "site.yml"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


GATHER = {"hosts": "all", "gather_facts": True, "gather_subset": ["!all", "!min", "platform"]}
SHOW_B = {
    "hosts": "all",
    "gather_facts": True,
    "tasks": [
        {
            "ansible.builtin.debug": {
                "msg": "B-ARCH={{ hostvars['b']['ansible_facts']['architecture'] }}"
            }
        }
    ],
}


@pytest.mark.parametrize("first", ["ptc_facts", "jsonfile"])
def test_a_run_limited_to_one_host_finds_the_other_s_facts_from_an_earlier_run(
    tmp_path: Path, first: str
) -> None:
    run(tmp_path, [GATHER], cache=first)
    out = run(tmp_path, [SHOW_B], "--limit", "a", cache="ptc_facts")
    assert f"B-ARCH={os.uname().machine}" in out, out
    assert "Gathering Facts" not in out, out  # smart gathering found a's facts in the cache
