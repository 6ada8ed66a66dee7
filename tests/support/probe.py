"""How long a manager failover leaves clients without an answer, measured from a node.

Run on any node of the experiment with the system Python (standard library only; run it as a
file, ``python3 REPOSITORY/tests/support/probe.py``, with no virtualenv)::

    probe.py --urls https://10.10.1.201:8700,... --token-file FILE --duration 60
    probe.py --urls ... --health

The first form asks ``GET /v1/status`` every ``--interval`` seconds as a client would: the manager
that answered last first, then the next one when a manager does not answer within
``--timeout`` or answers 503 (the one a 503 names first); one that did not answer is asked again
only ``--recheck`` seconds later, as the client does. It prints one JSON document: every
attempt as ``[sent, answered, url, status]`` (wall-clock seconds; status is the HTTP status or
the error's name). :func:`failover` reads the time from a kill to the first answer served after
it. The second form prints each manager's ``/v1/health``. The token comes from ``--token-file``
or the first line of stdin; it is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any

# Copies of elastic.wire.ACTIVE_HEADER and elastic.node_paths.ELASTIC_CA: this file runs on a
# node's system Python without the elastic package, so it cannot import them;
# tests/unit/test_facts.py fails when a copy and its owner differ.
ACTIVE_HEADER = "X-Ptc-Active-Manager"
DEFAULT_CA = "/etc/ptc-elastic/tls/ca.crt"
Sample = list[Any]  # [sent, answered, url, status]


def _get(url: str, token: str | None, timeout: float) -> tuple[int | str, str | None, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, None, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        hint = err.headers.get(ACTIVE_HEADER)
        err.close()
        return err.code, hint, None
    except (OSError, ValueError) as err:
        reason = getattr(err, "reason", None)
        return type(reason if isinstance(reason, BaseException) else err).__name__, None, None


def probe(
    urls: list[str],
    token: str,
    duration: float,
    interval: float,
    timeout: float,
    recheck: float = 2.0,
) -> list[Sample]:
    order = list(urls)
    unreachable: dict[str, float] = {}  # url -> when it last did not answer
    samples: list[Sample] = []
    end = time.time() + duration
    while time.time() < end:
        tried: list[str] = []
        hint: str | None = None
        while True:
            now = time.time()
            rest = [u for u in order if u not in tried]
            # As the client does: a manager that did not answer is asked again within
            # ``recheck`` seconds only when no other was asked in this round, so a dead node
            # does not cost its timeout in every round.
            fresh = [u for u in rest if now - unreachable.get(u, -1e18) >= recheck]
            rest = fresh if fresh or tried else rest
            if not rest:
                break
            url = hint if hint in rest else rest[0]
            tried.append(url)
            sent = time.time()
            status, hint, _ = _get(url + "/v1/status", token, timeout)
            samples.append([round(sent, 3), round(time.time(), 3), url, status])
            order.remove(url)
            if isinstance(status, str):
                unreachable[url] = time.time()
            else:
                unreachable.pop(url, None)
            if status == 200:
                order.insert(0, url)
                break
            order.append(url)  # not the active one, or no answer: asked last from now on
        time.sleep(interval)
    return samples


def health(urls: list[str], timeout: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for url in urls:
        status, _, body = _get(url + "/v1/health", None, timeout)
        out[url] = body if status == 200 else {"error": status}
    return out


def failover(samples: list[Sample], killed_at: float, dead: str) -> float | None:
    """Seconds from ``killed_at`` to the first status answered after it by a manager other than
    ``dead``; None when no request was served afterwards."""
    for _sent, answered, url, status in samples:
        if answered > killed_at and status == 200 and url != dead:
            return float(answered) - killed_at
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", required=True, help="every manager, separated by commas")
    parser.add_argument("--token-file", help="the admin's or a partition's token (else stdin)")
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument(
        "--recheck", type=float, default=2.0, help="ask a manager that did not answer again after"
    )
    parser.add_argument("--health", action="store_true", help="print every manager's health")
    parser.add_argument(
        "--ca", default=DEFAULT_CA, help="the CA the managers' certificates verify to"
    )
    args = parser.parse_args(argv)
    if os.path.isfile(args.ca):  # the managers serve HTTPS with the cluster CA's certificates
        context = ssl.create_default_context(cafile=args.ca)
        urllib.request.install_opener(
            urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
        )
    urls = [u.strip().rstrip("/") for u in args.urls.split(",") if u.strip()]
    if args.health:
        print(json.dumps(health(urls, args.timeout)))
        return 0
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    else:
        token = sys.stdin.readline().strip()
    samples = probe(urls, token, args.duration, args.interval, args.timeout, args.recheck)
    print(json.dumps({"samples": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
