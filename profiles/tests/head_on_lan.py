"""A head alone on its LAN: the smallest experiment a FAKE EC2 region's instances can join.

lan 10.10.1.0/24: head 10.10.1.1 (the Slurm controller's groups, so it holds the control
service's directory, where the region leaves its credentials; Slurm itself is not deployed).
"""

# ruff: noqa: UP031  (%-formatting: runs unchanged under the portal's interpreter)

import geni.portal as portal
import geni.rspec.pg as pg

NETMASK = "255.255.255.0"
IMAGE = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
STARTUP = "sudo bash /local/repository/profiles/startup.sh"

pc = portal.Context()
request = pc.makeRequestRSpec()
head = request.RawPC("head")
head.disk_image = IMAGE
head.addService(pg.Execute(
    shell="bash", command="%s --groups slurm_controller,slurm_dbd,nfs_server" % STARTUP))
lan = request.LAN("lan")
lan.addInterface(head.addInterface("if1", pg.IPv4Address("10.10.1.1", NETMASK)))
pc.printRequestRSpec(request)
