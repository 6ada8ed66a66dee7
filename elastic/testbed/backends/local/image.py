"""The node images: Debian bookworm built locally with debootstrap, cached by a hash of the recipe.

No container registry is reachable, so the base image is bootstrapped from Debian's packages and
imported into podman. Two kinds of disk image come from one recipe:

- ``bare``: a fresh Debian install. The packages the cluster roles install (read from the roles'
  apt tasks, ``role_packages``) are downloaded into its apt cache, not installed, so `apt
  install` on a node is real but needs no network.
- ``prepared``: ``bare`` with those packages installed, as a site's custom disk image carries
  its software. The roles then find their packages present (``ptc_packages_installed``) and only
  configure. Nothing the packages would start runs at boot: every unit they enabled is disabled
  again, as the roles enable each service on the nodes it belongs to, and the per-machine
  secrets their install scripts made (the munge key, the snakeoil TLS key) are removed, so no
  two nodes share one through the image.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from elastic import paths
from elastic.errors import InputError, TestbedError
from elastic.events import OnEvent, Reporter
from elastic.testbed.backends.local import podman
from elastic.testbed.backends.local.role_packages import role_package_sets

OVERLAY = Path(__file__).with_name("overlay")
SUITE = "bookworm"
REPOSITORY = "localhost/ptc-node"

# What every node boots with: enough for systemd, SSH and Ansible.
BASE_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "python3",
    "python3-apt",
    "iproute2",
    "iputils-ping",
    "sudo",
    "ca-certificates",
    "procps",
    "netbase",
    "less",
    "gnupg",
    "curl",
    "ifupdown",
    "kmod",
    "util-linux",
)


# Bump when the build steps below change in a way the package lists and overlay do not show.
RECIPE_VERSION = "1"
PREPARE_VERSION = "1"

BARE = "bare"
PREPARED = "prepared"
KINDS = (PREPARED, BARE)
DEFAULT_KIND = PREPARED

# Run inside a container of the bare image with no network: the packages come from its cache.
# Install scripts must not start services (policy-rc.d refuses), and the units they enable are
# disabled again: every symlink they added under /etc/systemd/system goes (*.wants/ and
# *.requires/ entries, and the aliases `systemctl enable` makes), but not a mask (-> /dev/null).
_PREPARE_SCRIPT = r"""
set -eu
export DEBIAN_FRONTEND=noninteractive
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
find /etc/systemd/system -type l | sort > /tmp/ptc-units.before
if [ -n "$PTC_PLAIN" ]; then
  apt-get install -y -q --no-download --no-install-recommends $PTC_PLAIN
fi
apt-get install -y -q --no-download $PTC_PACKAGES
find /etc/systemd/system -type l | sort > /tmp/ptc-units.after
comm -13 /tmp/ptc-units.before /tmp/ptc-units.after | while read -r link; do
  [ "$(readlink "$link")" = /dev/null ] && continue
  echo "disabled at boot: $link"; rm -f "$link"
done
rm -f /usr/sbin/policy-rc.d /tmp/ptc-units.before /tmp/ptc-units.after
rm -f /etc/munge/munge.key /etc/ssl/private/ssl-cert-snakeoil.key /etc/ssl/certs/ssl-cert-snakeoil.pem
"""


@dataclass(frozen=True)
class Recipe:
    mirror: str
    base: tuple[str, ...] = BASE_PACKAGES
    # The roles' packages, as they install them: with their Recommends, and without.
    recommended: tuple[str, ...] = ()
    plain: tuple[str, ...] = ()

    @property
    def cached(self) -> tuple[str, ...]:
        """Downloaded only into the bare image: the roles install these on a fresh node."""
        return tuple(sorted({*self.recommended, *self.plain}))

    def digest(self) -> str:
        h = hashlib.sha256()
        for part in (RECIPE_VERSION, SUITE, self.mirror, *self.base, "|", *self.cached):
            h.update(part.encode() + b"\0")
        for path in sorted(OVERLAY.rglob("*")):
            if path.is_file():
                h.update(str(path.relative_to(OVERLAY)).encode() + b"\0")
                h.update(path.read_bytes())
        return h.hexdigest()[:12]

    @property
    def ref(self) -> str:
        return f"{REPOSITORY}:{self.digest()}"

    @property
    def prepared_ref(self) -> str:
        h = hashlib.sha256(f"{self.digest()}|{PREPARE_VERSION}|{_PREPARE_SCRIPT}".encode())
        h.update("|".join(self.plain).encode())
        return f"{REPOSITORY}:{self.digest()}-{PREPARED}-{h.hexdigest()[:6]}"

    def ref_of(self, kind: str) -> str:
        check_kind(kind)
        return self.prepared_ref if kind == PREPARED else self.ref


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise InputError(f"image: {kind!r} is not a local disk image (choose {' or '.join(KINDS)})")


def default_recipe() -> Recipe:
    recommended, plain = role_package_sets(paths.REPO_ROOT / "roles")
    return Recipe(
        mirror=os.environ.get("PTC_DEBIAN_MIRROR", "http://deb.debian.org/debian"),
        recommended=recommended,
        plain=plain,
    )


def ensure(recipe: Recipe | None = None, on_event: OnEvent | None = None, kind: str = BARE) -> str:
    """Return the reference of the recipe's image of this kind, building what is not cached."""
    recipe = recipe or default_recipe()
    check_kind(kind)
    if not podman.image_exists(recipe.ref):
        build(recipe, on_event)
    if kind == PREPARED and not podman.image_exists(recipe.prepared_ref):
        build_prepared(recipe, on_event)
    return recipe.ref_of(kind)


