"""parse_request / parse_manifest / validate / write_manifest."""

from __future__ import annotations

import copy
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml import etree
from testbed_support import RECORDINGS

from elastic.errors import PtcError
from elastic.profile import namespaces, rspec
from elastic.profile.topology import (
    Blockstore,
    ExecuteService,
    InstallService,
    Interface,
    Link,
    LinkProperty,
    Login,
    Node,
    Topology,
)

RECONSTRUCTED = RECORDINGS / "reconstructed_cloudlab_utah_manifest.xml"


def lan_topology() -> Topology:
    nodes = [
        Node(
            client_id=name,
            interfaces=[Interface(f"{name}:if1", name, ip, "255.255.255.0")],
            execute=[ExecuteService("bash", f"startup.sh {name}")],
        )
        for name, ip in (("head", "10.10.1.1"), ("node-0", "10.10.1.2"), ("node-1", "10.10.1.3"))
    ]
    return Topology(nodes, [Link("lan", [f"{n.client_id}:if1" for n in nodes])], {"n": "2"})


# --- parsing the reconstructed CloudLab manifest ------------------------------------------------


def test_reconstructed_cloudlab_manifest_parses() -> None:
    t = rspec.parse_manifest(RECONSTRUCTED.read_bytes())
    rspec.validate(t)
    head = t.node("head")
    assert head.component_id == "urn:publicid:IDN+utah.cloudlab.us+node+ms1041"
    assert head.sliver_id == "urn:publicid:IDN+utah.cloudlab.us+sliver+1808166"
    assert head.sliver_type == "raw-pc"
    assert head.hardware_type == "m510"
    assert head.login == Login("ms1041.utah.cloudlab.us", 22, "alice")  # first of the logins
    assert [(i.client_id, i.ip) for i in t.node("node-1").interfaces] == [
        ("node-1:if1", "10.10.1.3")
    ]
    assert t.links[0].interface_refs == ["head:if1", "node-0:if1", "node-1:if1"]
    assert "slurm_controller,slurm_dbd,nfs_server,config_server" in head.execute[0].command


def test_manifest_parameters_come_from_element_text() -> None:
    t = rspec.parse_manifest(RECONSTRUCTED.read_bytes())
    assert t.parameters["computeNodeCount"] == "2"
    assert t.parameters["hardwareType"] == "m510"
    assert t.parameters["iacRepo"] == ""
    assert t.parameters["computeRoles"] == "slurm_compute,nfs_client"


def test_prefer_user_picks_that_login() -> None:
    t = rspec.parse_manifest(RECONSTRUCTED.read_bytes(), prefer_user="bob")
    assert {n.login.username for n in t.nodes if n.login} == {"bob"}


def test_reconstructed_manifest_round_trips() -> None:
    t = rspec.parse_manifest(RECONSTRUCTED.read_bytes())
    assert rspec.parse_manifest(rspec.write_manifest(t)) == t


def test_parse_rejects_garbage_and_wrong_roots() -> None:
    with pytest.raises(PtcError, match="well-formed"):
        rspec.parse_request(b"<rspec")
    with pytest.raises(PtcError, match="root element"):
        rspec.parse_request(b"<foo/>")
    with pytest.raises(PtcError, match="expected a request"):
        rspec.parse_request(RECONSTRUCTED.read_bytes())


def test_node_without_client_id_names_the_line() -> None:
    xml = b'<rspec xmlns="http://www.geni.net/resources/rspec/3" type="request">\n<node/></rspec>'
    with pytest.raises(PtcError, match=r"<node> \(line 2\) has no 'client_id'"):
        rspec.parse_request(xml)


# --- write_manifest: CloudLab's form -------------------------------------------------------


