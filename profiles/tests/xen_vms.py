"""Two Xen virtual machines on one LAN."""

# ruff: noqa: UP031  (%-formatting: runs unchanged under the portal's interpreter)

import geni.portal as portal
import geni.rspec.pg as pg

pc = portal.Context()
request = pc.makeRequestRSpec()
lan = request.LAN("vm-lan")
for i in range(2):
    vm = pg.XenVM("vm-%d" % i)
    vm.cores = 2
    vm.ram = 2048
    vm.disk = 16
    vm.disk_image = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
    request.addResource(vm)
    lan.addInterface(vm.addInterface("if0", pg.IPv4Address("10.50.0.%d" % (i + 1),
                                                           "255.255.255.0")))
pc.printRequestRSpec(request)
