"""Three LANs with different subnets; `router` sits on the first two."""

# ruff: noqa: UP031  (%-formatting: runs unchanged under the portal's interpreter)

import geni.portal as portal
import geni.rspec.pg as pg

NETMASK = "255.255.255.0"

pc = portal.Context()
request = pc.makeRequestRSpec()

lans = [request.LAN("lan-%d" % i) for i in range(3)]
router = request.RawPC("router")
for i in range(2):
    lans[i].addInterface(
        router.addInterface("if%d" % i, pg.IPv4Address("10.20.%d.1" % i, NETMASK)))
for i in range(3):
    for j in range(2):
        node = request.RawPC("n%d-%d" % (i, j))
        iface = node.addInterface("if0", pg.IPv4Address("10.20.%d.%d" % (i, 10 + j), NETMASK))
        lans[i].addInterface(iface)
pc.printRequestRSpec(request)
