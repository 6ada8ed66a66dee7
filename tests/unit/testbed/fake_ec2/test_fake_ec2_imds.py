"""The FAKE EC2 region's metadata service (IMDSv2): tokens first, then the realiser's files as
they are; run as the machine runs it (a copy of the program, the standard library only)."""

from __future__ import annotations

import ast
import http.client
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic.testbed.backends.local.fake_ec2 import METADATA_DIR, imds

NOTICE = b'{"action": "terminate", "time": "2026-01-02T03:04:05Z"}'
TTL = {imds.TTL_HEADER: "60"}


def metadata(root: Path) -> Path:
    meta = root / "latest" / "meta-data"
    (meta / "spot").mkdir(parents=True)
    (meta / "instance-id").write_text("i-0123456789abcdef0")
    (meta / "local-ipv4").write_text("10.10.1.50")
    (meta / "spot" / "instance-action").write_bytes(NOTICE)
    (root / "secret").write_text("not metadata")
    return meta


def ask(
    port: int, method: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def token(port: int) -> str:
    status, body = ask(port, "PUT", imds.TOKEN_PATH, TTL)
    assert status == 200, body
    return body.decode()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The program as the machine runs it: a copy of its text, alone, python -I, any port."""
    root = tmp_path_factory.mktemp("imds")
    metadata(root)
    program = root / "imds.py"
    program.write_text(Path(imds.__file__).read_text())
    proc = subprocess.Popen(
        [sys.executable, "-I", str(program), "--address", "127.0.0.1", "--port", "0",
         "--root", str(root)],
        cwd=root, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "FAKE IMDSv2" in first, first
        yield int(first.rsplit(":", 1)[1])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_program_imports_the_standard_library_only() -> None:
    tree = ast.parse(Path(imds.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
    }
    assert {n.split(".")[0] for n in names} <= set(sys.stdlib_module_names) | {"__future__"}


def test_it_serves_the_directory_the_realiser_writes() -> None:
    assert METADATA_DIR == imds.ROOT + imds.META_PATH
    assert (imds.ADDRESS, imds.PORT) == ("169.254.169.254", 80)


def test_a_token_then_the_instance_id(served: int) -> None:
    status, body = ask(served, "PUT", imds.TOKEN_PATH, TTL)
    assert status == 200 and len(body) >= 32
    status, value = ask(served, "GET", f"{imds.META_PATH}/instance-id",
                        {imds.TOKEN_HEADER: body.decode()})  # fmt: skip
    assert (status, value) == (200, b"i-0123456789abcdef0")


@pytest.mark.parametrize("ttl", [None, "0", "21601", "-5", "sixty", ""])
def test_a_token_needs_a_ttl_between_1_and_21600_seconds(served: int, ttl: str | None) -> None:
    headers = {} if ttl is None else {imds.TTL_HEADER: ttl}
    assert ask(served, "PUT", imds.TOKEN_PATH, headers)[0] == 400


def test_the_longest_ttl_is_given(served: int) -> None:
    assert ask(served, "PUT", imds.TOKEN_PATH, {imds.TTL_HEADER: "21600"})[0] == 200


def test_tokens_differ(served: int) -> None:
    assert token(served) != token(served)


@pytest.mark.parametrize("given", [None, "", "not-a-token-it-gave"])
def test_metadata_without_a_valid_token_is_unauthorized(served: int, given: str | None) -> None:
    headers = {} if given is None else {imds.TOKEN_HEADER: given}
    status, _ = ask(served, "GET", f"{imds.META_PATH}/instance-id", headers)
    assert status == 401


def test_a_proxied_token_request_is_forbidden(served: int) -> None:
    status, _ = ask(served, "PUT", imds.TOKEN_PATH, {**TTL, "X-Forwarded-For": "10.0.0.9"})
    assert status == 403


def test_a_missing_key_is_not_found(served: int) -> None:
    status, _ = ask(served, "GET", f"{imds.META_PATH}/spot/termination-time",
                    {imds.TOKEN_HEADER: token(served)})  # fmt: skip
    assert status == 404


@pytest.mark.parametrize(
    "path",
    [
        f"{imds.META_PATH}/../../secret",
        f"{imds.META_PATH}/spot/../../../secret",
        f"{imds.META_PATH}/./../../secret",
        "/latest/secret",
        "/secret",
    ],
)
def test_a_path_out_of_the_metadata_is_not_found(served: int, path: str) -> None:
    status, body = ask(served, "GET", path, {imds.TOKEN_HEADER: token(served)})
    assert status == 404 and b"not metadata" not in body


def test_the_spot_notice_comes_back_byte_for_byte(served: int) -> None:
    status, body = ask(served, "GET", f"{imds.META_PATH}/spot/instance-action",
                       {imds.TOKEN_HEADER: token(served)})  # fmt: skip
    assert (status, body) == (200, NOTICE)


def test_a_directory_lists_its_keys(served: int) -> None:
    auth = {imds.TOKEN_HEADER: token(served)}
    assert ask(served, "GET", f"{imds.META_PATH}/", auth) == (
        200, b"instance-id\nlocal-ipv4\nspot/",
    )  # fmt: skip
    assert ask(served, "GET", f"{imds.META_PATH}/spot", auth) == (200, b"instance-action")


def test_the_token_path_is_for_put_only(served: int) -> None:
    assert ask(served, "GET", imds.TOKEN_PATH, {imds.TOKEN_HEADER: token(served)})[0] == 405


def test_a_link_out_of_the_metadata_is_not_followed(tmp_path: Path) -> None:
    meta = metadata(tmp_path)
    (meta / "escape").symlink_to(tmp_path / "secret")
    (meta / "inside").symlink_to(meta / "instance-id")
    assert imds.lookup(tmp_path, "/escape") is None
    assert imds.lookup(tmp_path, "/inside") == b"i-0123456789abcdef0"


def test_tokens_expire_after_their_ttl() -> None:
    clock = Clock()
    tokens = imds.Tokens(clock)
    short, long = tokens.issue(1), tokens.issue(21600)
    assert tokens.valid(short) and tokens.valid(long)
    clock.now += 0.999
    assert tokens.valid(short)
    clock.now += 0.001
    assert not tokens.valid(short) and tokens.valid(long)
    clock.now += 21600
    assert not tokens.valid(long)
    assert not tokens.valid(None) and not tokens.valid("")


def serve(root: Path, tokens: imds.Tokens, own: bool = True) -> tuple[imds.Server, int]:
    server = imds.Server(("127.0.0.1", 0), root, tokens, own=lambda _peer: own)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, int(server.server_address[1])


def test_an_expired_token_is_unauthorized(tmp_path: Path) -> None:
    metadata(tmp_path)
    clock = Clock()
    server, port = serve(tmp_path, imds.Tokens(clock))
    try:
        status, body = ask(port, "PUT", imds.TOKEN_PATH, {imds.TTL_HEADER: "1"})
        assert status == 200
        auth = {imds.TOKEN_HEADER: body.decode()}
        assert ask(port, "GET", f"{imds.META_PATH}/local-ipv4", auth) == (200, b"10.10.1.50")
        clock.now += 1
        assert ask(port, "GET", f"{imds.META_PATH}/local-ipv4", auth)[0] == 401
    finally:
        server.shutdown()
        server.server_close()


def test_a_peer_that_is_not_the_machine_itself_is_forbidden(tmp_path: Path) -> None:
    metadata(tmp_path)
    server, port = serve(tmp_path, imds.Tokens(), own=False)
    try:
        assert ask(port, "PUT", imds.TOKEN_PATH, TTL)[0] == 403
        assert ask(port, "GET", f"{imds.META_PATH}/instance-id")[0] == 403
    finally:
        server.shutdown()
        server.server_close()


def test_own_addresses_are_told_from_others() -> None:
    assert imds.own_address("127.0.0.1")
    assert not imds.own_address("192.0.2.1")  # TEST-NET-1: no host's own
