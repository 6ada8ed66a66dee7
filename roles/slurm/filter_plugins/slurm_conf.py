"""The slurm role's computed slurm.conf values, as filters vars/main.yml calls.

Each filter is a plain function of plain data: host names, a mapping of host to its variables
(Ansible's ``hostvars``, or a dict in the tests), and the role's settings; each returns lists,
dicts, strings and numbers. The role's templates only print what these return.

Ansible finds this file next to the role (``filter_plugins/``) when it runs the role, and through
``filter_plugins`` in the repository's ansible.cfg when a play loads the role's vars without it.
It runs under ansible-core 2.14 (Debian's, on the head) as well as the one ptc deploys with, so it
imports nothing from Ansible.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypedDict


class NodeSpec(TypedDict):
    """A compute node as its generated NodeName line describes it."""

    name: str
    address: str
    cpus: int
    sockets: int
    cores: int
    threads: int
    real_memory: int


class LargestNode(TypedDict, total=False):
    """The most CPUs and the most RealMemory of any node (each may be on another node)."""

    cpus: int
    memory_mb: int


def _int(value: Any) -> int:
    """``value | int`` as Jinja computes it: 0 for what is not a number."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def _value(value: Any) -> str:
    """A slurm.conf value as the role's templates print it: YES/NO for a boolean, nothing for
    null (Ansible's templates print None so, 2.14 and 2.19 alike), else the value's text."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return "" if value is None else str(value)


def slurm_address(host: str, hostvars: Mapping[str, Mapping[str, Any]], address_var: str) -> str:
    """A host's cluster-network address: its variable ``address_var``, else its ansible_host."""
    variables = hostvars[host]
    return str(variables[address_var] if address_var in variables else variables["ansible_host"])


def slurm_controller_entries(
    controllers: Iterable[str], hostvars: Mapping[str, Mapping[str, Any]], address_var: str
) -> list[str]:
    """SlurmctldHost's entries, ``name(address)`` for each controller, in the group's order."""
    return [f"{host}({slurm_address(host, hostvars, address_var)})" for host in controllers]


def slurm_real_memory(memtotal_mb: int, reserve_mb: int) -> int:
    """RealMemory: MemTotal less the reserve, but never less than half of MemTotal."""
    return max(memtotal_mb - reserve_mb, int(memtotal_mb / 2))


def slurm_node_specs(
    hosts: Iterable[str],
    hostvars: Mapping[str, Mapping[str, Any]],
    address_var: str,
    reserve_mb: int,
) -> list[NodeSpec]:
    """Each host as a compute node, from its address and hardware facts (``ansible_facts``:
    processor_vcpus, processor_count, _cores, _threads_per_core, memtotal_mb)."""
    nodes: list[NodeSpec] = []
    for host in hosts:
        facts = hostvars[host]["ansible_facts"]
        nodes.append(
            {
                "name": host,
                "address": slurm_address(host, hostvars, address_var),
                "cpus": _int(facts["processor_vcpus"]),
                "sockets": _int(facts["processor_count"]),
                "cores": _int(facts["processor_cores"]),
                "threads": _int(facts["processor_threads_per_core"]),
                "real_memory": slurm_real_memory(_int(facts["memtotal_mb"]), _int(reserve_mb)),
            }
        )
    return nodes


