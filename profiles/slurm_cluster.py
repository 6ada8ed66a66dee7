"""Slurm-Cluster: a head node and N compute nodes on one experiment LAN, prepared for Ansible.

The head node `head` (10.10.1.1) runs the Slurm controller, the Slurm accounting daemon, the
NFS server and the first member of the configuration server; compute nodes `node-0` ..
`node-{N-1}` (10.10.1.2, 10.10.1.3, ...) run the roles chosen in "Compute node roles". With
3 or 5 configuration-server members, the others are small nodes `cfg-1` .. `cfg-4`
(10.10.1.201, ...), VMs unless asked otherwise. All nodes sit on the LAN `lan`
(10.10.1.0/24). At boot every node runs `profiles/startup.sh`, which installs the
experiment's SSH key mesh (so the head can reach every node as root) and announces readiness.
Each node's Ansible groups are the `--groups` argument of that boot command, so they travel
in the manifest to the inventory. Shared storage (when requested) is a blockstore on the head
mounted at `/exports`, the path the NFS role exports to the compute nodes.

Modelled on the Chef-Cluster profile, with Ansible in place of Chef. Like there, configuring
the software stack stays a deliberate user step.

Instructions:
Wait until every node reports "ptc: cluster node ready" on login. Then, from your workstation, run
`ptc inventory EXPERIMENT` and `ptc deploy EXPERIMENT` to apply the playbooks from the
configured IaC repository, or log into `head` and run `ansible-playbook` there yourself.
"""

# This script must upload unchanged to the CloudLab portal: only the portal's geni-lib API,
# and plain %-formatting so it does not depend on the portal interpreter's newest syntax.
# ruff: noqa: UP031
import geni.portal as portal
import geni.rspec.emulab  # noqa: F401  (registers the Blockstore extension on nodes)
import geni.rspec.pg as pg

# Ubuntu 24.04: its Slurm (23.11) runs the cgroup v2 plugins the roles configure and its etcd
# (3.4) has the v3 gateway; 22.04's Slurm 21.08 and etcd 3.3 have neither.
UBUNTU24 = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"
LAN_NAME = "lan"
LAN_PREFIX = "10.10.1."
NETMASK = "255.255.255.0"
HEAD_ADDRESS = LAN_PREFIX + "1"
FIRST_COMPUTE_HOST = 2  # node-i gets 10.10.1.(2+i)
MAX_COMPUTE_NODES = 100  # keeps every address inside 10.10.1.0/24 with room to spare
EXPORT_PATH = "/exports"  # the NFS role exports this path; the blockstore mounts here
STARTUP = "sudo bash /local/repository/profiles/startup.sh"
HEAD_GROUPS = ["slurm_controller", "slurm_dbd", "nfs_server", "config_server"]
KNOWN_COMPUTE_GROUPS = ["slurm_compute", "nfs_client"]
DEFAULT_COMPUTE_GROUPS = "slurm_compute,nfs_client"
CONFIG_SERVER_GROUPS = ["config_server"]
CONFIG_SERVER_COUNTS = [1, 3, 5]  # etcd needs an odd number of members for a majority
CONFIG_SERVER_FIRST_HOST = 201  # cfg-i gets 10.10.1.(200+i); the head is member 1
MAX_BANDWIDTH_KBPS = 100 * 1000 * 1000  # 100 Gbit/s, the fastest CloudLab experiment links
MIN_BANDWIDTH_KBPS = 1000

pc = portal.Context()

pc.defineParameter(
    "computeNodeCount", "Number of compute nodes", portal.ParameterType.INTEGER, 2,
    longDescription="Compute nodes node-0 .. node-{N-1}; from 1 to %d." % MAX_COMPUTE_NODES)
pc.defineParameter(
    "hardwareType", "Hardware type (empty = any)", portal.ParameterType.NODETYPE, "",
    longDescription="A CloudLab hardware type such as m510 or c220g5; empty lets the "
    "testbed choose.")
pc.defineParameter(
    "osImage", "OS image", portal.ParameterType.IMAGE, UBUNTU24,
    longDescription="Disk image URN for every node.")
pc.defineParameter(
    "lanBandwidth", "LAN bandwidth (kbps, 0 = link speed)", portal.ParameterType.BANDWIDTH, 0,
    longDescription="0 leaves the LAN unshaped; otherwise %d .. %d kbps."
    % (MIN_BANDWIDTH_KBPS, MAX_BANDWIDTH_KBPS), advanced=True)
pc.defineParameter(
    "sharedStorageGB", "Shared storage on the head (GB, 0 = none)", portal.ParameterType.SIZE,
    0, longDescription="Size of a blockstore on the head mounted at %s and exported over "
    "NFS; 0 exports a directory on the head's root disk instead." % EXPORT_PATH)
pc.defineParameter(
    "iacRepo", "IaC repository URL (empty = this profile's repository)",
    portal.ParameterType.STRING, "",
    longDescription="Git URL of the Ansible repository to deploy from; empty uses the "
    "profile's own repository, cloned at /local/repository.", advanced=True)
pc.defineParameter(
    "iacBranch", "IaC repository branch", portal.ParameterType.STRING, "main", advanced=True)
pc.defineParameter(
    "computeRoles", "Compute node roles (comma-separated)", portal.ParameterType.STRING,
    DEFAULT_COMPUTE_GROUPS,
    longDescription="Ansible groups of every compute node; known: %s."
    % ", ".join(KNOWN_COMPUTE_GROUPS), advanced=True)
