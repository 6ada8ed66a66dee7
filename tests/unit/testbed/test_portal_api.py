"""Profiles using the portal's API after geni-lib 0.9.9.4 render as the portal's geni-lib does.

The reference is a set of recordings (``recordings/genilib_portal/recorded_*``) made by running
the portal-line geni-lib once on the same profiles and parameters (see ``record.py`` there).
Elements are compared by namespace URI, name, attributes and text, in document order; namespace
prefixes are not compared (they do not change meaning).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lxml import etree
from testbed_support import RECORDINGS, TEST_PROFILES

from elastic.errors import InputError
from elastic.profile import render
from elastic.profile.render import render_request

RECORDED = RECORDINGS / "genilib_portal"
CASES = sorted(RECORDED.glob("recorded_*.json"))


def _canon(el: Any) -> tuple[Any, ...]:
    children = [_canon(c) for c in el if isinstance(c.tag, str)]
    return (el.tag, tuple(sorted(el.attrib.items())), (el.text or "").strip(), children)


def _case(path: Path) -> dict[str, Any]:
    rec: dict[str, Any] = json.loads(path.read_text())
    return rec


def test_recordings_are_labelled_and_cover_every_case() -> None:
    assert len(CASES) >= 9
    for path in CASES:
        rec = _case(path)
        assert rec["recorded"].startswith("portal-line geni-lib")
        if rec["request"]:
            assert (RECORDED / rec["request"]).read_text().startswith("<!-- RECORDING:")


@pytest.mark.parametrize("path", [p for p in CASES if _case(p)["request"]], ids=lambda p: p.stem)
def test_renders_the_same_elements_as_the_portal(path: Path) -> None:
    rec = _case(path)
    rendered = render_request(
        TEST_PROFILES.parent.parent / rec["profile"],
        rec["params"],
        warnings_fatal=rec["warnings_fatal"],
    )
    ours = etree.fromstring(rendered.xml)
    theirs = etree.parse(str(RECORDED / rec["request"])).getroot()
    assert _canon(ours) == _canon(theirs)


@pytest.mark.parametrize(
    "path", [p for p in CASES if _case(p)["exit_status"]], ids=lambda p: p.stem
)
def test_refuses_what_the_portal_refuses(path: Path) -> None:
    rec = _case(path)
    with pytest.raises(InputError) as info:
        render_request(
            TEST_PROFILES.parent.parent / rec["profile"],
            rec["params"],
            warnings_fatal=rec["warnings_fatal"],
        )
    # ptc reads the portal line's own error object too, and names the same parameters.
    theirs = render._portal_errors(rec["stderr"])
    assert theirs, rec["stderr"]
    for err in theirs:
        for name in err["params"]:
            top = name.split(".")[0].split("[")[0]
            assert top in str(info.value)


def test_portal_error_object_names_the_struct_member() -> None:
    rec = _case(RECORDED / "recorded_portal_params_duplicate-name.json")
    (err,) = render._portal_errors(rec["stderr"]) or []
    assert err["params"] == ["nodes[1].name"]
    assert "used twice" in err["message"]


def test_warning_is_returned_when_not_fatal() -> None:
    rendered = render_request(
        TEST_PROFILES / "portal_params.py", {"lan": {"bandwidth": 5}}, warnings_fatal=False
    )
    (warning,) = rendered.warnings
    assert warning.params == ["lan.bandwidth"]
    assert "very slow" in warning.message


def test_warning_is_fatal_for_up() -> None:
    # render_profile is what `ptc up` renders with: warnings are fatal there, as on the portal.
    with pytest.raises(InputError, match=r"lan\.bandwidth.*very slow"):
        render.render_profile(TEST_PROFILES / "portal_params.py", {"lan": {"bandwidth": 5}})


@pytest.mark.parametrize(
    ("params", "fragments"),
    [
        ({"nodes": [{"name": "x", "hardware": "vax"}]}, ["nodes[0].hardware", "m400, c220g5"]),
        ({"nodes": [{"name": "x", "cpu": 4}]}, ["nodes[0].cpu", "members are: name"]),
        ({"nodes": []}, ["nodes", "at least 1"]),
        ({"tags": ["a"] * 5}, ["tags", "at most 4"]),
        ({"lan": {"bandwidth": "fast"}}, ["lan.bandwidth", "Could not coerce"]),
        ({"lan": "not json"}, ["lan", "not a JSON"]),
    ],
)
def test_bad_struct_and_list_values_name_the_member(
    params: dict[str, Any], fragments: list[str]
) -> None:
    with pytest.raises(InputError) as info:
        render_request(TEST_PROFILES / "portal_params.py", params)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_old_flat_parameter_file_is_still_read(tmp_path: Path) -> None:
    # A site's tools may still write {"name": value}: the compat layer reads both protocols.
    from elastic.profile import genilib_compat

    assert genilib_compat.read_params_file({"lan": True}) == ({"lan": True}, False)
    assert genilib_compat.read_params_file(render.to_bindings({"lan": {"jumbo": True}})) == (
        {"lan": {"jumbo": True}},
        True,
    )


def test_python2_profile_fails_naming_the_line(tmp_path: Path) -> None:
    # Written here, not kept in profiles/: the linter cannot parse a Python 2 file.
    script = tmp_path / "python2.py"
    script.write_text(
        "import geni.portal as portal\n"
        "pc = portal.Context()\n"
        "request = pc.makeRequestRSpec()\n"
        'print "building", request\n'
        "pc.printRequestRSpec(request)\n"
    )
    with pytest.raises(InputError) as info:
        render_request(script, {})
    msg = str(info.value)
    assert "line 4" in msg
    assert 'print "building", request' in msg


def test_non_utf8_output_is_no_crash(tmp_path: Path) -> None:
    script = tmp_path / "latin1.py"
    script.write_text(
        "import sys\nimport geni.portal as portal\n"
        "sys.stdout.buffer.write(b'caf\\xe9\\n')\nsys.stderr.buffer.write(b'\\xff\\xfe\\n')\n"
        "pc = portal.context\nreq = pc.makeRequestRSpec()\nreq.RawPC('n')\n"
        "pc.printRequestRSpec(req)\n"
    )
    rendered = render_request(script, {})
    assert [n.client_id for n in rendered.topology.nodes] == ["n"]
