"""A node with a local 30 GB blockstore at /data, and a remote dataset attached by a link."""

import geni.portal as portal
import geni.rspec.emulab  # noqa: F401  (registers Blockstore / RemoteBlockstore)
import geni.rspec.pg as pg

NETMASK = "255.255.255.0"

pc = portal.Context()
request = pc.makeRequestRSpec()

node = request.RawPC("storage-user")
local = node.Blockstore("scratch", "/data")
local.size = "30GB"

remote = request.RemoteBlockstore("dataset", "/dataset")
remote.size = "100GB"
remote.dataset = "urn:publicid:IDN+utah.cloudlab.us:ptc+ltdataset+ptc-data"

link = request.Link("storage-link")
link.addInterface(node.addInterface("if0", pg.IPv4Address("10.40.0.1", NETMASK)))
remote.interface.addAddress(pg.IPv4Address("10.40.0.2", NETMASK))
link.addInterface(remote.interface)
pc.printRequestRSpec(request)
