"""What modifying a running experiment means: nodes to add and remove, nothing else.

`ptc modify` re-renders the profile with new parameters, as CloudLab's portal does when an
experiment is modified, and compares the new request with the running experiment's manifest.
Growing or shrinking the set of nodes is what a running experiment can do; changing a node
that stays (its interfaces, addresses, image, blockstores) or the set of LANs would mean
rebuilding what users already deployed on, so such a request is refused and the node or link
at fault is named.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic.errors import InputError
from elastic.testbed.topology import Node, Topology


@dataclass(frozen=True)
class Change:
    added: list[Node]
    removed: list[Node]

    @property
    def empty(self) -> bool:
        return not self.added and not self.removed

    def describe(self) -> str:
        parts = []
        if self.added:
            parts.append("add " + ", ".join(n.client_id for n in self.added))
        if self.removed:
            parts.append("remove " + ", ".join(n.client_id for n in self.removed))
        return "; ".join(parts) or "no change"


def plan(manifest: Topology, request: Topology) -> Change:
    """The nodes ``request`` adds to and removes from ``manifest``; refuse any other change."""
    old_links = {lk.client_id for lk in manifest.links}
    new_links = {lk.client_id for lk in request.links}
    for link_id in sorted(old_links ^ new_links):
        what = "new" if link_id in new_links else "gone"
        raise InputError(
            f"link {link_id!r} would be {what}: a running experiment can gain and lose nodes, "
            "not LANs or links (create a new experiment instead)"
        )

    bandwidth = {lk.client_id: lk.bandwidth_kbps for lk in manifest.links}
    for link in request.links:
        if link.bandwidth_kbps != bandwidth[link.client_id]:
            raise InputError(
                f"link {link.client_id!r} would change bandwidth "
                f"({bandwidth[link.client_id] or 'unshaped'} -> {link.bandwidth_kbps or 'unshaped'}"
                " kbps); a running experiment keeps its links"
            )

    current = {n.client_id: n for n in manifest.nodes}
    wanted = {n.client_id: n for n in request.nodes}
    for cid in sorted(current.keys() & wanted.keys()):
        difference = _difference(current[cid], wanted[cid], manifest, request)
        if difference:
            raise InputError(
                f"node {cid!r} would change ({difference}); a running node keeps its "
                "configuration, only nodes can be added or removed"
            )
    return Change(
        added=[n for n in request.nodes if n.client_id not in current],
        removed=[n for n in manifest.nodes if n.client_id not in wanted],
    )


def _difference(old: Node, new: Node, manifest: Topology, request: Topology) -> str:
    if (old.sliver_type, old.hardware_type) != (new.sliver_type, new.hardware_type):
        return (
            f"type {old.sliver_type}/{old.hardware_type} -> {new.sliver_type}/{new.hardware_type}"
        )
    if old.disk_image != new.disk_image:
        return f"disk image {old.disk_image} -> {new.disk_image}"
    before, after = _wiring(old, manifest), _wiring(new, request)
    if before != after:
        return f"interfaces {before} -> {after}"
    if [(b.name, b.mount) for b in old.blockstores] != [(b.name, b.mount) for b in new.blockstores]:
        return "blockstores"
    return ""


def _wiring(node: Node, topology: Topology) -> list[tuple[str, str | None, str | None, str]]:
    link_of = {ref: lk.client_id for lk in topology.links for ref in lk.interface_refs}
    return [(i.client_id, i.ip, i.netmask, link_of.get(i.client_id, "-")) for i in node.interfaces]
