"""Two nodes on two LANs, one interface shaped: the local testbed's link-shaping test profile.

`a` and `slow` share the LAN `lan` (10.80.0.0/24) and the LAN `plain` (10.81.0.0/24). Only
slow's interface on `lan` is shaped: what it sends into that LAN is capped at `bandwidth`
kbps, delayed by `latency` ms and loses `loss` of its packets. The same two nodes talk
unshaped over `plain`. geni-lib writes one <property> per LAN member, from the interface to
the LAN, for the shaped member only. `extra` adds nodes `far-1` ... on `lan` only, shaped as
`slow` is (for `ptc modify`).
"""

import geni.portal as portal
import geni.rspec.pg as pg

pc = portal.context
pc.defineParameter(
    "latency", "Latency of slow's interface on lan (ms)", portal.ParameterType.LATENCY, 20.0
)
pc.defineParameter(
    "bandwidth",
    "Bandwidth of slow's interface on lan (kbps)",
    portal.ParameterType.BANDWIDTH,
    20000,
)
pc.defineParameter(
    "loss", "Packet loss of slow's interface on lan (fraction)", portal.ParameterType.STRING, "0"
)
pc.defineParameter("extra", "Nodes shaped as slow is, on lan", portal.ParameterType.INTEGER, 0)
params = pc.bindParameters()

request = pc.makeRequestRSpec()
shaped, plain = request.LAN("lan"), request.LAN("plain")
for name, host in (("a", 1), ("slow", 2)):
    node = request.RawPC(name)
    iface = node.addInterface("if0", pg.IPv4Address(f"10.80.0.{host}", "255.255.255.0"))
    if name == "slow":
        iface.bandwidth = int(params.bandwidth)
        iface.latency = params.latency
        if float(params.loss):
            iface.plr = float(params.loss)
    shaped.addInterface(iface)
    plain.addInterface(node.addInterface("if1", pg.IPv4Address(f"10.81.0.{host}", "255.255.255.0")))
for i in range(1, params.extra + 1):
    iface = request.RawPC(f"far-{i}").addInterface(
        "if0", pg.IPv4Address(f"10.80.0.{10 + i}", "255.255.255.0")
    )
    iface.bandwidth, iface.latency = int(params.bandwidth), params.latency
    if float(params.loss):
        iface.plr = float(params.loss)
    shaped.addInterface(iface)
pc.printRequestRSpec(request)
