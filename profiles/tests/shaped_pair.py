"""Two nodes on one point-to-point link shaped per interface: the ping test's profile.

`a:if0` is shaped to 50 Mbit/s with 20 ms latency towards it; `b:if0` to 20 Mbit/s with
5 ms latency and 1 % loss; on a LAN (`lan` parameter) each member is shaped towards the LAN
instead. geni-lib writes one <property> per direction.
"""

import geni.portal as portal
import geni.rspec.pg as pg

pc = portal.context
pc.defineParameter("lan", "Use a LAN instead of a link", portal.ParameterType.BOOLEAN, False)
pc.defineParameter("latency", "Latency towards a (ms)", portal.ParameterType.LATENCY, 20.0)
params = pc.bindParameters()

request = pc.makeRequestRSpec()
a, b = request.RawPC("a"), request.RawPC("b")
link = request.LAN("shaped") if params.lan else request.Link("shaped")
ia = a.addInterface("if0", pg.IPv4Address("10.70.0.1", "255.255.255.0"))
ib = b.addInterface("if0", pg.IPv4Address("10.70.0.2", "255.255.255.0"))
ia.bandwidth, ia.latency = 50000, params.latency
ib.bandwidth, ib.latency, ib.plr = 20000, 5, 0.01
link.addInterface(ia)
link.addInterface(ib)
pc.printRequestRSpec(request)