def test_write_manifest_has_cloudlab_shape() -> None:
    t = lan_topology()
    for i, node in enumerate(t.nodes):
        node.login = Login("127.0.0.1", 2200 + i, "root")
        node.component_id = f"urn:publicid:IDN+ptc.local+node+{node.client_id}"
        node.sliver_id = f"urn:publicid:IDN+ptc.local+sliver+{i}"
    root = etree.fromstring(rspec.write_manifest(t))
    ns = {"g": namespaces.GENI_NS, "p": namespaces.PARAMS_NS}
    assert root.get("type") == "manifest"
    (node,) = root.xpath("g:node[@client_id='node-0']", namespaces=ns)
    assert node.get("component_id") == "urn:publicid:IDN+ptc.local+node+node-0"
    assert node.get("sliver_id") == "urn:publicid:IDN+ptc.local+sliver+1"
    (login,) = node.xpath("g:services/g:login", namespaces=ns)
    assert dict(login.attrib) == {
        "authentication": "ssh-keys",
        "hostname": "127.0.0.1",
        "port": "2201",
        "username": "root",
    }
    (ip,) = node.xpath("g:interface/g:ip", namespaces=ns)
    assert dict(ip.attrib) == {"address": "10.10.1.2", "netmask": "255.255.255.0", "type": "ipv4"}
    assert node.xpath("g:services/g:execute/@command", namespaces=ns) == ["startup.sh node-0"]
    (item,) = root.xpath("p:data_set/p:data_item", namespaces=ns)
    assert (item.get("name"), item.text) == ("emulab.net.parameter.n", "2")
    refs = root.xpath("g:link[@client_id='lan']/g:interface_ref/@client_id", namespaces=ns)
    assert refs == ["head:if1", "node-0:if1", "node-1:if1"]


def test_rich_topology_round_trips() -> None:
    t = lan_topology()
    t.nodes[0].blockstores.append(Blockstore("bs", "/exports", 20.0))
    t.nodes[0].install.append(InstallService("https://x/y.tgz", "/local"))
    t.nodes[0].hardware_type = "m510"
    t.nodes[0].disk_image = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
    t.nodes[0].component_manager_id = "urn:publicid:IDN+utah.cloudlab.us+authority+cm"
    t.nodes[1].login = Login("pc1.example", 22, "alice")
    t.links[0] = Link.shaped("lan", t.links[0].interface_refs, "lan", 100000)
    for name, ip in (("node-0", "10.10.2.1"), ("node-1", "10.10.2.2")):
        t.node(name).interfaces.append(Interface(f"{name}:if2", name, ip, "255.255.255.252"))
    t.links.append(Link.shaped("p2p", ["node-0:if2", "node-1:if2"], "link", 5000, 2.5, 0.01))
    rspec.validate(t)
    assert rspec.parse_manifest(rspec.write_manifest(t)) == t


names = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)


@given(
    count=st.integers(min_value=1, max_value=12),
    params=st.dictionaries(
        names,
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20),
        max_size=5,
    ),
    port=st.integers(min_value=1, max_value=65535),
    bandwidth=st.one_of(st.none(), st.integers(min_value=1, max_value=10**8)),
    latency=st.one_of(st.none(), st.floats(min_value=0, max_value=1000, allow_nan=False)),
    loss=st.one_of(st.none(), st.floats(min_value=0, max_value=0.99, allow_nan=False)),
)
def test_round_trip_property(
    count: int,
    params: dict[str, str],
    port: int,
    bandwidth: int | None,
    latency: float | None,
    loss: float | None,
) -> None:
    nodes = [
        Node(
            client_id=f"n{i}",
            interfaces=[
                Interface(f"n{i}:if0", f"n{i}", f"10.0.{i // 200}.{i % 200 + 1}", "255.255.0.0")
            ],
            login=Login(f"host{i}.example", port, "root"),
        )
        for i in range(count)
    ]
    refs = [f"n{i}:if0" for i in range(count)]
    t = Topology(nodes, [Link.shaped("lan", refs, "lan", bandwidth, latency, loss)], params)
    rspec.validate(t)
    assert rspec.parse_manifest(rspec.write_manifest(t)) == t


