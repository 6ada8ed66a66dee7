"""What modifying a running experiment means: nodes to add and remove, nothing else.

`ptc modify` re-renders the profile with new parameters, as CloudLab's portal does when an
experiment is modified, and compares the new request with the running experiment's manifest.
Growing or shrinking the set of nodes is what a running experiment can do; changing a node
that stays (its interfaces, addresses, image, blockstores, portal extensions), the set of LANs,
or how a link shapes the traffic of the nodes that stay (bandwidth, latency and loss, direction
by direction) would mean rebuilding what users already deployed on, so such a request is
refused and the node or link at fault is named.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic.errors import InputError
from elastic.profile.topology import Link, LinkProperty, Node, Topology


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
    old_ids = {lk.client_id for lk in manifest.links}
    new_ids = {lk.client_id for lk in request.links}
    for link_id in sorted(old_ids ^ new_ids):
        what = "new" if link_id in new_ids else "gone"
        raise InputError(
            f"link {link_id!r} would be {what}: a running experiment can gain and lose nodes, "
            "not LANs or links (create a new experiment instead)"
        )

    current = {n.client_id: n for n in manifest.nodes}
    wanted = {n.client_id: n for n in request.nodes}
    kept = {i.client_id for cid in current.keys() & wanted.keys() for i in current[cid].interfaces}
    old_links = {lk.client_id: lk for lk in manifest.links}
    for link in request.links:
        difference = _link_difference(old_links[link.client_id], link, kept)
        if difference:
            raise InputError(
                f"link {link.client_id!r} would change ({difference}); a running experiment "
                "keeps its links as they are"
            )

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
    if sorted(old.features) != sorted(new.features):
        return (
            f"extensions {', '.join(sorted(old.features)) or 'none'} -> "
            f"{', '.join(sorted(new.features)) or 'none'}"
        )
    return ""


def _wiring(node: Node, topology: Topology) -> list[tuple[str, str | None, str | None, str]]:
    link_of = {ref: lk.client_id for lk in topology.links for ref in lk.interface_refs}
    return [(i.client_id, i.ip, i.netmask, link_of.get(i.client_id, "-")) for i in node.interfaces]


_Figures = tuple[int | None, float | None, float | None]


def _figures(p: LinkProperty | None) -> _Figures:
    return (p.capacity_kbps, p.latency_ms, p.packet_loss) if p else (None, None, None)


def _show(figures: _Figures) -> str:
    capacity, latency, loss = figures
    parts = [
        f"{capacity} kbps" if capacity is not None else "",
        f"{latency:g} ms" if latency is not None else "",
        f"loss {loss:g}" if loss is not None else "",
    ]
    return ", ".join(p for p in parts if p) or "unshaped"


def _link_difference(old: Link, new: Link, kept: set[str]) -> str:
    """How ``new`` shapes or extends the traffic of the interfaces that stay, unlike ``old``.

    Directions are compared one by one (source and destination each an interface of a node
    that stays, or the LAN itself); the members added or removed bring their own."""

    def shaping(link: Link) -> dict[tuple[str, str], LinkProperty]:
        ends = kept | {link.client_id}
        return {
            (p.source_id, p.dest_id): p
            for p in link.properties
            if p.shaped and p.source_id in ends and p.dest_id in ends
        }

    before, after = shaping(old), shaping(new)
    for direction in sorted(before.keys() | after.keys()):
        was, now = _figures(before.get(direction)), _figures(after.get(direction))
        if was != now:
            source, dest = direction
            return f"shaping {source} -> {dest}: {_show(was)} -> {_show(now)}"
    if sorted(old.features) != sorted(new.features):
        return (
            f"extensions {', '.join(sorted(old.features)) or 'none'} -> "
            f"{', '.join(sorted(new.features)) or 'none'}"
        )
    return ""
