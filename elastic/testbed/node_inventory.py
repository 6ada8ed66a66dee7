"""An inventory built on a node of the experiment, from ``geni-get manifest``.

This is how the head runs the playbooks by itself, as the thesis's head ran Chef: no
workstation and no ``$PTC_HOME``. The manifest is the one CloudLab (or the local testbed) hands
every node; the inventory reaches the other nodes over the experiment LAN as root, with the
key mesh the profile's startup script installed. Which testbed's group_vars apply is read from
the manifest's component manager.

    python3 -m elastic.testbed.node_inventory --out PLAYBOOK_STATE_DIR/inventory

(``PLAYBOOK_STATE_DIR``: ``elastic.node_paths``, where the ansible_controller role keeps
ptc-playbook's state.) Runs with Debian's python3, python3-lxml and python3-yaml: nothing else
from ptc's virtualenv.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from elastic import node_paths
from elastic.errors import PtcError, TestbedError
from elastic.profile import rspec
from elastic.profile.topology import Topology
from elastic.testbed.backends.local import DOMAIN as LOCAL_DOMAIN
from elastic.testbed.inventory import Reach, build_inventory

DEFAULT_KEY = Path(node_paths.MESH_KEY)


def testbed_of(manifest: Topology) -> str:
    """``local`` for the local testbed's manifests, else ``cloudlab``."""
    managers = {n.component_manager_id or "" for n in manifest.nodes}
    return "local" if any(f"+{LOCAL_DOMAIN}+" in m for m in managers) else "cloudlab"


def manifest_from_geni_get() -> bytes:
    try:
        proc = subprocess.run(
            ["geni-get", "manifest"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise TestbedError(f"geni-get manifest failed: {err}") from err
    if proc.returncode != 0 or not proc.stdout.strip():
        raise TestbedError(
            f"geni-get manifest failed (exit {proc.returncode}): "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout


def write(out: Path, manifest_xml: bytes, key: Path = DEFAULT_KEY) -> Path:
    """Write hosts.yml, ssh_config and group_vars under ``out``; return hosts.yml."""
    manifest = rspec.parse_manifest(manifest_xml)
    return build_inventory(manifest, out, key, testbed_of(manifest), Reach.LAN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="inventory directory")
    parser.add_argument("--key", type=Path, default=DEFAULT_KEY, help="SSH key of the mesh")
    parser.add_argument("--manifest", type=Path, help="manifest file (default: geni-get)")
    args = parser.parse_args(argv)
    try:
        xml = args.manifest.read_bytes() if args.manifest else manifest_from_geni_get()
        print(write(args.out, xml, args.key))
    except (PtcError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return getattr(err, "exit_code", 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
