"""Signature Version 4, checked as AWS checks it, for the FAKE EC2 region.

moto accepts any credentials, so a region that lets every caller in would let any user of the
head (a job's user, say) launch and end instances. The region's key pair is root-only where the
head reads it; a request signed with another key or secret is refused with EC2's answers
(``AuthFailure``, ``SignatureDoesNotMatch``) before moto sees it."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
Refusal = tuple[int, str, str]
UNKNOWN_KEY: Refusal = (
    401, "AuthFailure", "AWS was not able to validate the provided access credentials"
)  # fmt: skip
BAD_SIGNATURE: Refusal = (
    403, "SignatureDoesNotMatch",
    "The request signature we calculated does not match the signature you provided. Check "
    "your AWS Secret Access Key and signing method.",
)  # fmt: skip


def _parse(authorization: str) -> dict[str, str] | None:
    """``Credential``, ``SignedHeaders`` and ``Signature`` of an Authorization header."""
    algorithm, _, rest = authorization.partition(" ")
    if algorithm != ALGORITHM:
        return None
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, _, value = part.strip().partition("=")
        fields[key] = value
    if not {"Credential", "SignedHeaders", "Signature"} <= fields.keys():
        return None
    return fields


def _header(environ: Mapping[str, Any], name: str) -> str:
    key = name.upper().replace("-", "_")
    if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        return str(environ.get(key, ""))
    return str(environ.get(f"HTTP_{key}", ""))


def canonical_request(environ: Mapping[str, Any], signed: list[str], body: bytes) -> str:
    query = str(environ.get("QUERY_STRING", ""))
    pairs = sorted(p.partition("=")[::2] for p in query.split("&")) if query else []
    headers = "".join(f"{h}:{' '.join(_header(environ, h).split())}\n" for h in signed)
    payload = _header(environ, "x-amz-content-sha256") or hashlib.sha256(body).hexdigest()
    return "\n".join([
        str(environ.get("REQUEST_METHOD", "GET")).upper(),
        quote(str(environ.get("PATH_INFO", "/")) or "/", safe="/~"),
        "&".join(f"{k}={v}" for k, v in pairs),
        headers,
        ";".join(signed),
        payload,
    ])  # fmt: skip


def _key(secret: str, date: str, region: str, service: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def check(environ: Mapping[str, Any], body: bytes, secrets: Mapping[str, str]) -> Refusal | None:
    """None when the request is signed with one of ``secrets`` (key id -> secret access key),
    else EC2's refusal."""
    fields = _parse(_header(environ, "authorization"))
    if fields is None:
        return UNKNOWN_KEY
    scope = fields["Credential"].split("/")
    if len(scope) != 5 or scope[0] not in secrets:
        return UNKNOWN_KEY
    key_id, date, region, service, _ = scope
    signed = fields["SignedHeaders"].split(";")
    amz_date = _header(environ, "x-amz-date")
    to_sign = "\n".join([
        ALGORITHM, amz_date, "/".join(scope[1:]),
        hashlib.sha256(canonical_request(environ, signed, body).encode()).hexdigest(),
    ])  # fmt: skip
    expected = hmac.new(_key(secrets[key_id], date, region, service), to_sign.encode(),
                        hashlib.sha256).hexdigest()  # fmt: skip
    if "host" not in signed or not hmac.compare_digest(expected, fields["Signature"]):
        return BAD_SIGNATURE
    return None