def slurm_node_lines(
    nodes: Iterable[NodeSpec],
    options: Mapping[str, Any],
    powered_down: Collection[str],
    features: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Each node's NodeName entry (what follows ``NodeName=``): its address, CPUs, the topology
    when sockets x cores x threads adds up to the CPUs, RealMemory, ``options`` in their order,
    its ``features`` (by node name), and State: CLOUD for a node power saving starts powered
    down, else UNKNOWN."""
    features = features or {}
    for name, words in features.items():
        if isinstance(words, str) or not all(
            isinstance(w, str) and w and all(c.isalnum() or c in "-_." for c in w) for w in words
        ):
            raise ValueError(
                f"slurm_node_features: {name}: {words!r} is not a list of words "
                "(letters, digits, dashes, dots, underscores)"
            )
    lines = []
    for node in nodes:
        words = [node["name"], f"NodeAddr={node['address']}", f"CPUs={node['cpus']}"]
        if node["sockets"] * node["cores"] * node["threads"] == node["cpus"]:
            words += [
                "Boards=1",
                f"SocketsPerBoard={node['sockets']}",
                f"CoresPerSocket={node['cores']}",
                f"ThreadsPerCore={node['threads']}",
            ]
        words.append(f"RealMemory={node['real_memory']}")
        words += [f"{key}={_value(value)}" for key, value in options.items()]
        if features.get(node["name"]):
            words.append(f"Features={','.join(features[node['name']])}")
        words.append(f"State={'CLOUD' if node['name'] in powered_down else 'UNKNOWN'}")
        lines.append(" ".join(words))
    return lines


def _word(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and all(c.isalnum() or c in "-_." for c in value)


def slurm_cloud_node_lines(cloud_nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The NodeName entries of nodes no inventory host stands for (a cloud site's instances,
    launched by their Slurm names at resume): each powered down (State=CLOUD) until Slurm resumes
    it, with its site as its feature and the CPUs and RealMemory its site says (left to Slurm's
    defaults when 0). No NodeAddr: the resume sets it to the instance's address."""
    lines = []
    for index, node in enumerate(cloud_nodes):
        where = f"slurm_cloud_nodes[{index}]"
        if not isinstance(node, Mapping):
            raise ValueError(f"{where}: not a mapping of name, site, cpus and memory_mb")
        if unknown := sorted(set(node) - {"name", "site", "cpus", "memory_mb"}):
            raise ValueError(f"{where}: {unknown[0]}: not known (name, site, cpus, memory_mb)")
        for key in ("name", "site"):
            if not _word(node.get(key)):
                raise ValueError(f"{where}: {key}: {node.get(key)!r} is not a word")
        words = [str(node["name"])]
        for key, setting in (("cpus", "CPUs"), ("memory_mb", "RealMemory")):
            value = node.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{where} ({node['name']}): {key}: {value!r} is not a count >= 0")
            if value:
                words.append(f"{setting}={value}")
        words += [f"Features={node['site']}", "State=CLOUD"]
        lines.append(" ".join(words))
    return lines


def slurm_ctld_parameters(base: str, cloud_nodes: Sequence[Any]) -> str:
    """SlurmctldParameters: ``base``, and with cloud nodes what they need: their address taken
    as they register (``cloud_reg_addrs``) and slurm.conf served to their slurmd
    (``enable_configless``)."""
    words = [w for w in base.split(",") if w]
    if cloud_nodes:
        words += [w for w in ("enable_configless", "cloud_reg_addrs") if w not in words]
    return ",".join(words)


def _sizes(
    nodes: Iterable[NodeSpec], cloud_nodes: Iterable[Mapping[str, Any]]
) -> list[tuple[int, int]]:
    """(CPUs, RealMemory) of the generated nodes and of the cloud nodes, a cloud node's as
    Slurm takes it: 1 CPU and 1 MiB where its site says nothing."""
    found = [(int(node["cpus"]), int(node["real_memory"])) for node in nodes]
    for node in cloud_nodes:
        found.append((_int(node.get("cpus", 0)) or 1, _int(node.get("memory_mb", 0)) or 1))
    return found


def slurm_def_mem_per_cpu(
    nodes: Iterable[NodeSpec], setting_mb: Any, cloud_nodes: Iterable[Mapping[str, Any]] = ()
) -> int:
    """DefMemPerCPU: ``setting_mb`` when it is more than 0, else the smallest RealMemory / CPUs
    of the nodes and the cloud nodes (a job using every core of any node may use all its
    memory; more, and a job that asks for no memory could never run on the smallest); 0
    (none) when it is not set and there are no nodes."""
    if _int(setting_mb) > 0:
        return _int(setting_mb)
    return min((memory // cpus for cpus, memory in _sizes(nodes, cloud_nodes)), default=0)


def slurm_largest_node(
    nodes: Sequence[NodeSpec], cloud_nodes: Iterable[Mapping[str, Any]] = ()
) -> LargestNode:
    """The most CPUs and the most RealMemory of the nodes and the cloud nodes; empty without
    either."""
    sizes = _sizes(nodes, cloud_nodes)
    if not sizes:
        return {}
    return {"cpus": max(c for c, _ in sizes), "memory_mb": max(m for _, m in sizes)}


def slurm_priority_config(
    priority_type: str,
    weights: Mapping[str, Any],
    decay_half_life: Any,
    max_age: Any,
    calc_period: Any,
) -> dict[str, Any]:
    """PriorityType, and for priority/multifactor its periods and a PriorityWeight<Key> for
    each weight."""
    config: dict[str, Any] = {"PriorityType": priority_type}
    if priority_type == "priority/multifactor":
        config |= {
            "PriorityDecayHalfLife": decay_half_life,
            "PriorityMaxAge": max_age,
            "PriorityCalcPeriod": calc_period,
        }
        config |= {f"PriorityWeight{key}": weight for key, weight in weights.items()}
    return config


def slurm_task_plugin(plugins: str, job_expansion: bool) -> str:
    """TaskPlugin: as set, or for job expansion without task/affinity (which refuses an expanded
    job's steps), task/none when nothing is left."""
    if not job_expansion:
        return plugins
    kept = [p.strip() for p in plugins.split(",") if p.strip() != "task/affinity"]
    return ",".join(kept) or "task/none"


class FilterModule:
    """The slurm role's filters."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            f.__name__: f
            for f in (
                slurm_address,
                slurm_controller_entries,
                slurm_node_specs,
                slurm_node_lines,
                slurm_cloud_node_lines,
                slurm_ctld_parameters,
                slurm_def_mem_per_cpu,
                slurm_largest_node,
                slurm_priority_config,
                slurm_task_plugin,
            )
        }