# --- validation failures name the culprit --------------------------------------------------


def test_valid_topology_passes() -> None:
    rspec.validate(lan_topology())


def test_duplicate_node_client_id() -> None:
    t = lan_topology()
    t.nodes.append(copy.deepcopy(t.nodes[1]))
    t.nodes[-1].interfaces = []
    with pytest.raises(PtcError, match="duplicate node client_id 'node-0'"):
        rspec.validate(t)


def test_duplicate_link_client_id() -> None:
    t = lan_topology()
    t.links.append(Link("lan", ["head:if1"]))
    with pytest.raises(PtcError, match="duplicate link client_id 'lan'"):
        rspec.validate(t)


def test_dangling_interface_ref() -> None:
    t = lan_topology()
    t.links[0].interface_refs.append("node-9:if1")
    with pytest.raises(PtcError, match="link 'lan' refers to interface 'node-9:if1'"):
        rspec.validate(t)


def test_duplicate_address() -> None:
    t = lan_topology()
    t.nodes[2].interfaces[0] = Interface("node-1:if1", "node-1", "10.10.1.2", "255.255.255.0")
    with pytest.raises(PtcError) as info:
        rspec.validate(t)
    assert "duplicate address 10.10.1.2" in str(info.value)
    assert "node-1" in str(info.value)


def test_address_outside_subnet() -> None:
    t = lan_topology()
    t.nodes[2].interfaces[0] = Interface("node-1:if1", "node-1", "10.10.2.3", "255.255.255.0")
    with pytest.raises(PtcError) as info:
        rspec.validate(t)
    msg = str(info.value)
    assert "link 'lan'" in msg
    assert "node 'node-1'" in msg
    assert "outside the link's subnet 10.10.1.0/24" in msg


def test_mismatched_netmask_on_a_link() -> None:
    t = lan_topology()
    t.nodes[1].interfaces[0] = Interface("node-0:if1", "node-0", "10.10.1.2", "255.255.0.0")
    with pytest.raises(PtcError, match="link 'lan': interface 'node-0:if1' of node 'node-0'"):
        rspec.validate(t)


def test_network_address_is_rejected() -> None:
    t = lan_topology()
    t.nodes[1].interfaces[0] = Interface("node-0:if1", "node-0", "10.10.1.0", "255.255.255.0")
    with pytest.raises(PtcError, match=r"'node-0:if1' of node 'node-0'.*network or broadcast"):
        rspec.validate(t)


def test_bad_address_is_named() -> None:
    t = lan_topology()
    t.nodes[1].interfaces[0] = Interface("node-0:if1", "node-0", "10.10.1.300", "255.255.255.0")
    with pytest.raises(PtcError, match="node 'node-0': bad address"):
        rspec.validate(t)


def test_interface_on_two_links() -> None:
    t = lan_topology()
    t.links.append(Link("other", ["head:if1"]))
    with pytest.raises(PtcError, match=r"'head:if1' .* on link 'lan' and on link 'other'"):
        rspec.validate(t)


# --- per-interface link properties ---------------------------------------------------------

PORTAL = RECORDINGS / "genilib_portal"


def test_per_interface_properties_survive_parsing_and_rewriting() -> None:
    # Recorded from the portal-line geni-lib: a link shaped differently in each direction.
    t = rspec.parse_request((PORTAL / "recorded_shaped_pair_link.xml").read_bytes())
    (link,) = t.links
    assert sorted(
        (p.source_id, p.dest_id, p.capacity_kbps, p.latency_ms, p.packet_loss)
        for p in link.properties
    ) == [
        ("a:if0", "b:if0", 20000, 5.0, 0.01),
        ("b:if0", "a:if0", 50000, 20.0, None),
    ]
    again = rspec.parse_manifest(rspec.write_manifest(t))
    assert again.links == t.links


