"""`ptc profile` commands: render a geni-lib profile, check it, list its parameters."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from elastic import atomic
from elastic.cli.options import ParamOpt, parse_params
from elastic.testbed import rspec
from elastic.testbed.render import profile_parameters, render_profile
from elastic.testbed.topology import Topology

app = typer.Typer(no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

ProfileArg = Annotated[Path, typer.Argument(help="geni-lib profile script")]


def _render_checked(profile: Path, param: list[str] | None) -> tuple[bytes, Topology]:
    xml = render_profile(profile, parse_params(param))
    topology = rspec.parse_request(xml)
    rspec.validate(topology)
    return xml, topology


@app.command()
def render(
    profile: ProfileArg,
    param: ParamOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="write the RSpec here instead of stdout")
    ] = None,
) -> None:
    """Print PROFILE's request RSpec (validated), or write it atomically to --out."""
    xml, topology = _render_checked(profile, param)
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
def check(profile: ProfileArg, param: ParamOpt = None) -> None:
    """Render and validate PROFILE; summarise its nodes, links and addresses."""
    _, t = _render_checked(profile, param)
    link_of = {ref: link.client_id for link in t.links for ref in link.interface_refs}
    nodes = Table("node", "type", "hardware", "image", "interfaces", "storage", title="nodes")
    for node in t.nodes:
        ifaces = "\n".join(
            f"{i.client_id} {i.ip or '-'}/{_prefix(i.netmask)} on {link_of.get(i.client_id, '-')}"
            for i in node.interfaces
        )
        storage = "\n".join(
            f"{b.name} {b.size_gb or '?'}GB {b.mount or ''}{' (remote)' if b.remote else ''}"
            for b in node.blockstores
        )
        image = (node.disk_image or "-").rsplit("//", 1)[-1]
        nodes.add_row(
            node.client_id, node.sliver_type, node.hardware_type or "any", image, ifaces, storage
        )
    console.print(nodes)
    if t.links:
        links = Table("link", "kind", "subnet", "members", "bandwidth", title="links")
        for link in t.links:
            links.add_row(
                link.client_id,
                link.kind,
                _subnet(t, link.interface_refs),
                ", ".join(link.interface_refs),
                f"{link.bandwidth_kbps} kbps" if link.bandwidth_kbps else "unshaped",
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
    for p in profile_parameters(profile):
        default = repr(p.default) if p.default == "" else str(p.default)
        if p.legal_values:
            default += f"  (one of: {', '.join(map(str, p.legal_values))})"
        table.add_row(
            p.name, p.type, default, p.description + (" [advanced]" if p.advanced else "")
        )
    console.print(table)


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
