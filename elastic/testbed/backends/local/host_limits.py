"""Host kernel limits the local testbed needs raised before it starts systemd-booted nodes.

Every node's systemd holds several inotify instances (journald, logind, udev, the units' path
watches), all counted against root on the host. Debian's default of 128 runs out at about twenty
nodes, and podman then reports only "exit 255" with no log, so the limit is checked, and raised,
before any node starts. The change is the same one container hosts make (it is not persistent;
`ptc up` makes it again after a reboot).
"""

from __future__ import annotations

from pathlib import Path

from elastic.errors import TestbedError
from elastic.events import Reporter

INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
NEEDED_INSTANCES = 1024


def ensure_inotify_instances(
    report: Reporter, path: Path = INOTIFY_INSTANCES, needed: int = NEEDED_INSTANCES
) -> None:
    """Raise ``fs.inotify.max_user_instances`` to ``needed`` if it is lower; say so."""
    try:
        current = int(path.read_text().strip())
    except (OSError, ValueError) as err:
        raise TestbedError(f"cannot read {path}: {err}") from err
    if current >= needed:
        return
    try:
        path.write_text(f"{needed}\n")
    except OSError as err:
        raise TestbedError(
            f"fs.inotify.max_user_instances is {current}, too few for systemd-booted nodes, "
            f"and raising it to {needed} failed ({err}): run `sysctl -w "
            f"fs.inotify.max_user_instances={needed}` as root"
        ) from err
    report.status(
        f"raised fs.inotify.max_user_instances from {current} to {needed} "
        "(each node's systemd holds several)"
    )
