"""EC2 calls made on the head, as the Slurm hooks there make them: the head's own boto3, the
FAKE EC2 region's endpoint on the head's loopback and the credentials the region put where the
head reads them. The tests that use a fake region share these."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from elastic.remote import ssh as seam

ENDPOINT = "http://127.0.0.1:4566"
CREDENTIALS = "/run/ptc-testbed/fake-ec2-credentials"

# Run on the head: one EC2 call through boto3, its answer as JSON. argv: the call, its
# arguments as JSON. No retries: a refusal is seen as the first attempt's.
CALL = rf"""
import json, sys
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
call, args = sys.argv[1], json.loads(sys.argv[2])
ec2 = boto3.session.Session(region_name="us-east-1").client(
    "ec2", endpoint_url="{ENDPOINT}",
    config=Config(retries={{"mode": "standard", "total_max_attempts": 1}}))
try:
    answer = getattr(ec2, call)(**args)
except ClientError as err:
    answer = {{"Error": err.response["Error"]["Code"],
              "Status": err.response["ResponseMetadata"]["HTTPStatusCode"]}}
print(json.dumps(answer, default=str))
"""


def call(expdir: Path, method: str, **args: Any) -> Any:
    """``method`` of boto3's EC2 client with ``args``, on the head; its answer, or
    ``{"Error": CODE, "Status": HTTP_STATUS}`` when EC2 refused it."""
    done = seam.execute(
        expdir / "inventory" / "ssh_config",
        "head",
        f"AWS_SHARED_CREDENTIALS_FILE={CREDENTIALS} python3 - "
        f"{method} {shlex.quote(json.dumps(args))}",
        timeout=120,
        stdin=CALL.encode(),
    )
    assert done.returncode == 0, f"{method} on head: {done.error_text}"
    return json.loads(done.text)


def instances(expdir: Path, **tags: str) -> list[dict[str, Any]]:
    """The region's instances whose tags (``ptc:KEY``) are ``tags``, any state."""
    filters = [{"Name": f"tag:ptc:{key}", "Values": [value]} for key, value in tags.items()]
    answer = call(expdir, "describe_instances", Filters=filters)
    return [i for r in answer["Reservations"] for i in r["Instances"]]
