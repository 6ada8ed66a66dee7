"""Two isolated experiment networks: `head` is on both, two nodes on each.

lan-a 10.10.1.0/24: head 10.10.1.1, a-0 10.10.1.2, a-1 10.10.1.3
lan-b 10.10.2.0/24: head 10.10.2.1, b-0 10.10.2.2, b-1 10.10.2.3

a-* and b-* share no network: traffic between them must not pass (head does not route).
Every node runs the same startup script as the Slurm cluster profile.
"""

# ruff: noqa: UP031  (%-formatting: runs unchanged under the portal's interpreter)

import geni.portal as portal
import geni.rspec.pg as pg

NETMASK = "255.255.255.0"
IMAGE = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
STARTUP = "sudo bash /local/repository/profiles/startup.sh"

pc = portal.Context()
request = pc.makeRequestRSpec()


def node(name, groups):
    n = request.RawPC(name)
    n.disk_image = IMAGE
    n.addService(pg.Execute(shell="bash", command="%s --groups %s" % (STARTUP, groups)))
    return n


head = node("head", "slurm_controller,slurm_dbd,nfs_server,config_server")
for lan_index, letter in enumerate("ab"):
    subnet = "10.10.%d." % (lan_index + 1)
    lan = request.LAN("lan-%s" % letter)
    lan.addInterface(head.addInterface("if%d" % (lan_index + 1),
                                       pg.IPv4Address(subnet + "1", NETMASK)))
    for i in range(2):
        member = node("%s-%d" % (letter, i), "slurm_compute,nfs_client")
        lan.addInterface(member.addInterface("if1", pg.IPv4Address(subnet + str(2 + i), NETMASK)))
pc.printRequestRSpec(request)
