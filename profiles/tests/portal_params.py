"""Struct and multi-value parameters (the portal's API after geni-lib 0.9.9.4), and a warning.

`nodes` is a list of structs (one per node: name, hardware type, whether it gets a
blockstore), `lan` a struct of link settings, `tags` a list of strings. A LAN bandwidth
under 10 Mbit/s only warns (`reportWarning`): the portal makes that fatal on its first run.
"""

import geni.portal as portal
import geni.rspec.emulab  # noqa: F401  (registers setJumboFrames on the portal)
import geni.rspec.pg as pg

pc = portal.context

node_members = [
    portal.Parameter("name", "Node name", portal.ParameterType.STRING, "node"),
    portal.Parameter(
        "hardware",
        "Hardware type",
        portal.ParameterType.NODETYPE,
        "any",
        legalValues=["any", "m400", "c220g5", "d430"],
    ),
    portal.Parameter("scratch", "Local scratch blockstore", portal.ParameterType.BOOLEAN, False),
]
pc.defineStructParameter(
    "nodes",
    "Nodes",
    members=node_members,
    multiValue=True,
    min=1,
    max=8,
    itemDefaultValue={"name": "node"},
    multiValueTitle="Node",
    defaultValue=[{"name": "alpha"}, {"name": "beta"}],
)
pc.defineStructParameter(
    "lan",
    "LAN settings",
    members=[
        portal.Parameter("bandwidth", "Mbit/s", portal.ParameterType.BANDWIDTH, 1000.0),
        portal.Parameter("jumbo", "Jumbo frames", portal.ParameterType.BOOLEAN, False),
    ],
)
pc.defineParameter(
    "tags",
    "Free-form tags",
    portal.ParameterType.STRING,
    [],
    multiValue=True,
    max=4,
    itemDefaultValue="",
    multiValueTitle="Tag",
    inputFieldHint="a short word",
    inputConstraints={"regex": "^[a-z]*$"},
)
extra = portal.Parameter("image", "Disk image", portal.ParameterType.IMAGE, "", groupId="advanced")
pc.addParameter(extra)
params = pc.bindParameters()

names = [n.name for n in params.nodes]
for i, name in enumerate(names):
    if names.index(name) != i:
        pc.reportError(
            portal.ParameterError(f"node name {name!r} is used twice", [f"nodes[{i}].name"])
        )
if params.lan.bandwidth < 10:
    pc.reportWarning(
        portal.ParameterWarning("a LAN under 10 Mbit/s is very slow", ["lan.bandwidth"])
    )
pc.verifyParameters()

request = pc.makeRequestRSpec()
lan = request.LAN("lan")
lan.bandwidth = int(params.lan.bandwidth * 1000)
for i, spec in enumerate(params.nodes):
    node = request.RawPC(spec.name)
    if spec.hardware != "any":
        node.hardware_type = spec.hardware
    if params.image:
        node.disk_image = params.image
    if spec.scratch:
        node.Blockstore(f"{spec.name}-scratch", "/scratch")
    lan.addInterface(node.addInterface("if0", pg.IPv4Address(f"10.50.0.{i + 1}", "255.255.255.0")))
if params.lan.jumbo:
    lan.setJumboFrames()
pc.printRequestRSpec(request)
