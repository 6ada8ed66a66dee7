"""The testbed's block of /etc/hosts, and replacing it on running nodes without touching Ansible's."""

from __future__ import annotations

from testbed_support import SLURM_PROFILE

from elastic.profile import rspec
from elastic.profile.render import render_profile
from elastic.profile.topology import Topology
from elastic.testbed.backends.local import etc_hosts
from elastic.testbed.backends.local.network import plan as wire_plan


def render(**params: str) -> Topology:
    return rspec.parse_request(render_profile(SLURM_PROFILE, params))


ANSIBLE_BLOCK = (
    "# BEGIN ptc cluster hosts (Ansible)\n10.10.1.1 head\n10.10.1.2 node-0\n"
    "# END ptc cluster hosts (Ansible)\n"
)


def test_hosts_block_names_every_node_by_lan_address() -> None:
    topology = render(computeNodeCount="2")
    block = etc_hosts.block(topology, wire_plan(topology))
    assert "10.10.1.1\thead-lan head\n" in block and "10.10.1.3\tnode-1-lan node-1\n" in block


def test_replacing_the_hosts_block_keeps_everything_else() -> None:
    small, big = render(computeNodeCount="1"), render(computeNodeCount="3")
    old = etc_hosts.block(small, wire_plan(small))
    new = etc_hosts.block(big, wire_plan(big))
    current = "127.0.0.1\tlocalhost\n\n" + old + ANSIBLE_BLOCK
    replaced = etc_hosts.replace_block(current, new)
    assert replaced == "127.0.0.1\tlocalhost\n\n" + new + ANSIBLE_BLOCK
    assert "node-2-lan node-2" in replaced and replaced.count("node-0-lan") == 1
    # Idempotent, so a second modify to the same size writes the same file.
    assert etc_hosts.replace_block(replaced, new) == replaced


def test_a_hosts_file_without_the_block_gets_it_appended() -> None:
    topology = render()
    block = etc_hosts.block(topology, wire_plan(topology))
    assert (
        etc_hosts.replace_block("127.0.0.1\tlocalhost", block) == "127.0.0.1\tlocalhost\n" + block
    )
