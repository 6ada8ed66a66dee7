"""Every node and link extension of the portal's geni-lib that 0.9.9.4 lacks, in one request.

Root ssh keys (installRootKeys, disableRootKeys), VNC (startVNC, which adds initVNC), a shared
VLAN (createSharedVlan), jumbo frames (setJumboFrames), a Docker container node
(DockerContainer) and an Ansible role (addRole, bindRole). The local testbed cannot provide
VNC, shared VLANs or Docker containers: `ptc up --local` names them and refuses.
"""

import geni.portal as portal
import geni.rspec.emulab  # noqa: F401  (registers the Emulab extensions)
import geni.rspec.emulab.ansible as ansible
import geni.rspec.pg as pg

pc = portal.context
request = pc.makeRequestRSpec()

head = request.RawPC("head")
head.installRootKeys(True, True)
head.startVNC()
worker = request.RawPC("worker")
worker.installRootKeys(False, True)
box = request.DockerContainer("box")
box.docker_extimage = "ubuntu:22.04"
box.cores = 2
box.ram = 2048

lan = request.LAN("lan")
for i, node in enumerate((head, worker, box)):
    lan.addInterface(node.addInterface("if0", pg.IPv4Address(f"10.60.0.{i + 1}", "255.255.255.0")))
lan.setJumboFrames()
lan.createSharedVlan("ptc-shared")

request.addRole(ansible.Role("web", path="ansible/web"))
head.bindRole(ansible.RoleBinding("web"))
request.disableRootKeys()
pc.printRequestRSpec(request)
