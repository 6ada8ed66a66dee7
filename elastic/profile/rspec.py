"""GENI v3 RSpecs (request and manifest, CloudLab's dialect) <-> ``Topology``.

Only the parts ptc uses are modelled: nodes (sliver type, image, hardware type, interfaces with
IPv4 addresses, execute/install/login services, emulab blockstores), links/LANs (members, and
each ``<property>`` as written: capacity, latency and packet loss per source and destination),
the profile parameters the portal records in the ``data_set`` extension (struct and list
values as JSON text), and the portal extensions a testbed may not provide (VNC, root keys,
shared VLANs, jumbo frames, Ansible roles) as feature names. Everything else in an RSpec is
ignored on parse. ``write_manifest`` emits what CloudLab's
aggregate returns (``type="manifest"``, ``component_id``/``sliver_id``, ``<login>``), so the
local testbed and CloudLab hand the same shape downstream.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable

from lxml import etree

from elastic.errors import InputError
from elastic.profile.namespaces import (
    ANSIBLE_NS,
    EMULAB_NS,
    GENI_MANIFEST_XSD,
    GENI_NS,
    PARAM_PREFIX,
    PARAMS_NS,
    SHARED_VLAN_NS,
    XSI_NS,
)
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

_G = f"{{{GENI_NS}}}"
_E = f"{{{EMULAB_NS}}}"
_P = f"{{{PARAMS_NS}}}"
_S = f"{{{SHARED_VLAN_NS}}}"
_A = f"{{{ANSIBLE_NS}}}"
_SIZE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]i?B)?\s*$", re.I)
_SIZE_TO_GB = {"KB": 1e-6, "MB": 1e-3, "GB": 1.0, "TB": 1e3}


# --- parsing -------------------------------------------------------------------------------


def parse_request(xml: bytes) -> Topology:
    """A request RSpec (what a profile renders) as a Topology."""
    return _parse(xml, expect="request", prefer_user=None)


def parse_manifest(xml: bytes, prefer_user: str | None = None) -> Topology:
    """A manifest RSpec (what the testbed returned) as a Topology.

    CloudLab lists one ``<login>`` per project member; ``prefer_user`` picks that user's,
    otherwise the first one is used.
    """
    return _parse(xml, expect="manifest", prefer_user=prefer_user)


def _parse(xml: bytes, expect: str, prefer_user: str | None) -> Topology:
    root = _root(xml, expect)
    nodes = [_parse_node(el, prefer_user) for el in root.iterchildren(f"{_G}node")]
    links = [_parse_link(el) for el in root.iterchildren(f"{_G}link")]
    features = []
    if root.find(f"{_E}disablerootkey") is not None:
        features.append("disable-root-keys")
    features += [f"ansible-role:{r.get('name', '')}" for r in root.iterchildren(f"{_A}role")]
    return Topology(nodes=nodes, links=links, parameters=_parse_parameters(root), features=features)


def _root(xml: bytes, expect: str) -> etree._Element:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, remove_blank_text=True)
    try:
        root = etree.fromstring(xml, parser)
    except etree.XMLSyntaxError as err:
        raise InputError(f"{expect} RSpec is not well-formed XML: {err}") from err
    if root.tag != f"{_G}rspec":
        raise InputError(
            f"{expect} RSpec: root element is {root.tag!r}, expected <rspec> in {GENI_NS}"
        )
    kind = root.get("type")
    # The portal's "download manifest" keeps type="request" on a manifest; accept both there.
    if expect == "request" and kind != "request":
        raise InputError(f"RSpec has type={kind!r}; expected a request RSpec")
    if expect == "manifest" and kind not in ("manifest", "request"):
        raise InputError(f"RSpec has type={kind!r}; expected a manifest RSpec")
    return root


def _required(el: etree._Element, attr: str, what: str) -> str:
    value = el.get(attr)
    if not value:
        line = f" (line {el.sourceline})" if el.sourceline else ""
        raise InputError(f"{what}{line} has no {attr!r} attribute")
    return value


def _parse_node(el: etree._Element, prefer_user: str | None) -> Node:
    client_id = _required(el, "client_id", "<node>")
    sliver_type = "raw-pc"
    disk_image = None
    st = el.find(f"{_G}sliver_type")
    if st is not None:
        sliver_type = st.get("name") or sliver_type
        di = st.find(f"{_G}disk_image")
        if di is not None:
            disk_image = di.get("name")
    hw = el.find(f"{_G}hardware_type")
    hardware_type = hw.get("name") if hw is not None else None
    node = Node(
        client_id=client_id,
        sliver_type=sliver_type,
        hardware_type=hardware_type,
        disk_image=disk_image,
        component_manager_id=el.get("component_manager_id"),
        component_id=el.get("component_id"),
        sliver_id=el.get("sliver_id"),
    )
    for iel in el.iterchildren(f"{_G}interface"):
        node.interfaces.append(_parse_interface(iel, client_id))
    for bel in el.iterchildren(f"{_E}blockstore"):
        node.blockstores.append(_parse_blockstore(bel, client_id))
    services = el.find(f"{_G}services")
    if services is not None:
        _parse_services(services, node, prefer_user)
    if el.find(f"{_E}x11vnc") is not None:
        node.features.append("vnc")
    if el.find(f"{_E}rootkey") is not None:
        node.features.append("root-keys")
    node.features += [
        f"ansible-role:{b.get('role', '')}" for b in el.iterchildren(f"{_A}role_binding")
    ]
    return node


def _parse_interface(el: etree._Element, node: str) -> Interface:
    client_id = _required(el, "client_id", f"<interface> of node {node!r}")
    ip = el.find(f"{_G}ip")
    if ip is None:
        return Interface(client_id=client_id, node=node)
    return Interface(client_id, node, ip=ip.get("address"), netmask=ip.get("netmask"))


def _parse_blockstore(el: etree._Element, node: str) -> Blockstore:
    name = _required(el, "name", f"<emulab:blockstore> of node {node!r}")
    size = el.get("size")
    return Blockstore(
        name=name,
        mount=el.get("mountpoint"),
        size_gb=_size_gb(size, f"blockstore {name!r} of node {node!r}") if size else None,
        remote=el.get("class") == "remote",
        dataset=el.get("dataset") or None,
    )


def _size_gb(text: str, what: str) -> float:
    m = _SIZE.match(text)
    if not m:
        raise InputError(f"{what}: size {text!r} is not a size like '20GB'")
    unit = (m["unit"] or "GB").upper().replace("IB", "B")
    return float(m["num"]) * _SIZE_TO_GB[unit]


def _parse_services(el: etree._Element, node: Node, prefer_user: str | None) -> None:
    logins: list[Login] = []
    for child in el.iterchildren():
        if child.tag == f"{_G}execute":
            node.execute.append(
                ExecuteService(shell=child.get("shell") or "sh", command=child.get("command", ""))
            )
        elif child.tag == f"{_G}install":
            node.install.append(
                InstallService(url=child.get("url", ""), install_path=child.get("install_path", ""))
            )
        elif child.tag == f"{_G}login":
            port = child.get("port") or "22"
            if not port.isdigit():
                raise InputError(f"node {node.client_id!r}: <login> port {port!r} is not a number")
            logins.append(
                Login(
                    hostname=_required(child, "hostname", f"<login> of node {node.client_id!r}"),
                    port=int(port),
                    username=child.get("username") or "root",
                )
            )
    chosen = [lg for lg in logins if lg.username == prefer_user] or logins
    node.login = chosen[0] if chosen else None
    node.other_logins = [lg for lg in logins if lg is not node.login]


def _parse_link(el: etree._Element) -> Link:
    client_id = _required(el, "client_id", "<link>")
    refs = [
        _required(r, "client_id", f"<interface_ref> of link {client_id!r}")
        for r in el.iterchildren(f"{_G}interface_ref")
    ]
    lt = el.find(f"{_G}link_type")
    kind = "lan" if lt is not None and lt.get("name") == "lan" else "link"
    properties = [_parse_property(p, client_id) for p in el.iterchildren(f"{_G}property")]
    features = []
    if el.find(f"{_E}jumboframes") is not None:
        features.append("jumbo-frames")
    for tag in ("create_shared_vlan", "link_shared_vlan"):
        features += [f"shared-vlan:{sv.get('name', '')}" for sv in el.iterchildren(f"{_S}{tag}")]
    return Link(client_id, refs, kind, properties, features)


def _number(prop: etree._Element, attr: str, link: str) -> float | None:
    text = prop.get(attr)
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError as err:
        raise InputError(
            f"link {link!r}: property {prop.get('source_id')} -> {prop.get('dest_id')}: "
            f"{attr} {text!r} is not a number"
        ) from err


def _parse_property(prop: etree._Element, link: str) -> LinkProperty:
    what = f"<property> of link {link!r}"
    capacity = _number(prop, "capacity", link)
    return LinkProperty(
        source_id=_required(prop, "source_id", what),
        dest_id=_required(prop, "dest_id", what),
        capacity_kbps=int(capacity) if capacity is not None else None,
        latency_ms=_number(prop, "latency", link),
        packet_loss=_number(prop, "packet_loss", link),
    )


def _parameter_value(el: etree._Element) -> object:
    if el.tag == f"{_P}data_list":
        return [_parameter_value(c) for c in el if isinstance(c.tag, str)]
    if el.tag == f"{_P}data_struct":
        return {c.get("name") or "": _parameter_value(c) for c in el if isinstance(c.tag, str)}
    return el.text or ""


def _parse_parameters(root: etree._Element) -> dict[str, str]:
    # The value is the element text (not a value= attribute; see genilib_compat); a struct or
    # list parameter (data_struct / data_list) becomes JSON text, which geni-lib binds again.
    params: dict[str, str] = {}
    for ds in root.iterchildren(f"{_P}data_set"):
        for item in ds:
            if item.tag not in (f"{_P}data_item", f"{_P}data_list", f"{_P}data_struct"):
                continue
            name = item.get("name") or ""
            if name.startswith(PARAM_PREFIX):
                name = name[len(PARAM_PREFIX) :]
            if not name:
                continue
            value = _parameter_value(item)
            params[name] = value if isinstance(value, str) else json.dumps(value)
    return params


# --- validation ----------------------------------------------------------------------------


def validate(t: Topology) -> None:
    """Structural checks; raises InputError naming the node, interface or link at fault."""
    _unique((n.client_id for n in t.nodes), "node client_id")
    _unique((lk.client_id for lk in t.links), "link client_id")
    owners: dict[str, str] = {}
    for node in t.nodes:
        for iface in node.interfaces:
            if iface.client_id in owners:
                raise InputError(
                    f"interface {iface.client_id!r} is declared on node {owners[iface.client_id]!r}"
                    f" and on node {node.client_id!r}"
                )
            owners[iface.client_id] = node.client_id
    networks = {iface.client_id: _network(iface) for n in t.nodes for iface in n.interfaces}
    _check_unique_addresses(t)
    on_link: dict[str, str] = {}
    for link in t.links:
        if not link.interface_refs:
            raise InputError(f"link {link.client_id!r} connects no interfaces")
        for ref in link.interface_refs:
            if ref not in owners:
                raise InputError(
                    f"link {link.client_id!r} refers to interface {ref!r}, which no node declares"
                )
            if ref in on_link:
                raise InputError(
                    f"interface {ref!r} (node {owners[ref]!r}) is on link {on_link[ref]!r} "
                    f"and on link {link.client_id!r}"
                )
            on_link[ref] = link.client_id
        _check_link_subnet(link, owners, networks)
        _check_properties(link)
    for node in t.nodes:
        for bs in node.blockstores:
            if bs.remote and not bs.dataset:
                raise InputError(
                    f"node {node.client_id!r}: remote blockstore {bs.name!r} names no dataset "
                    "(set its dataset to the URN of a CloudLab dataset)"
                )


def _check_properties(link: Link) -> None:
    members = set(link.interface_refs)
    for prop in link.properties:
        where = f"link {link.client_id!r}: property {prop.source_id} -> {prop.dest_id}"
        if prop.source_id not in members:
            raise InputError(f"{where}: source {prop.source_id!r} is not on the link")
        if prop.dest_id not in members and prop.dest_id != link.client_id:
            raise InputError(
                f"{where}: destination {prop.dest_id!r} is neither on the link nor the link"
            )
        if prop.capacity_kbps is not None and prop.capacity_kbps < 0:
            raise InputError(f"{where}: capacity {prop.capacity_kbps} is negative")
        if prop.latency_ms is not None and prop.latency_ms < 0:
            raise InputError(f"{where}: latency {prop.latency_ms} ms is negative")
        if prop.packet_loss is not None and not 0 <= prop.packet_loss < 1:
            raise InputError(f"{where}: packet_loss {prop.packet_loss} is not a fraction in [0, 1)")


def _unique(ids: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for cid in ids:
        if cid in seen:
            raise InputError(f"duplicate {what} {cid!r}")
        seen.add(cid)


def _network(iface: Interface) -> ipaddress.IPv4Interface | None:
    if iface.ip is None and iface.netmask is None:
        return None
    where = f"interface {iface.client_id!r} of node {iface.node!r}"
    if iface.ip is None or iface.netmask is None:
        raise InputError(f"{where} needs both an address and a netmask")
    try:
        net = ipaddress.IPv4Interface(f"{iface.ip}/{iface.netmask}")
    except ValueError as err:
        raise InputError(f"{where}: bad address {iface.ip!r}/{iface.netmask!r}: {err}") from err
    if net.network.prefixlen < 31 and net.ip in (
        net.network.network_address,
        net.network.broadcast_address,
    ):
        raise InputError(
            f"{where}: {iface.ip} is the network or broadcast address of {net.network}"
        )
    return net


def _check_unique_addresses(t: Topology) -> None:
    seen: dict[str, str] = {}
    for node in t.nodes:
        for iface in node.interfaces:
            if iface.ip is None:
                continue
            if iface.ip in seen:
                raise InputError(
                    f"duplicate address {iface.ip}: interface {seen[iface.ip]!r} and interface "
                    f"{iface.client_id!r} (node {node.client_id!r})"
                )
            seen[iface.ip] = iface.client_id


def _check_link_subnet(
    link: Link, owners: dict[str, str], networks: dict[str, ipaddress.IPv4Interface | None]
) -> None:
    # The link's subnet is that of its first addressed member; every other member must sit
    # inside it with the same netmask, or the nodes cannot talk to each other.
    first: tuple[str, ipaddress.IPv4Interface] | None = None
    for ref in link.interface_refs:
        net = networks[ref]
        if net is None:
            continue
        if first is None:
            first = (ref, net)
            continue
        if net.network != first[1].network:
            inside = net.ip in first[1].network
            problem = (
                f"has netmask {net.netmask} where {first[0]!r} has {first[1].netmask}"
                if inside
                else f"address {net.ip} is outside the link's subnet {first[1].network}"
            )
            raise InputError(
                f"link {link.client_id!r}: interface {ref!r} of node {owners[ref]!r} {problem} "
                f"(set by {first[0]!r})"
            )


# --- writing -------------------------------------------------------------------------------


def write_manifest(t: Topology, expires: str | None = None) -> bytes:
    """A manifest RSpec in the form CloudLab's aggregate returns it."""
    nsmap: dict[str | None, str] = {
        None: GENI_NS,
        "emulab": EMULAB_NS,
        "xsi": XSI_NS,
        "sharedvlan": SHARED_VLAN_NS,
        "ansible": ANSIBLE_NS,
    }
    root = etree.Element(f"{_G}rspec", nsmap=nsmap)  # type: ignore[arg-type]
    root.set(
        f"{{{XSI_NS}}}schemaLocation",
        f"{GENI_NS} {GENI_MANIFEST_XSD}",
    )
    root.set("type", "manifest")
    if expires:
        root.set("expires", expires)
    for node in t.nodes:
        _write_node(root, node)
    for link in t.links:
        _write_link(root, link)
    for feature in t.features:
        if feature == "disable-root-keys":
            etree.SubElement(root, f"{_E}disablerootkey")
        elif feature.startswith("ansible-role:"):
            etree.SubElement(root, f"{_A}role").set("name", feature.split(":", 1)[1])
    if t.parameters:
        ds = etree.SubElement(root, f"{_P}data_set", nsmap={None: PARAMS_NS})  # type: ignore[dict-item]
        for name, value in t.parameters.items():
            item = etree.SubElement(ds, f"{_P}data_item")
            item.set("name", PARAM_PREFIX + name)
            item.text = value
    return bytes(etree.tostring(root, pretty_print=True, xml_declaration=True, encoding="UTF-8"))