pc.defineParameter(
    "configServerCount", "Configuration-server members", portal.ParameterType.INTEGER, 1,
    legalValues=CONFIG_SERVER_COUNTS,
    longDescription="Members of the replicated configuration server (etcd): the head, plus "
    "nodes cfg-1 .. cfg-4 for 3 or 5 members. A majority must be up for it to serve.")
pc.defineParameter(
    "configServerVMs", "Configuration servers as VMs", portal.ParameterType.BOOLEAN, True,
    longDescription="Run cfg-1 .. cfg-4 as small Xen VMs (cheap) rather than bare-metal "
    "nodes.", advanced=True)
pc.defineParameter(
    "configServerLatency", "Latency of the last configuration-server member (ms)",
    portal.ParameterType.LATENCY, 0,
    longDescription="Delay added to what the last member (cfg-2 of 3, cfg-4 of 5) sends on the "
    "LAN, like a replica far away; 0 leaves it unshaped. Needs 3 or 5 members.", advanced=True)

params = pc.bindParameters()

if params.computeNodeCount < 1 or params.computeNodeCount > MAX_COMPUTE_NODES:
    pc.reportError(portal.ParameterError(
        "The number of compute nodes must be between 1 and %d." % MAX_COMPUTE_NODES,
        ["computeNodeCount"]))
if params.lanBandwidth != 0 and not (
        MIN_BANDWIDTH_KBPS <= params.lanBandwidth <= MAX_BANDWIDTH_KBPS):
    pc.reportError(portal.ParameterError(
        "LAN bandwidth must be 0 (unshaped) or between %d and %d kbps."
        % (MIN_BANDWIDTH_KBPS, MAX_BANDWIDTH_KBPS), ["lanBandwidth"]))
if params.sharedStorageGB < 0:
    pc.reportError(portal.ParameterError(
        "Shared storage size cannot be negative.", ["sharedStorageGB"]))
if params.iacRepo and not (params.iacRepo.startswith("https://")
                           or params.iacRepo.startswith("http://")
                           or params.iacRepo.startswith("git@")):
    pc.reportError(portal.ParameterError(
        "The IaC repository must be an http(s):// or git@ URL, or empty.", ["iacRepo"]))
if not params.iacBranch or any(c.isspace() for c in params.iacBranch):
    pc.reportError(portal.ParameterError(
        "The IaC branch must be a non-empty name without spaces.", ["iacBranch"]))

compute_groups = [r.strip() for r in params.computeRoles.split(",") if r.strip()]
unknown_groups = [r for r in compute_groups if r not in KNOWN_COMPUTE_GROUPS]
if not compute_groups:
    pc.reportError(portal.ParameterError(
        "Give at least one compute node role.", ["computeRoles"]))
elif unknown_groups:
    pc.reportError(portal.ParameterError(
        "Unknown role(s) %s; known compute roles: %s."
        % (", ".join(unknown_groups), ", ".join(KNOWN_COMPUTE_GROUPS)), ["computeRoles"]))
if params.configServerCount not in CONFIG_SERVER_COUNTS:
    pc.reportError(portal.ParameterError(
        "The configuration server needs 1, 3 or 5 members.", ["configServerCount"]))
if params.configServerLatency < 0:
    pc.reportError(portal.ParameterError(
        "The latency of a configuration-server member cannot be negative.",
        ["configServerLatency"]))
elif params.configServerLatency and params.configServerCount == 1:
    pc.reportError(portal.ParameterError(
        "A configuration-server latency needs 3 or 5 members (the head is never delayed).",
        ["configServerLatency", "configServerCount"]))

pc.verifyParameters()

request = pc.makeRequestRSpec()
lan = request.LAN(LAN_NAME)
if params.lanBandwidth:
    lan.bandwidth = int(params.lanBandwidth)


def add_node(name, address, groups, vm=False, latency=0):
    """A node on the LAN whose boot command sets it up and carries its Ansible groups."""
    if vm:
        node = request.XenVM(name)
    else:
        node = request.RawPC(name)
        if params.hardwareType:
            node.hardware_type = params.hardwareType
    node.disk_image = params.osImage
    iface = node.addInterface("if1", pg.IPv4Address(address, NETMASK))
    if latency:
        iface.latency = latency  # shapes what this node sends into the LAN
    lan.addInterface(iface)
    node.addService(pg.Execute(
        shell="bash", command="%s --groups %s" % (STARTUP, ",".join(groups))))
    return node


head = add_node("head", HEAD_ADDRESS, HEAD_GROUPS)
if params.sharedStorageGB > 0:
    storage = head.Blockstore("head-shared", EXPORT_PATH)
    storage.size = "%dGB" % params.sharedStorageGB

for i in range(params.computeNodeCount):
    add_node("node-%d" % i, LAN_PREFIX + str(FIRST_COMPUTE_HOST + i), compute_groups)

for i in range(1, params.configServerCount):
    last = i == params.configServerCount - 1
    add_node("cfg-%d" % i, LAN_PREFIX + str(CONFIG_SERVER_FIRST_HOST + i - 1),
             CONFIG_SERVER_GROUPS, vm=params.configServerVMs,
             latency=params.configServerLatency if last else 0)

pc.printRequestRSpec(request)
