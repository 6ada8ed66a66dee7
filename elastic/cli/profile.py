"""`ptc profile` commands: render a geni-lib profile, check it, list its parameters."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from elastic import atomic
from elastic.cli.options import (
    ParamOpt,
    ParamsFileOpt,
    WarningsFatalOpt,
    parse_params,
    print_warnings,
)
from elastic.profile.render import ProfileParameter, Rendered, profile_parameters, render_request
from elastic.profile.topology import Blockstore, Link, LinkProperty, Topology

app = typer.Typer(no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

ProfileArg = Annotated[Path, typer.Argument(help="geni-lib profile script")]


def _render_checked(
    profile: Path, param: list[str] | None, params_file: Path | None, warnings_fatal: bool
) -> Rendered:
    """Render and validate; show the profile's warnings (unless they were made fatal)."""
    rendered = render_request(
        profile, parse_params(param, params_file), warnings_fatal=warnings_fatal
    )
    print_warnings(err_console, rendered.warnings)
    return rendered


@app.command()
def render(
    profile: ProfileArg,
    param: ParamOpt = None,
    params_file: ParamsFileOpt = None,
    warnings_fatal: WarningsFatalOpt = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="write the RSpec here instead of stdout")
    ] = None,
) -> None:
    """Print PROFILE's request RSpec (validated), or write it atomically to --out.

    Parameter warnings are printed on stderr; with --warnings-fatal they refuse the render."""
    rendered = _render_checked(profile, param, params_file, warnings_fatal)
    xml, topology = rendered.xml, rendered.topology
    if out is None:
        sys.stdout.buffer.write(xml)
        sys.stdout.flush()
        return
    atomic.write_bytes(out, xml)
    err_console.print(
        f"wrote {out} ({len(topology.nodes)} nodes, {len(topology.links)} links)",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def check(
    profile: ProfileArg,
    param: ParamOpt = None,
    params_file: ParamsFileOpt = None,
    warnings_fatal: WarningsFatalOpt = False,
) -> None:
    """Render and validate PROFILE; summarise its nodes, links and addresses.

    Parameter warnings are printed; with --warnings-fatal they fail the check."""
    t = _render_checked(profile, param, params_file, warnings_fatal).topology
    link_of = {ref: link.client_id for link in t.links for ref in link.interface_refs}
    nodes = Table("node", "type", "hardware", "image", "interfaces", "storage", title="nodes")
    for node in t.nodes:
        ifaces = "\n".join(
            f"{i.client_id} {i.ip or '-'}/{_prefix(i.netmask)} on {link_of.get(i.client_id, '-')}"
            for i in node.interfaces
        )
        storage = "\n".join(_blockstore(b) for b in node.blockstores)
        image = (node.disk_image or "-").rsplit("//", 1)[-1]
        nodes.add_row(
            node.client_id, node.sliver_type, node.hardware_type or "any", image, ifaces, storage
        )
    console.print(nodes)
    if t.links:
        links = Table("link", "kind", "subnet", "members", "shaping", title="links")
        for link in t.links:
            links.add_row(
                link.client_id,
                link.kind,
                _subnet(t, link.interface_refs),
                ", ".join(link.interface_refs),
                _shaping(link),
            )
        console.print(links)
    console.print(
        f"[green]ok[/]: {len(t.nodes)} nodes, {len(t.links)} links, "
        f"{sum(len(n.interfaces) for n in t.nodes)} interfaces"
    )


@app.command()
def params(profile: ProfileArg) -> None:
    """List PROFILE's parameters with their types and defaults."""
    table = Table("name", "type", "default", "description")

    def add(p: ProfileParameter, name: str) -> None:
        default = repr(p.default) if p.default == "" else str(p.default)
        if p.legal_values:
            default += f"  (one of: {', '.join(map(str, p.legal_values))})"
        kind = f"list of {p.type}" if p.multi_value else p.type
        advanced = " \\[advanced]" if p.advanced else ""
        table.add_row(escape(name), kind, escape(default), escape(p.description) + advanced)
        for member in p.members or []:
            add(member, f"{name}[i].{member.name}" if p.multi_value else f"{name}.{member.name}")

    for p in profile_parameters(profile):
        add(p, p.name)
    console.print(table)


def _figures(p: LinkProperty) -> str:
    shown = []
    if p.capacity_kbps is not None:
        shown.append(f"{p.capacity_kbps} kbps")
    if p.latency_ms is not None:
        shown.append(f"{p.latency_ms:g} ms")
    if p.packet_loss is not None:
        shown.append(f"{p.packet_loss:g} loss")
    return ", ".join(shown)


def _shaping(link: Link) -> str:
    """The link's properties: once when every direction is shaped alike, else per direction."""
    shaped = [p for p in link.properties if p.shaped]
    if not shaped:
        return "unshaped"
    figures = {_figures(p) for p in shaped}
    if len(figures) == 1 and len(shaped) == len(link.directions()):
        return figures.pop()
    return "\n".join(f"{p.source_id} -> {p.dest_id}: {_figures(p)}" for p in shaped)


def _blockstore(b: Blockstore) -> str:
    if not b.size_gb:
        # geni-lib writes no size for 0; a local blockstore without one gets all the node's
        # free space on CloudLab, and a remote one is its dataset's size.
        size = "dataset's size" if b.remote else "all free space"
    else:
        size = f"{b.size_gb:g}GB"
    where = f" at {b.mount}" if b.mount else ""
    remote = f" (remote, dataset {b.dataset})" if b.remote else ""
    return f"{b.name} {size}{where}{remote}"


def _prefix(netmask: str | None) -> str:
    if netmask is None:
        return "-"
    return str(ipaddress.IPv4Network(f"0.0.0.0/{netmask}").prefixlen)


def _subnet(t: Topology, refs: list[str]) -> str:
    for ref in refs:
        iface = t.interface(ref)
        if iface is not None and iface.ip and iface.netmask:
            return str(ipaddress.IPv4Interface(f"{iface.ip}/{iface.netmask}").network)
    return "-"