def _set_opt(el: etree._Element, attr: str, value: str | None) -> None:
    if value is not None:
        el.set(attr, value)


def _write_node(root: etree._Element, node: Node) -> None:
    el = etree.SubElement(root, f"{_G}node")
    el.set("client_id", node.client_id)
    el.set("exclusive", "true" if node.sliver_type in ("raw", "raw-pc") else "false")
    _set_opt(el, "component_manager_id", node.component_manager_id)
    _set_opt(el, "component_id", node.component_id)
    _set_opt(el, "sliver_id", node.sliver_id)
    st = etree.SubElement(el, f"{_G}sliver_type")
    st.set("name", node.sliver_type)
    if node.disk_image:
        etree.SubElement(st, f"{_G}disk_image").set("name", node.disk_image)
    if node.hardware_type:
        etree.SubElement(el, f"{_G}hardware_type").set("name", node.hardware_type)
    for iface in node.interfaces:
        iel = etree.SubElement(el, f"{_G}interface")
        iel.set("client_id", iface.client_id)
        if iface.ip is not None:
            ip = etree.SubElement(iel, f"{_G}ip")
            ip.set("address", iface.ip)
            _set_opt(ip, "netmask", iface.netmask)
            ip.set("type", "ipv4")
    for bs in node.blockstores:
        bel = etree.SubElement(el, f"{_E}blockstore")
        bel.set("name", bs.name)
        _set_opt(bel, "mountpoint", bs.mount)
        bel.set("class", "remote" if bs.remote else "local")
        if bs.size_gb is not None:
            bel.set("size", f"{bs.size_gb:g}GB")
        _set_opt(bel, "dataset", bs.dataset)
        bel.set("placement", "any")
    if node.logins or node.execute or node.install:
        svc = etree.SubElement(el, f"{_G}services")
        for login in node.logins:
            lg = etree.SubElement(svc, f"{_G}login")
            lg.set("authentication", "ssh-keys")
            lg.set("hostname", login.hostname)
            lg.set("port", str(login.port))
            lg.set("username", login.username)
        for ins in node.install:
            iel = etree.SubElement(svc, f"{_G}install")
            iel.set("url", ins.url)
            iel.set("install_path", ins.install_path)
        for ex in node.execute:
            xel = etree.SubElement(svc, f"{_G}execute")
            xel.set("shell", ex.shell)
            xel.set("command", ex.command)
    for feature in node.features:
        if feature == "root-keys":
            etree.SubElement(el, f"{_E}rootkey")
        elif feature == "vnc":
            etree.SubElement(el, f"{_E}x11vnc")
        elif feature.startswith("ansible-role:"):
            etree.SubElement(el, f"{_A}role_binding").set("role", feature.split(":", 1)[1])


def _write_link(root: etree._Element, link: Link) -> None:
    el = etree.SubElement(root, f"{_G}link")
    el.set("client_id", link.client_id)
    for ref in link.interface_refs:
        etree.SubElement(el, f"{_G}interface_ref").set("client_id", ref)
    if link.kind == "lan":
        etree.SubElement(el, f"{_G}link_type").set("name", "lan")
    for feature in link.features:
        if feature == "jumbo-frames":
            etree.SubElement(el, f"{_E}jumboframes").set("enabled", "true")
        elif feature.startswith("shared-vlan:"):
            sv = etree.SubElement(el, f"{_S}link_shared_vlan")
            sv.set("name", feature.split(":", 1)[1])
    # Exactly the properties the request had: per source and destination, nothing added.
    for p in link.properties:
        prop = etree.SubElement(el, f"{_G}property")
        prop.set("source_id", p.source_id)
        prop.set("dest_id", p.dest_id)
        if p.capacity_kbps is not None:
            prop.set("capacity", str(p.capacity_kbps))
        if p.latency_ms is not None:
            prop.set("latency", str(p.latency_ms))
        if p.packet_loss is not None:
            prop.set("packet_loss", str(p.packet_loss))
