"""`ptc deploy -e NAME=VALUE` parsing."""

from __future__ import annotations

import pytest

from elastic.cli.cluster import parse_extravars
from elastic.errors import PtcError


def test_values_are_yaml() -> None:
    assert parse_extravars(["a=true", "b=3", "c=text", "d=", "e=[1, 2]"]) == {
        "a": True,
        "b": 3,
        "c": "text",
        "d": "",
        "e": [1, 2],
    }


@pytest.mark.parametrize("bad", ["novalue", "=x", "k=[unclosed"])
def test_bad_pairs_name_the_argument(bad: str) -> None:
    with pytest.raises(PtcError, match="-e"):
        parse_extravars([bad])
