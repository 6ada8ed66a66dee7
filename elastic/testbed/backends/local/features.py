"""What the local testbed does with the portal extensions a request asks for.

The renderer writes every extension faithfully (the request is what the portal would get); this
module decides, before anything is created, what `ptc up --local` and `ptc modify` do with the
ones the local testbed cannot provide. Each is either refused (an InputError naming the node or
link and the feature) or ignored with a warning event, and the reason is given here:

Refused, because the experiment would silently differ from what the profile relies on:

- **Docker containers** (``DockerContainer``, sliver type ``emulab-docker``): a local node runs
  ptc's own systemd Debian image, never the Docker image the profile names.
- **VNC** (``startVNC``/``initVNC``): the portal adds a boot command that clones novnc-setup from
  gitlab.flux.utah.edu and serves the desktop through the portal's web console. Neither is
  reachable here, so the node's Execute service would fail at boot.
- **Shared VLANs** (``createSharedVlan``, ``connectSharedVlan``): a shared VLAN joins one
  experiment's LAN to others'. Local experiments are kept apart in network namespaces of their
  own, so the LAN would reach no other experiment.

Ignored with a warning, because the nodes work the same without them:

- **Root keys** (``installRootKeys``, ``disableRootKeys``): the portal installs the project
  members' keys for root. Locally, root always accepts the experiment's key (ptc and Ansible log
  in with it) and there are no member keys to install or withhold.
- **Jumbo frames** (``setJumboFrames``): the experiment LANs keep the veth default MTU of 1500.
- **Ansible roles** (``addRole``, ``bindRole``): the portal runs them on the nodes at boot; the
  local testbed does not (``ptc deploy`` runs ``site.yml``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from elastic.errors import InputError
from elastic.events import Reporter
from elastic.profile.topology import Link, Node, Topology

DOCKER_SLIVER = "emulab-docker"


@dataclass(frozen=True)
class Finding:
    """One extension the local testbed cannot provide, where it is asked for, and what it does."""

    where: str  # "node 'head'", "link 'lan' (nodes a, b)", "the request"
    feature: str  # what the profile called, e.g. "VNC (startVNC)"
    refused: bool
    why: str

    def __str__(self) -> str:
        verb = "cannot be provided" if self.refused else "is ignored"
        return f"{self.where}: {self.feature} {verb} on the local testbed: {self.why}"


_REFUSED_WHY = {
    "docker": "its nodes run ptc's systemd Debian image, not the Docker image the profile names",
    "vnc": "its boot command fetches novnc-setup from gitlab.flux.utah.edu for the portal's "
    "web console; neither is reachable here",
    "shared-vlan": "local experiments are kept apart in network namespaces of their own, so "
    "the LAN would reach no other experiment",
}
_IGNORED_WHY = {
    "root-keys": "root always accepts the experiment's key here, and there are no project "
    "members' keys",
    "jumbo-frames": "the experiment LANs keep an MTU of 1500",
    "ansible-role": "the portal runs the role at boot; here `ptc deploy` runs site.yml",
}


def review(
    request: Topology, nodes: Collection[str] | None = None, *, links: bool = True
) -> list[Finding]:
    """What the local testbed refuses or ignores in ``request``: of ``nodes`` only (all when
    None), of its links when ``links``, and of the request itself when both are whole."""
    findings: list[Finding] = []
    for node in request.nodes:
        if nodes is None or node.client_id in nodes:
            findings += _node_findings(node)
    if links:
        for link in request.links:
            findings += _link_findings(link, request)
    if nodes is None and links:
        for feature in request.features:
            if feature == "disable-root-keys":
                findings.append(
                    Finding("the request", "disableRootKeys", False, _IGNORED_WHY["root-keys"])
                )
            elif feature.startswith("ansible-role:"):
                name = feature.split(":", 1)[1]
                findings.append(
                    Finding(
                        "the request", f"Ansible role {name!r} (addRole)", False,
                        _IGNORED_WHY["ansible-role"],
                    )
                )  # fmt: skip
    return findings


def check(
    request: Topology,
    report: Reporter | None = None,
    nodes: Collection[str] | None = None,
    *,
    links: bool = True,
) -> list[Finding]:
    """Refuse what the local testbed cannot provide (every case in one InputError); report
    what it ignores as warnings. Returns the ignored findings."""
    findings = review(request, nodes, links=links)
    refused = [f for f in findings if f.refused]
    if refused:
        raise InputError(
            "the local testbed cannot instantiate this request:\n"
            + "\n".join(f"  {f}" for f in refused)
            + "\nuse CloudLab for these, or leave them out of the profile for local runs"
        )
    ignored = [f for f in findings if not f.refused]
    if report is not None:
        for finding in ignored:
            report.warning(str(finding))
    return ignored


def _node_findings(node: Node) -> list[Finding]:
    where = f"node {node.client_id!r}"
    out: list[Finding] = []
    if node.sliver_type == DOCKER_SLIVER:
        out.append(
            Finding(where, "a Docker container (DockerContainer)", True, _REFUSED_WHY["docker"])
        )
    for feature in node.features:
        if feature == "vnc":
            out.append(Finding(where, "VNC (startVNC)", True, _REFUSED_WHY["vnc"]))
        elif feature == "root-keys":
            out.append(
                Finding(where, "root keys (installRootKeys)", False, _IGNORED_WHY["root-keys"])
            )
        elif feature.startswith("ansible-role:"):
            name = feature.split(":", 1)[1]
            out.append(
                Finding(
                    where, f"Ansible role {name!r} (bindRole)", False, _IGNORED_WHY["ansible-role"]
                )
            )
    return out


def _link_findings(link: Link, request: Topology) -> list[Finding]:
    members = []
    for ref in link.interface_refs:
        iface = request.interface(ref)
        members.append(iface.node if iface is not None else ref)
    where = f"link {link.client_id!r} (nodes {', '.join(dict.fromkeys(members)) or 'none'})"
    out: list[Finding] = []
    for feature in link.features:
        if feature.startswith("shared-vlan:"):
            name = feature.split(":", 1)[1]
            out.append(Finding(where, f"shared VLAN {name!r}", True, _REFUSED_WHY["shared-vlan"]))
        elif feature == "jumbo-frames":
            out.append(
                Finding(where, "jumbo frames (setJumboFrames)", False, _IGNORED_WHY["jumbo-frames"])
            )
    return out
