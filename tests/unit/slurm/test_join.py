"""The munge key for a joining cloud instance: a token per node, good once and for a while, kept
hashed on disk; the key handed out only against it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from elastic.errors import InputError
from elastic.slurm.join import JoinTokens, KeyServer, key_path


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tokens(tmp_path: Path, clock: Clock) -> JoinTokens:
    return JoinTokens(tmp_path / "state" / "join-tokens.json", ttl=600, clock=clock)


def test_a_token_opens_its_node_s_key_once(tokens: JoinTokens, tmp_path: Path) -> None:
    key = tmp_path / "munge.key"
    key.write_bytes(b"\x00secret key\xff")
    server = KeyServer(tokens, key)
    token = tokens.issue("ec2-0")
    assert server.key_for("ec2-0", token) == b"\x00secret key\xff"
    assert server.key_for("ec2-0", token) is None  # spent


def test_the_file_holds_no_token_and_is_root_only(tokens: JoinTokens) -> None:
    token = tokens.issue("ec2-0")
    text = tokens.path.read_text()
    assert token not in text and "ec2-0" in text
    assert stat.S_IMODE(tokens.path.stat().st_mode) == 0o600


def test_a_token_for_another_node_is_refused_and_spent(tokens: JoinTokens) -> None:
    token = tokens.issue("ec2-0")
    assert not tokens.redeem("ec2-1", token)
    assert not tokens.redeem("ec2-0", token)  # tried once against the wrong node: void


def test_an_expired_token_is_refused(tokens: JoinTokens, clock: Clock) -> None:
    token = tokens.issue("ec2-0")
    clock.now += 601
    assert not tokens.redeem("ec2-0", token)


def test_a_new_launch_voids_the_node_s_earlier_token(tokens: JoinTokens) -> None:
    old = tokens.issue("ec2-0")
    new = tokens.issue("ec2-0")
    other = tokens.issue("ec2-1")
    assert not tokens.redeem("ec2-0", old)
    assert tokens.redeem("ec2-0", new) and tokens.redeem("ec2-1", other)


def test_expired_tokens_are_forgotten_at_the_next_issue(tokens: JoinTokens, clock: Clock) -> None:
    tokens.issue("ec2-0")
    clock.now += 601
    tokens.issue("ec2-1")
    assert [e["node"] for e in json.loads(tokens.path.read_text()).values()] == ["ec2-1"]


def test_a_wrong_or_empty_token_and_a_bad_node_name_get_nothing(
    tokens: JoinTokens, tmp_path: Path
) -> None:
    key = tmp_path / "munge.key"
    key.write_bytes(b"k")
    server = KeyServer(tokens, key)
    tokens.issue("ec2-0")
    assert server.key_for("ec2-0", "guess") is None
    assert server.key_for("ec2-0", "") is None
    assert server.key_for("../etc", "x") is None
    with pytest.raises(InputError, match="not a hostname"):
        key_path("ec2 0")
    with pytest.raises(InputError, match="ttl"):
        JoinTokens(tmp_path / "t.json", ttl=0)


def test_a_damaged_file_reads_as_no_token(tokens: JoinTokens) -> None:
    token = tokens.issue("ec2-0")
    tokens.path.write_text("not json")
    assert not tokens.redeem("ec2-0", token)
