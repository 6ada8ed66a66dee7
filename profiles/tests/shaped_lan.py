"""Three nodes on one LAN, one of them shaped: the local testbed's link-shaping test profile.

`slow` (10.80.0.3) is shaped per interface: what it sends into the LAN is capped at
`bandwidth` kbps, delayed by `latency` ms and loses `loss` of its packets. `a` (10.80.0.1) and
`b` (10.80.0.2) are not shaped, so a ping between them is not delayed, while a ping from `a`
to `slow` waits for slow's delayed replies. geni-lib writes one <property> per LAN member,
from the interface to the LAN, for the shaped member only.
"""

import geni.portal as portal
import geni.rspec.pg as pg

pc = portal.context
pc.defineParameter(
    "latency", "Latency of slow's interface (ms)", portal.ParameterType.LATENCY, 20.0
)
pc.defineParameter(
    "bandwidth", "Bandwidth of slow's interface (kbps)", portal.ParameterType.BANDWIDTH, 20000
)
pc.defineParameter(
    "loss", "Packet loss of slow's interface (fraction)", portal.ParameterType.STRING, "0"
)
params = pc.bindParameters()

request = pc.makeRequestRSpec()
lan = request.LAN("lan")
for name, host in (("a", 1), ("b", 2), ("slow", 3)):
    node = request.RawPC(name)
    iface = node.addInterface("if0", pg.IPv4Address(f"10.80.0.{host}", "255.255.255.0"))
    if name == "slow":
        iface.bandwidth = int(params.bandwidth)
        iface.latency = params.latency
        if float(params.loss):
            iface.plr = float(params.loss)
    lan.addInterface(iface)
pc.printRequestRSpec(request)