def build(recipe: Recipe, on_event: OnEvent | None = None) -> None:
    report = Reporter("image", on_event)
    cache = paths.image_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"rootfs-{recipe.digest()}-", dir=cache))
    report.begin(f"building {recipe.ref}")
    try:

        def step(desc: str, cmd: list[str]) -> None:
            report.status(desc)
            _stream(cmd, lambda line: report.status(f"{desc}: {line[:60]}"))

        step(
            "debootstrap",
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(recipe.base)}",
                SUITE,
                str(root),
                recipe.mirror,
            ],
        )
        _customise(root, recipe)
        step("apt-get update", ["chroot", str(root), "apt-get", "update", "-q"])
        step(
            "caching role packages",
            [
                "chroot",
                str(root),
                "apt-get",
                "install",
                "-y",
                "-q",
                "--download-only",
                *recipe.cached,
            ],
        )
        report.status("importing into podman")
        _import(root, recipe)
        report.end(f"built {recipe.ref}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _prune_old(recipe)


def build_prepared(recipe: Recipe, on_event: OnEvent | None = None) -> None:
    """Install the roles' packages into a container of the bare image and commit it."""
    report = Reporter("image", on_event)
    ref = recipe.prepared_ref
    name = f"ptc-image-{recipe.digest()}-prepare"
    report.begin(f"building {ref}")
    podman.run("rm", "--force", name, check=False)  # left by an interrupted build
    cmd = [
        "podman", "run", "--name", name, "--network", "none",
        "--env", f"PTC_PLAIN={' '.join(recipe.plain)}",
        "--env", f"PTC_PACKAGES={' '.join(recipe.recommended)}",
        recipe.ref, "/bin/sh", "-c", _PREPARE_SCRIPT,
    ]  # fmt: skip
    try:
        _stream(cmd, lambda line: report.status(f"installing the roles' packages: {line[:60]}"))
        report.status("committing")
        podman.run(
            "commit", "--change", 'CMD ["/sbin/init"]', "--change", "STOPSIGNAL=SIGRTMIN+3",
            name, ref,
        )  # fmt: skip
    finally:
        podman.run("rm", "--force", name, check=False)
    report.end(f"built {ref}")
    _prune_old(recipe)


def _customise(root: Path, recipe: Recipe) -> None:
    shutil.copytree(OVERLAY, root, dirs_exist_ok=True, symlinks=True)
    (root / "etc/apt/sources.list").write_text(
        f"deb {recipe.mirror} {SUITE} main\n"
        f"deb {recipe.mirror} {SUITE}-updates main\n"
        f"deb {recipe.mirror.replace('/debian', '/debian-security')} {SUITE}-security main\n"
    )
    # Keep downloaded .debs: Debian's container images delete them, we rely on them.
    (root / "etc/apt/apt.conf.d/99ptc-keep-cache").write_text(
        'Binary::apt::APT::Keep-Downloaded-Packages "true";\n'
    )
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()  # every node generates its own at first boot
    (root / "etc/machine-id").write_text("")
    (root / "etc/hostname").write_text("localhost\n")
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit in ("ptc-geni-execute.path", "ptc-ssh-hostkeys.service"):
        link = wants / unit
        if not link.exists():
            link.symlink_to(f"/etc/systemd/system/{unit}")
    # Units that cannot work in a container only add noise and a degraded state.
    for unit in ("systemd-timesyncd.service", "getty@tty1.service", "console-getty.service"):
        (root / "etc/systemd/system" / unit).unlink(missing_ok=True)
        (root / "etc/systemd/system" / unit).symlink_to("/dev/null")


def _import(root: Path, recipe: Recipe) -> None:
    tar = subprocess.Popen(
        ["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE
    )
    proc = subprocess.run(
        [
            "podman",
            "import",
            "--change",
            'CMD ["/sbin/init"]',
            "--change",
            "STOPSIGNAL=SIGRTMIN+3",
            "-",
            recipe.ref,
        ],
        stdin=tar.stdout,
        env=podman.env(),
        capture_output=True,
        text=True,
    )
    tar.wait()
    if proc.returncode != 0 or tar.returncode != 0:
        raise TestbedError(f"importing the node image failed: {proc.stderr.strip()}")


def _prune_old(recipe: Recipe) -> None:
    """Images of older recipes are dead weight once a new one is built."""
    proc = podman.run("images", "--format", "{{.Repository}}:{{.Tag}}", REPOSITORY, check=False)
    # A prepared image is a layer over its bare one: remove it first, or the bare one stays.
    for ref in sorted(proc.stdout.split(), key=lambda r: f"-{PREPARED}-" not in r):
        if ref not in (recipe.ref, recipe.prepared_ref) and ref.startswith(REPOSITORY):
            podman.run("rmi", ref, check=False)


def _stream(cmd: list[str], on_line: object) -> None:
    log: list[str] = []
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=podman.env()
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            log.append(line)
            if line and callable(on_line):
                on_line(line)
    if proc.returncode != 0:
        tail = "\n".join(log[-15:])
        raise TestbedError(
            f"node image build step `{' '.join(cmd[:3])}` failed ({proc.returncode}):\n{tail}"
        )