def test_lan_member_properties_point_at_the_lan() -> None:
    t = rspec.parse_request((PORTAL / "recorded_shaped_pair_lan.xml").read_bytes())
    (link,) = t.links
    assert {(p.source_id, p.dest_id, p.latency_ms) for p in link.properties} == {
        ("a:if0", "shaped", 7.5),
        ("b:if0", "shaped", 5.0),
    }
    assert [p.dest_id for p in link.properties_from("b:if0")] == ["shaped"]
    assert link.properties_to("a:if0") == []


def test_writing_adds_no_property_the_request_did_not_have() -> None:
    t = lan_topology()
    t.links[0].properties = [LinkProperty("head:if1", "lan", capacity_kbps=1000)]
    root = etree.fromstring(rspec.write_manifest(t))
    props = root.findall(f"{{{namespaces.GENI_NS}}}link/{{{namespaces.GENI_NS}}}property")
    assert [(p.get("source_id"), p.get("dest_id"), p.get("capacity")) for p in props] == [
        ("head:if1", "lan", "1000")
    ]
    assert props[0].get("latency") is None


@pytest.mark.parametrize(
    ("prop", "fragment"),
    [
        (LinkProperty("ghost:if0", "lan", 10), "source 'ghost:if0' is not on the link"),
        (LinkProperty("head:if1", "elsewhere", 10), "'elsewhere' is neither on the link"),
        (LinkProperty("head:if1", "lan", latency_ms=-1), "latency -1 ms is negative"),
        (LinkProperty("head:if1", "lan", packet_loss=1.5), "packet_loss 1.5"),
    ],
)
def test_bad_properties_are_named(prop: LinkProperty, fragment: str) -> None:
    t = lan_topology()
    t.links[0].properties = [prop]
    with pytest.raises(PtcError, match=re.escape(fragment)):
        rspec.validate(t)


def test_property_numbers_must_be_numbers() -> None:
    xml = (PORTAL / "recorded_shaped_pair_link.xml").read_bytes().replace(b'"20.0"', b'"fast"')
    with pytest.raises(PtcError, match="latency 'fast' is not a number"):
        rspec.parse_request(xml)


def test_size_zero_blockstore_is_all_free_space_and_remote_needs_a_dataset() -> None:
    t = lan_topology()
    t.nodes[0].blockstores.append(Blockstore("all", "/data", 0.0))
    assert rspec.parse_manifest(rspec.write_manifest(t)).nodes[0].blockstores[0].size_gb == 0.0
    t.nodes[1].blockstores.append(Blockstore("ds", "/ds", None, remote=True))
    with pytest.raises(PtcError, match="remote blockstore 'ds' names no dataset"):
        rspec.validate(t)
    t.nodes[1].blockstores[0] = Blockstore("ds", "/ds", None, True, "urn:publicid:IDN+x+ds")
    rspec.validate(t)


def test_portal_extensions_become_features() -> None:
    t = rspec.parse_request((PORTAL / "recorded_portal_extensions_defaults.xml").read_bytes())
    assert t.node("head").features == ["vnc", "root-keys", "ansible-role:web"]
    assert t.node("worker").features == ["root-keys"]
    assert t.node("box").sliver_type == "emulab-docker"
    assert t.links[0].features == ["jumbo-frames", "shared-vlan:ptc-shared"]
    assert t.features == ["disable-root-keys", "ansible-role:web"]
    assert rspec.parse_manifest(rspec.write_manifest(t)).node("head").features == [
        "vnc",
        "root-keys",
        "ansible-role:web",
    ]


def test_struct_and_list_parameters_read_back_as_json() -> None:
    t = rspec.parse_request((PORTAL / "recorded_portal_params_custom.xml").read_bytes())
    assert json.loads(t.parameters["lan"]) == {"bandwidth": "500.0", "jumbo": "True"}
    assert json.loads(t.parameters["tags"]) == ["a", "b"]
    assert [n["name"] for n in json.loads(t.parameters["nodes"])] == ["x", "y", "z"]
