"""The node image: Debian bookworm built locally with debootstrap, cached by a hash of its recipe.

No container registry is reachable, so the base image is bootstrapped from Debian's packages and
imported into podman. The packages the cluster roles install (read from the roles' apt tasks,
``role_packages``) are downloaded into the image's apt cache (not installed), so `apt install`
on a node is real but needs no network and is fast.
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
from elastic.errors import TestbedError
from elastic.events import OnEvent, Reporter
from elastic.testbed.backends.local import podman
from elastic.testbed.backends.local.role_packages import role_packages

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


@dataclass(frozen=True)
class Recipe:
    mirror: str
    base: tuple[str, ...] = BASE_PACKAGES
    # Downloaded only: the roles install these, as they would on a fresh testbed node.
    cached: tuple[str, ...] = ()

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


def default_recipe() -> Recipe:
    return Recipe(
        mirror=os.environ.get("PTC_DEBIAN_MIRROR", "http://deb.debian.org/debian"),
        cached=role_packages(paths.REPO_ROOT / "roles"),
    )


def ensure(recipe: Recipe | None = None, on_event: OnEvent | None = None) -> str:
    """Return the image reference for the recipe, building it first if it is not cached."""
    recipe = recipe or default_recipe()
    if podman.image_exists(recipe.ref):
        return recipe.ref
    build(recipe, on_event)
    return recipe.ref


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
    for ref in proc.stdout.split():
        if ref != recipe.ref and ref.startswith(REPOSITORY):
            podman.run("rmi", ref, check=False)


def _stream(cmd: list[str], on_line: object) -> None:
    log: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
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
