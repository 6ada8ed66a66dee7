"""Deliberately broken: fails while building the request. Used by error-reporting tests."""

import geni.portal as portal

pc = portal.Context()
request = pc.makeRequestRSpec()
node = request.RawPC("n")
node.addInterface("if0", "10.0.0.1")  # an address must be a pg.IPv4Address: geni-lib raises
pc.printRequestRSpec(request)
