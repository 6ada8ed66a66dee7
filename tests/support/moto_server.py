"""moto's server, a local fake of AWS (EC2, Auto Scaling, S3, ...), on a loopback port.

Tests that talk to "AWS" start one in a fixture and point boto3's ``endpoint_url`` at it; no
request leaves the machine. The server is moto's own ``moto_server`` command, from the same
virtualenv as the running Python.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Fake credentials for the fake: boto3 signs every request, and moto accepts any signature.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_server(
    log_path: Path, warm: tuple[str, ...] = (), ready_within_s: float = 30
) -> Iterator[str]:
    """Run ``moto_server`` on 127.0.0.1 for the ``with`` block; yields its URL. Its output goes
    to ``log_path``. Stops it (and waits for it) on the way out. ``warm``: services to load
    before yielding (moto imports a service's models at its first request, EC2's in seconds),
    so that the time falls in the fixture's setup rather than in the first test."""
    server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
    if server is None:
        raise RuntimeError("moto_server is missing: pip install 'moto[server]' (make setup)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [server, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
        )
        try:
            _wait_ready(url, proc, ready_within_s)
            for service in warm:
                _warm(url, service)
            yield url
        finally:
            # Killed, not asked: the fake keeps nothing worth a clean exit, and its interpreter
            # takes seconds to unwind moto's modules.
            proc.kill()
            proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with status {proc.returncode} at start")
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"moto_server did not answer at {url} within {within_s:.0f}s")


def _warm(url: str, service: str) -> None:
    """One cheap call to ``service`` (``ec2``, ``autoscaling``, else S3), with the fake's own
    credentials, so moto loads it."""
    import boto3

    session = boto3.session.Session(
        region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    if service == "ec2":
        session.client("ec2", endpoint_url=url).describe_regions()
    elif service == "autoscaling":
        session.client("autoscaling", endpoint_url=url).describe_auto_scaling_groups()
    else:
        session.client("s3", endpoint_url=url).list_buckets()
