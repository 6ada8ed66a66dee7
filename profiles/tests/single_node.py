"""One bare-metal node, no experiment network."""

import geni.portal as portal
import geni.rspec.pg as pg

pc = portal.Context()
request = pc.makeRequestRSpec()
node = request.RawPC("solo")
node.disk_image = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
node.addService(pg.Execute(shell="bash", command="echo hello > /tmp/hello"))
pc.printRequestRSpec(request)
