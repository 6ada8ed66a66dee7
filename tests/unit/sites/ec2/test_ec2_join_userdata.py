"""User data for a node that joins without a copy of anything: slurmd configless from slurmctld,
the munge key from the controller's join endpoint against a one-use token, which reaches curl
on its standard input and never its command line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from elastic.errors import InputError
from elastic.sites import notice
from elastic.sites.ec2.userdata import ClusterUser, JoinSpec, Share

CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
TOKEN = "t0k3n-" + "x" * 30
URL = "https://10.10.1.1:8701/v1/join/ec2-0/munge.key"


def spec(**changed: object) -> JoinSpec:
    fields: dict[str, object] = {
        "munge_key": URL,
        "slurm_conf": "",
        "dynamic": False,
        "conf_server": "10.10.1.1:6817",
        "key_token": TOKEN,
        "ca_pem": CA,
    }
    return JoinSpec(**{**fields, **changed})  # type: ignore[arg-type]


def test_configless_starts_slurmd_from_the_controller_and_fetches_no_slurm_conf() -> None:
    script = spec().render("ptc", "cloud", "ec2-0")
    assert "conf_server=10.10.1.1:6817\n" in script
    assert 'options="--conf-server $conf_server -b"' in script
    assert "ConditionPathExists=\\n" in script  # Debian's unit would skip a configless slurmd
    assert f"key_token={TOKEN}\n" in script
    assert CA.strip() in script
    parsed = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert parsed.returncode == 0, parsed.stderr


@pytest.mark.parametrize(
    ("changed", "why"),
    [
        ({"conf_server": None}, r"^slurm_conf: empty"),
        ({"conf_server": "head;reboot"}, r"^conf_server: 'head;reboot'"),
        ({"key_token": "short"}, r"^key_token: not a token"),
        ({"munge_key": "/etc/munge/munge.key"}, r"^key_token: the munge key must then come"),
        ({"ca_pem": "-----BEGIN PRIVATE KEY-----\nx"}, r"^ca_pem: not a PEM certificate"),
        ({"ca_pem": CA + "-----BEGIN RSA PRIVATE KEY-----\n"}, r"^ca_pem: not a PEM"),
    ],
)
def test_a_bad_join_is_refused_naming_the_field(changed: dict[str, object], why: str) -> None:
    with pytest.raises(InputError, match=why):
        spec(**changed)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_the_token_goes_to_curl_on_its_input_and_the_ca_verifies_the_endpoint(
    tmp_path: Path,
) -> None:
    """The script's own fetch function, run with a stand-in curl that records what it got."""
    script = spec().render("ptc", "cloud", "ec2-0")
    start = script.index("fetch() {")
    function = script[start : script.index("\n}\n", start) + 3]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    curl = bin_dir / "curl"
    curl.write_text(
        "#!/bin/bash\n"
        f'echo "$@" > {tmp_path}/argv\n'
        f"cat > {tmp_path}/stdin\n"
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && { echo key > "$2"; }; shift; done\n'
    )
    curl.chmod(0o755)
    dest = tmp_path / "munge.key"
    owner = f"{os.getuid()}:{os.getgid()}"
    body = (
        f"set -euo pipefail\nca={tmp_path}/ca.crt\n{function}\n"
        f'fetch {URL} {dest} 0400 {owner} "{TOKEN}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", body],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    argv = (tmp_path / "argv").read_text()
    assert TOKEN not in argv
    assert f"--cacert {tmp_path}/ca.crt" in argv and "-K -" in argv and URL in argv
    assert (tmp_path / "stdin").read_text() == f'header = "Authorization: Bearer {TOKEN}"\n'
    assert dest.read_text() == "key\n" and oct(dest.stat().st_mode & 0o777) == "0o400"


def test_the_instance_gets_the_cluster_s_user_and_mounts_its_shares_unless_mounted(
    tmp_path: Path,
) -> None:
    """The user with the nodes' ids, made once; each share NFS-mounted from the server, a path
    mounted already left alone. Run with stand-ins that record what they were asked."""
    script = spec(
        user=ClusterUser("ptc", 2000, 2000, "/home/ptc"),
        shares=(Share("nfs.example", "/home"), Share("10.0.0.5", "/opt/ptc", "nodev,ro")),
    ).render("ptc", "cloud", "ec2-0")
    start = script.index("# The cluster's user")
    part = script[start : script.index("install -d -m 0700 -o munge", start)]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, rc in (("getent", 2), ("id", 1), ("groupadd", 0), ("useradd", 0), ("mount", 0),
                     ("install", 0)):  # fmt: skip
        (bin_dir / tool).write_text(
            f'#!/bin/bash\necho "{tool} $*" >> {tmp_path}/asked\nexit {rc}\n'
        )
        (bin_dir / tool).chmod(0o755)
    # /home is mounted already (as the local testbed's machines have it), /opt/ptc is not
    (bin_dir / "mountpoint").write_text('#!/bin/bash\n[ "$2" = /home ]\n')
    (bin_dir / "mountpoint").chmod(0o755)
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{part}"],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    asked = (tmp_path / "asked").read_text().splitlines()
    assert "groupadd -g 2000 ptc" in asked
    assert "useradd -u 2000 -g 2000 -d /home/ptc -M -s /bin/bash ptc" in asked
    mounts = [line for line in asked if line.startswith("mount ")]
    assert mounts == ["mount -t nfs -o nodev,ro 10.0.0.5:/opt/ptc /opt/ptc"]


@pytest.mark.parametrize(
    ("made", "why"),
    [
        (lambda: ClusterUser("Bad Name", 2000, 2000, "/home/x"), r"^user.name: 'Bad Name'"),
        (lambda: ClusterUser("ptc", 0, 2000, "/home/ptc"), r"^user.uid: 0 is not an id"),
        (lambda: ClusterUser("ptc", 2000, 2000, "home"), r"^user.home: 'home'"),
        (lambda: Share("nfs;reboot", "/home"), r"^shares: server 'nfs;reboot'"),
        (lambda: Share("nfs", "/home dir"), r"^shares: path '/home dir'"),
        (lambda: Share("nfs", "/home", "rw;x"), r"^shares: options 'rw;x'"),
    ],
)
def test_a_bad_user_or_share_is_refused_naming_the_field(made: Any, why: str) -> None:
    with pytest.raises(InputError, match=why):
        made()


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
@pytest.mark.parametrize("notice_shown_after", [0, 2])
def test_the_notice_watcher_drains_the_node_with_a_reason_the_controller_reads(
    tmp_path: Path, notice_shown_after: int
) -> None:
    """The watcher the user data installs, run with stand-ins for the metadata service (after
    ``notice_shown_after`` polls with no notice: 404) and scontrol: it drains its own node
    once, with a reason that elastic.sites.notice reads back as the provider's deadline."""
    script = spec().render("ptc", "cloud", "ec2-0")
    start = script.index("<<'PTC_WATCH'\n") + len("<<'PTC_WATCH'\n")
    watcher = tmp_path / "ptc-notice-watch"
    watcher.write_text(script[start : script.index("\nPTC_WATCH\n", start) + 1])
    watcher.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "polls").write_text("")
    tools = {
        "sleep": "exit 0",
        # IMDSv2: a token for the PUT; the key only with that token, and only after some polls
        "curl": (
            'case "$*" in\n'
            "  *'-X PUT'*api/token*) echo tok3n ;;\n"
            "  *'X-aws-ec2-metadata-token: tok3n'*spot/instance-action*)\n"
            f"    echo poll >> {tmp_path}/polls\n"
            f"    [ $(wc -l < {tmp_path}/polls) -gt {notice_shown_after} ] || exit 22\n"
            '    echo \'{"action": "terminate", "time": "2027-01-15T08:02:00Z"}\' ;;\n'
            "  *) exit 22 ;;\n"
            "esac"
        ),
        "scontrol": f'printf "%s\\n" "$@" > {tmp_path}/scontrol',
    }
    for tool, body in tools.items():
        (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / tool).chmod(0o755)
    done = subprocess.run(
        [str(watcher), "ec2-0"],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    argv = (tmp_path / "scontrol").read_text().splitlines()
    assert argv[:3] == ["update", "NodeName=ec2-0", "State=DRAIN"]
    assert len((tmp_path / "polls").read_text().splitlines()) == notice_shown_after + 1
    told = notice.parse(argv[3].removeprefix("Reason="))
    assert told == notice.Notice("ec2 spot terminate", 1_800_000_120.0)
