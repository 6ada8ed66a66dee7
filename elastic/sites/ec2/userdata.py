"""The user data that makes a fresh instance a node of a Slurm cluster: a shell script, which
cloud-init runs once at first boot.

It sets the hostname to the node's name, makes the cluster's user (``user``: the same name,
uid and gid as on every node, so files on the shares are theirs), mounts the cluster's NFS
``shares`` (a path something mounted already, as the local testbed does for its machines, is
left as it is), fetches the cluster's munge key and ``slurm.conf`` and starts munge and slurmd. The key is fetched, never written into the script: user data is not a
secret store. Anyone allowed ``ec2:DescribeInstanceAttribute`` on the account reads it, every
process on the instance can read it from the metadata service, cloud-init keeps a copy on disk,
and an Auto Scaling group's launch template keeps it for as long as it lives. So the parameters
are *where* the node gets each file: an ``s3://`` object read with the instance's own role
(the usual way: nothing to leak), an ``https://`` URL, or an absolute path on the image (or on
a volume the image mounts). A URL with credentials or a query string (a presigned URL is a
bearer secret that would sit in the user data for anyone to replay) is refused, naming the
parameter.

Two forms need no copy of anything on the image or in a bucket:

- ``conf_server``: Slurm's configless mode (``SlurmctldParameters=enable_configless``):
  slurmd fetches its configuration from slurmctld (``slurmd --conf-server HOST:PORT``), so no
  ``slurm.conf`` is fetched;
- ``key_token``: the munge key comes from the controller's join endpoint (an ``https://`` URL
  verified against ``ca_pem``, the cluster's CA certificate, which is public), against a token
  bound to this node, good once and for a short while (``elastic.slurm.join``). The token is the
  one secret in the script, and it is spent at first boot; it reaches curl on its standard
  input, never on a command line.
"""

from __future__ import annotations

import re
import shlex
import string
from dataclasses import dataclass
from urllib.parse import urlsplit

from elastic.errors import InputError
from elastic.sites import notice

# EC2 refuses user data over 16 KiB (before base64).
MAX_BYTES = 16 * 1024
CONF_SERVER = re.compile(r"^[A-Za-z0-9.-]+(:\d{1,5})?$")
TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
SERVER = re.compile(r"^[A-Za-z0-9.:-]+$")
PATH = re.compile(r"^(/[A-Za-z0-9._-]+)+$")
MOUNT_OPTIONS = re.compile(r"^[A-Za-z0-9_=,.-]+$")
SHARE_OPTIONS = "nodev,nosuid"  # a share's mount options unless it names its own


