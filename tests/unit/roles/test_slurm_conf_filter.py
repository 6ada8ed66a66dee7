"""The slurm role's filter plugin (roles/slurm/filter_plugins/slurm_conf.py): slurm.conf's computed
values from hand-made hosts and settings, without Ansible. tests/unit/deploy/test_slurm_templates.py
renders them through Ansible."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from elastic.paths import REPO_ROOT

PLUGIN = REPO_ROOT / "roles" / "slurm" / "filter_plugins" / "slurm_conf.py"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("slurm_conf_filter", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and TypedDicts look their module up
    spec.loader.exec_module(module)
    return module


sc = _load(PLUGIN)


def facts(vcpus: Any, sockets: Any, cores: Any, threads: Any, mem: Any) -> dict[str, Any]:
    return {
        "processor_vcpus": vcpus,
        "processor_count": sockets,
        "processor_cores": cores,
        "processor_threads_per_core": threads,
        "memtotal_mb": mem,
    }


HOSTVARS: dict[str, dict[str, Any]] = {
    "head": {"ptc_lan_address": "10.10.1.1", "ansible_host": "192.0.2.1"},
    "head2": {"ansible_host": "192.0.2.9"},
    "big": {"ptc_lan_address": "10.10.1.4", "ansible_facts": facts(64, 2, 16, 2, 257000)},
    "odd": {"ptc_lan_address": "10.10.1.5", "ansible_facts": facts(6, 1, 4, 2, 1500)},
    "small": {"ansible_host": "192.0.2.20", "ansible_facts": facts(2, 1, 2, 1, 3900)},
    # Facts that arrive as text (a fact cache written by another tool) count as numbers.
    "text": {"ptc_lan_address": "10.10.1.7", "ansible_facts": facts("3", "1", "3", "1", "4096")},
}


def nodes(*names: str, reserve: int = 1024) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = sc.slurm_node_specs(
        list(names), HOSTVARS, "ptc_lan_address", reserve
    )
    return found


def test_every_filter_is_registered_under_its_function_s_name() -> None:
    filters = sc.FilterModule().filters()
    assert filters["slurm_node_specs"] is sc.slurm_node_specs
    assert set(filters) == {
        "slurm_address",
        "slurm_controller_entries",
        "slurm_node_specs",
        "slurm_node_lines",
        "slurm_cloud_node_lines",
        "slurm_ctld_parameters",
        "slurm_def_mem_per_cpu",
        "slurm_largest_node",
        "slurm_priority_config",
        "slurm_task_plugin",
    }


def test_address_is_the_address_variable_else_ansible_host() -> None:
    assert sc.slurm_address("head", HOSTVARS, "ptc_lan_address") == "10.10.1.1"
    assert sc.slurm_address("head2", HOSTVARS, "ptc_lan_address") == "192.0.2.9"
    assert sc.slurm_address("head", HOSTVARS, "other") == "192.0.2.1"
    # A host with neither is an error, as in the template it replaces.
    with pytest.raises(KeyError):
        sc.slurm_address("big", HOSTVARS, "other")


def test_controller_entries_keep_the_group_s_order() -> None:
    entries = sc.slurm_controller_entries(["head2", "head"], HOSTVARS, "ptc_lan_address")
    assert entries == ["head2(192.0.2.9)", "head(10.10.1.1)"]
    assert sc.slurm_controller_entries([], HOSTVARS, "ptc_lan_address") == []


def test_nodes_from_facts() -> None:
    big, odd, small, text = nodes("big", "odd", "small", "text")
    assert big == {
        "name": "big",
        "address": "10.10.1.4",
        "cpus": 64,
        "sockets": 2,
        "cores": 16,
        "threads": 2,
        "real_memory": 257000 - 1024,
    }
    assert small["address"] == "192.0.2.20"
    assert (text["cpus"], text["sockets"], text["real_memory"]) == (3, 1, 4096 - 1024)
    # The reserve never takes more than half of MemTotal.
    assert odd["real_memory"] == 750


@pytest.mark.parametrize(
    ("memtotal", "reserve", "real"),
    [(8000, 1024, 6976), (2048, 1024, 1024), (2047, 1024, 1023), (1500, 1024, 750), (1, 1024, 0)],
)
def test_real_memory_floor_is_half_of_memtotal(memtotal: int, reserve: int, real: int) -> None:
    assert sc.slurm_real_memory(memtotal, reserve) == real


def test_node_lines() -> None:
    lines = sc.slurm_node_lines(nodes("big", "odd", "small"), {}, ["small"])
    assert lines == [
        "big NodeAddr=10.10.1.4 CPUs=64 Boards=1 SocketsPerBoard=2 CoresPerSocket=16"
        " ThreadsPerCore=2 RealMemory=255976 State=UNKNOWN",
        # 1 x 4 x 2 is not 6 CPUs: no topology, Slurm counts CPUs only.
        "odd NodeAddr=10.10.1.5 CPUs=6 RealMemory=750 State=UNKNOWN",
        "small NodeAddr=192.0.2.20 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2"
        " ThreadsPerCore=1 RealMemory=2876 State=CLOUD",
    ]


def test_node_options_follow_real_memory_in_their_order() -> None:
    options = {"Feature": "avx2", "Weight": 5, "Hidden": True, "Gone": False, "Nil": None}
    (line,) = sc.slurm_node_lines(nodes("odd"), options, [])
    assert line.endswith(
        "RealMemory=750 Feature=avx2 Weight=5 Hidden=YES Gone=NO Nil= State=UNKNOWN"
    ), line


def test_a_node_s_features_come_before_its_state() -> None:
    big, small = sc.slurm_node_lines(nodes("big", "small"), {}, ["small"], {"small": ["cloud"]})
    assert "Features" not in big
    assert small.endswith(" Features=cloud State=CLOUD")


@pytest.mark.parametrize("words", ["cloud", ["two words"], [""], [3]])
def test_features_that_are_not_words_are_refused_naming_the_node(words: Any) -> None:
    with pytest.raises(ValueError, match="slurm_node_features: small: "):
        sc.slurm_node_lines(nodes("small"), {}, [], {"small": words})


def test_no_compute_nodes() -> None:
    assert nodes() == []
    assert sc.slurm_node_lines([], {"Feature": "x"}, []) == []
    assert sc.slurm_def_mem_per_cpu([], 0) == 0
    assert sc.slurm_largest_node([]) == {}


def test_def_mem_per_cpu_is_the_smallest_real_memory_per_cpu() -> None:
    # big: 255976 / 64 = 3999.6; odd: 750 / 6 = 125; small: 2876 / 2 = 1438.
    assert sc.slurm_def_mem_per_cpu(nodes("big"), 0) == 3999
    assert sc.slurm_def_mem_per_cpu(nodes("big", "small"), 0) == 1438
    assert sc.slurm_def_mem_per_cpu(nodes("big", "odd", "small"), 0) == 125


@pytest.mark.parametrize(("setting", "value"), [(512, 512), ("300", 300), ("0", 125), (-5, 125)])
def test_def_mem_per_cpu_as_set_when_positive(setting: Any, value: int) -> None:
    assert sc.slurm_def_mem_per_cpu(nodes("big", "odd"), setting) == value


def test_cloud_nodes_count_towards_def_mem_per_cpu_and_the_largest_node() -> None:
    """An instance of a cloud site smaller than every compute node: a DefMemPerCPU from the
    compute nodes alone would refuse every job that asks for no memory on it."""
    small = [{"name": "ec2-0", "site": "cloud", "cpus": 2, "memory_mb": 1000}]
    assert sc.slurm_def_mem_per_cpu(nodes("big"), 0, small) == 500
    assert sc.slurm_def_mem_per_cpu([], 0, small) == 500
    # Slurm's own defaults for a cloud node of no given size: 1 CPU, 1 MiB
    assert sc.slurm_def_mem_per_cpu(nodes("big"), 0, [{"name": "x", "site": "s"}]) == 1
    assert sc.slurm_def_mem_per_cpu(nodes("big"), 256, small) == 256
    large = [{"name": "ec2-1", "site": "cloud", "cpus": 128, "memory_mb": 9000}]
    assert sc.slurm_largest_node(nodes("small"), large) == {"cpus": 128, "memory_mb": 9000}
    assert sc.slurm_largest_node([], small) == {"cpus": 2, "memory_mb": 1000}


def test_def_mem_per_cpu_as_set_without_nodes() -> None:
    assert sc.slurm_def_mem_per_cpu([], 256) == 256


def test_largest_node_takes_each_maximum_on_its_own() -> None:
    many_cpus = {**HOSTVARS["big"], "ansible_facts": facts(96, 2, 24, 2, 4000)}
    much_memory = {"ptc_lan_address": "x", "ansible_facts": facts(2, 1, 2, 1, 512000)}
    hostvars = {"a": many_cpus, "b": much_memory}
    found = sc.slurm_node_specs(["a", "b"], hostvars, "ptc_lan_address", 1024)
    assert sc.slurm_largest_node(found) == {"cpus": 96, "memory_mb": 512000 - 1024}


def test_multifactor_priority_gets_its_periods_and_a_weight_per_key() -> None:
    config = sc.slurm_priority_config(
        "priority/multifactor", {"Fairshare": 10000, "QOS": "7"}, "7-0", "1-0", 5
    )
    assert config == {
        "PriorityType": "priority/multifactor",
        "PriorityDecayHalfLife": "7-0",
        "PriorityMaxAge": "1-0",
        "PriorityCalcPeriod": 5,
        "PriorityWeightFairshare": 10000,
        "PriorityWeightQOS": "7",
    }
    no_weights = sc.slurm_priority_config("priority/multifactor", {}, "7-0", "7-0", 5)
    assert not any(key.startswith("PriorityWeight") for key in no_weights)


def test_other_priority_types_get_the_type_alone() -> None:
    config = sc.slurm_priority_config("priority/basic", {"Fairshare": 1}, "7-0", "7-0", 5)
    assert config == {"PriorityType": "priority/basic"}


@pytest.mark.parametrize(
    ("plugins", "expansion", "result"),
    [
        ("task/cgroup,task/affinity", False, "task/cgroup,task/affinity"),
        ("task/affinity", False, "task/affinity"),
        ("task/cgroup,task/affinity", True, "task/cgroup"),
        ("task/affinity, task/cgroup", True, "task/cgroup"),
        ("task/affinity", True, "task/none"),
        ("task/cgroup", True, "task/cgroup"),
    ],
)
def test_task_plugin(plugins: str, expansion: bool, result: str) -> None:
    assert sc.slurm_task_plugin(plugins, expansion) == result


def test_cloud_nodes_are_powered_down_lines_with_their_site_and_size_and_no_address() -> None:
    lines = sc.slurm_cloud_node_lines(
        [
            {"name": "ec2-0", "site": "cloud", "cpus": 2, "memory_mb": 3800},
            {"name": "ec2-1", "site": "cloud", "cpus": 0, "memory_mb": 0},
        ]
    )
    assert lines == [
        "ec2-0 CPUs=2 RealMemory=3800 Features=cloud State=CLOUD",
        "ec2-1 Features=cloud State=CLOUD",
    ]


@pytest.mark.parametrize(
    ("node", "why"),
    [
        ({"name": "ec2 0", "site": "cloud"}, r"slurm_cloud_nodes\[0\]: name: 'ec2 0'"),
        ({"name": "ec2-0", "site": ""}, r"slurm_cloud_nodes\[0\]: site: ''"),
        ({"name": "ec2-0", "site": "c", "cpus": -1}, r"\(ec2-0\): cpus: -1"),
        ({"name": "ec2-0", "site": "c", "memory_mb": "4G"}, r"\(ec2-0\): memory_mb: '4G'"),
        ({"name": "ec2-0", "site": "c", "gpus": 1}, r"gpus: not known"),
        ("ec2-0", r"not a mapping"),
    ],
)
def test_a_bad_cloud_node_is_refused_naming_it(node: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        sc.slurm_cloud_node_lines([node])


def test_cloud_nodes_add_what_they_need_to_slurmctld_s_parameters_once() -> None:
    assert sc.slurm_ctld_parameters("enable_configless", []) == "enable_configless"
    one = [{"name": "ec2-0"}]
    assert sc.slurm_ctld_parameters("enable_configless", one) == "enable_configless,cloud_reg_addrs"
    assert sc.slurm_ctld_parameters("", one) == "enable_configless,cloud_reg_addrs"
