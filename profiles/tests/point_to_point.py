"""A chain a - b - c of point-to-point links, each its own /30 subnet, shaped to 100 Mbit/s."""

import geni.portal as portal
import geni.rspec.pg as pg

NETMASK = "255.255.255.252"

pc = portal.Context()
request = pc.makeRequestRSpec()
a, b, c = (request.RawPC(name) for name in ("a", "b", "c"))

ab = request.Link("link-ab")
ab.addInterface(a.addInterface("if0", pg.IPv4Address("10.30.0.1", NETMASK)))
ab.addInterface(b.addInterface("if0", pg.IPv4Address("10.30.0.2", NETMASK)))
ab.bandwidth = 100000

bc = request.Link("link-bc")
bc.addInterface(b.addInterface("if1", pg.IPv4Address("10.30.0.5", NETMASK)))
bc.addInterface(c.addInterface("if0", pg.IPv4Address("10.30.0.6", NETMASK)))
bc.bandwidth = 100000
pc.printRequestRSpec(request)