@dataclass(frozen=True)
class ClusterUser:
    """The user jobs run as, with the ids every node gives it."""

    name: str
    uid: int
    gid: int
    home: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not USER_NAME.match(self.name):
            raise InputError(f"user.name: {self.name!r} is not a user name")
        for field_name in ("uid", "gid"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
                raise InputError(f"user.{field_name}: {value!r} is not an id from 1")
        if not isinstance(self.home, str) or not PATH.match(self.home):
            raise InputError(f"user.home: {self.home!r} is not an absolute path")


@dataclass(frozen=True)
class Share:
    """An NFS export the node mounts at the same ``path`` (``server:path``)."""

    server: str
    path: str
    options: str = SHARE_OPTIONS

    def __post_init__(self) -> None:
        if not isinstance(self.server, str) or not SERVER.match(self.server):
            raise InputError(f"shares: server {self.server!r} is not a host name or address")
        if not isinstance(self.path, str) or not PATH.match(self.path):
            raise InputError(f"shares: path {self.path!r} is not an absolute path")
        if not isinstance(self.options, str) or not MOUNT_OPTIONS.match(self.options):
            raise InputError(f"shares: options {self.options!r} are not mount options")


class _Template(string.Template):
    delimiter = "@@"  # the shell's own `$` stays the shell's


SCRIPT = _Template(
    r"""#!/bin/bash
# ptc: make this instance a node of Slurm cluster @@cluster_text, site @@site_text.
# This script holds no secret: it says where the munge key is, and the node fetches it.
set -euo pipefail
umask 077

cluster=@@cluster
site=@@site
node=@@node
munge_key=@@munge_key
slurm_conf=@@slurm_conf
dynamic=@@dynamic
conf_server=@@conf_server
key_token=@@key_token
ca=
if [ -n @@ca_given ]; then
  ca=/etc/ptc-join-ca.crt
  cat > "$ca" <<'PTC_CA'
@@ca_pem
PTC_CA
fi

imds() {  # instance metadata, IMDSv2 (a session token first)
  local token
  token=$(curl -fsS -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' \
    http://169.254.169.254/latest/api/token)
  curl -fsS -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}

fetch() {  # fetch SOURCE DEST MODE OWNER [TOKEN]: in place at once, never half-written or world-readable
  local source=$1 dest=$2 tmp
  tmp=$(mktemp "$dest.XXXXXX")
  case "$source" in
    s3://*) aws s3 cp --only-show-errors "$source" "$tmp" ;;
    https://*)
      if [ -n "$5" ]; then  # a join token: on curl's standard input, never its command line
        printf 'header = "Authorization: Bearer %s"\n' "$5" |
          curl -fsS --retry 5 --retry-connrefused ${ca:+--cacert "$ca"} -K - -o "$tmp" "$source"
      else
        curl -fsS --retry 5 --retry-connrefused ${ca:+--cacert "$ca"} -o "$tmp" "$source"
      fi ;;
    /*) cp "$source" "$tmp" ;;
    *) echo "ptc: cannot fetch $source" >&2; rm -f "$tmp"; exit 1 ;;
  esac
  chmod "$3" "$tmp"
  chown "$4" "$tmp"
  mv -f "$tmp" "$dest"
}

# An Auto Scaling group's instances share one user data: each names itself from its id.
if [ -z "$node" ]; then
  node="$cluster-$(imds instance-id)"
fi
hostnamectl set-hostname "$node"
# cloud-init would set the image's hostname again at the next boot.
install -d -m 0755 /etc/cloud/cloud.cfg.d
echo 'preserve_hostname: true' > /etc/cloud/cloud.cfg.d/99-ptc-hostname.cfg

# The cluster's user, with the ids every node gives it: the shares' files are theirs.
if [ -n @@user ]; then
  getent group @@user >/dev/null || groupadd -g @@gid @@user
  id -u @@user >/dev/null 2>&1 || useradd -u @@uid -g @@gid -d @@home -M -s /bin/bash @@user
fi
# The shares, from the cluster's NFS server; a path something mounted already is left alone.
share() {  # share SERVER PATH OPTIONS
  mountpoint -q "$2" && return 0
  install -d -m 0755 "$2"
  mount -t nfs -o "$3" "$1:$2" "$2"
}
@@shares

install -d -m 0700 -o munge -g munge /etc/munge
fetch "$munge_key" /etc/munge/munge.key 0400 munge:munge "$key_token"
key_token=
install -d -m 0755 /etc/slurm
options=
if [ -n "$conf_server" ]; then
  # configless: slurmd fetches its configuration from slurmctld. Debian's unit starts slurmd
  # only where /etc/slurm/slurm.conf exists, which configless never writes: the condition goes.
  # -b reports the boot as now: Slurm 22.05 takes a resumed node only with a boot after the
  # resume request, and a machine that shares its kernel (a container) booted long before.
  options="--conf-server $conf_server -b"
  install -d -m 0755 /etc/systemd/system/slurmd.service.d
  printf '[Unit]\nConditionPathExists=\n' > /etc/systemd/system/slurmd.service.d/ptc-configless.conf
  # (readable by all, as systemd wants its units, despite the umask above)
  chmod 0644 /etc/systemd/system/slurmd.service.d/ptc-configless.conf
  systemctl daemon-reload
else
  fetch "$slurm_conf" /etc/slurm/slurm.conf 0644 root:root
fi
if [ "$dynamic" = yes ]; then
  # A dynamic node registers itself with slurmctld; the site is a feature jobs can ask for.
  options="$options -Z --conf 'Feature=$site'"
fi
if [ -n "$options" ]; then
  echo "SLURMD_OPTIONS=\"${options# }\"" > /etc/default/slurmd
fi
systemctl restart munge
systemctl enable slurmd
systemctl restart slurmd

# A spot instance hears of its interruption only from its metadata service (two minutes ahead).
# A watcher drains the node then, the provider's time in the reason, and the controller turns
# that into a reclamation, so the node's jobs are requeued before the end. An Auto Scaling
# group gives its on-demand and spot instances one user data: every instance watches (the key
# never shows on an on-demand one).
cat > /usr/local/sbin/ptc-notice-watch <<'PTC_WATCH'
#!/bin/sh
# ptc-notice-watch NODE: drain NODE once the metadata service gives notice of its end.
while sleep 5; do
  token=$(curl -fsS -m 2 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' \
    http://169.254.169.254/latest/api/token) || continue
  action=$(curl -fsS -m 2 -H "X-aws-ec2-metadata-token: $token" \
    http://169.254.169.254/latest/meta-data/spot/instance-action) || continue
  what=$(printf '%s' "$action" | sed -n 's/.*"action" *: *"\([a-z]*\)".*/\1/p')
  when=$(printf '%s' "$action" | sed -n 's/.*"time" *: *"\([0-9T:-]*Z\)".*/\1/p')
  [ -n "$what" ] && [ -n "$when" ] || continue
  scontrol update NodeName="$1" State=DRAIN Reason="@@{notice_prefix}ec2 spot $what at $when" &&
    exit 0
done
PTC_WATCH
chmod 0755 /usr/local/sbin/ptc-notice-watch
cat > /etc/systemd/system/ptc-notice-watch.service <<PTC_UNIT
[Unit]
Description=ptc: drain this node when its provider gives notice of its end
After=slurmd.service

[Service]
ExecStart=/usr/local/sbin/ptc-notice-watch $node
Restart=on-failure

[Install]
WantedBy=multi-user.target
PTC_UNIT
chmod 0644 /etc/systemd/system/ptc-notice-watch.service
systemctl daemon-reload
systemctl enable --now ptc-notice-watch
"""
)


@dataclass(frozen=True)
class JoinSpec:
    """Where a new node finds what it needs to join the cluster: each an ``s3://bucket/key``
    (read with the instance's role), an ``https://`` URL, or an absolute path on the image.
    ``dynamic``: the node registers itself with slurmctld (``slurmd -Z``), with its site as a
    feature, instead of being listed in ``slurm.conf``."""

    munge_key: str
    slurm_conf: str
    dynamic: bool = True
    # configless: slurmd's configuration from slurmctld at HOST:PORT (no slurm_conf fetched)
    conf_server: str | None = None
    # the munge key from the controller's join endpoint: this node's one-use token, and the CA
    # certificate (PEM, public) the endpoint's certificate verifies to
    key_token: str | None = None
    ca_pem: str | None = None
    # what every node has besides Slurm: the cluster's user, and the shares it mounts
    user: ClusterUser | None = None
    shares: tuple[Share, ...] = ()

    def __post_init__(self) -> None:
        _check_source(self.munge_key, "munge_key")
        if self.conf_server is None:
            _check_source(self.slurm_conf, "slurm_conf")
        elif not CONF_SERVER.match(self.conf_server):
            raise InputError(f"conf_server: {self.conf_server!r} is not HOST or HOST:PORT")
        if self.key_token is not None:
            if not TOKEN.match(self.key_token):
                raise InputError("key_token: not a token of letters, digits, - and _")
            if not self.munge_key.startswith("https://"):
                raise InputError("key_token: the munge key must then come from an https:// URL")
        if self.ca_pem is not None and not (
            self.ca_pem.startswith("-----BEGIN CERTIFICATE-----")
            and "PRIVATE" not in self.ca_pem
            and "PTC_CA" not in self.ca_pem
        ):
            raise InputError("ca_pem: not a PEM certificate (and nothing else)")

    def render(self, cluster: str, site: str, node: str | None = None) -> str:
        """The script for a node of ``cluster`` at ``site`` called ``node`` (``None``: the
        instance names itself from its instance id, as a group's instances do)."""
        script = SCRIPT.substitute(
            cluster_text=_comment(cluster),
            site_text=_comment(site),
            cluster=shlex.quote(cluster),
            site=shlex.quote(site),
            node=shlex.quote(node or ""),
            munge_key=shlex.quote(self.munge_key),
            slurm_conf=shlex.quote(self.slurm_conf),
            dynamic="yes" if self.dynamic else "no",
            conf_server=shlex.quote(self.conf_server or ""),
            key_token=shlex.quote(self.key_token or ""),
            ca_given=shlex.quote("yes" if self.ca_pem else ""),
            ca_pem=(self.ca_pem or "").strip(),
            user=shlex.quote(self.user.name if self.user else ""),
            uid=self.user.uid if self.user else 0,
            gid=self.user.gid if self.user else 0,
            home=shlex.quote(self.user.home if self.user else "/"),
            notice_prefix=notice.PREFIX,  # a constant, safe in the double quotes
            shares="\n".join(
                f"share {shlex.quote(s.server)} {shlex.quote(s.path)} {shlex.quote(s.options)}"
                for s in self.shares
            ),
        )
        if len(script.encode()) > MAX_BYTES:
            raise InputError(f"user data: {len(script.encode())} bytes, EC2 takes {MAX_BYTES}")
        return script


def _check_source(source: str, parameter: str) -> None:
    forms = "an s3:// object, an https:// URL or an absolute path on the image"
    if not isinstance(source, str) or not source:
        raise InputError(f"{parameter}: empty; give {forms}")
    if source.startswith("/"):
        if "\n" in source or "\0" in source:
            raise InputError(f"{parameter}: the path holds a newline or NUL")
        return
    parts = urlsplit(source)
    if parts.scheme not in ("s3", "https") or not parts.hostname or not parts.path.strip("/"):
        raise InputError(
            f"{parameter}: not {forms} (the value is not repeated here: one that is none of "
            "these may be the secret itself, which must not go into user data)"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise InputError(
            f"{parameter}: the URL carries credentials or a query (a presigned URL is a bearer "
            "secret, readable by anyone who can read the user data); use s3:// with the "
            "instance's role, or a URL that needs no secret"
        )


def _comment(text: str) -> str:
    """``text`` safe on one comment line, and never a long secret pasted by mistake."""
    flat = "".join(c if c.isprintable() else "?" for c in text)
    return flat if len(flat) <= 40 else flat[:37] + "..."
