"""`ptc profile render|check|params` through typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testbed_support import SLURM_PROFILE, TEST_PROFILES
from typer.testing import CliRunner

from elastic.cli.options import parse_params
from elastic.cli.profile import app
from elastic.errors import InputError, NotFoundError, PtcError
from elastic.profile import rspec

runner = CliRunner()


def test_render_to_stdout_is_a_valid_request() -> None:
    result = runner.invoke(app, ["render", str(SLURM_PROFILE), "-p", "computeNodeCount=3"])
    assert result.exit_code == 0, result.output
    t = rspec.parse_request(result.stdout_bytes)
    assert [n.client_id for n in t.nodes] == ["head", "node-0", "node-1", "node-2"]


def test_render_to_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "request.xml"
    result = runner.invoke(app, ["render", str(TEST_PROFILES / "two_lans.py"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert len(rspec.parse_request(out.read_bytes()).links) == 2
    assert "5 nodes, 2 links" in result.stderr


def test_check_prints_summary() -> None:
    result = runner.invoke(app, ["check", str(TEST_PROFILES / "point_to_point.py")])
    assert result.exit_code == 0, result.output
    assert "10.30.0.4/30" in result.stdout
    assert "100000 kbps" in result.stdout
    assert "ok: 3 nodes, 2 links, 4 interfaces" in result.stdout


def test_params_lists_types_and_defaults() -> None:
    result = runner.invoke(app, ["params", str(SLURM_PROFILE)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "computeNodeCount" in result.stdout
    assert "integer" in result.stdout
    assert "slurm_compute,nfs_client" in result.stdout


def test_bad_parameter_raises_ptc_error() -> None:
    result = runner.invoke(app, ["check", str(SLURM_PROFILE), "-p", "computeNodeCount=0"])
    assert isinstance(result.exception, PtcError)
    assert "computeNodeCount" in str(result.exception)


@pytest.mark.parametrize(
    ("values", "fragment"),
    [(["x"], "NAME=VALUE"), (["=1"], "NAME=VALUE"), (["a=1", "a=2"], "twice")],
)
def test_parse_params_errors(values: list[str], fragment: str) -> None:
    with pytest.raises(PtcError, match=fragment):
        parse_params(values)


def test_parse_params_keeps_equals_in_values() -> None:
    assert parse_params(["iacRepo=https://x/y?a=b"]) == {"iacRepo": "https://x/y?a=b"}


# --- struct and multi-value parameters, the parameters file, warnings ------------------------

PORTAL_PARAMS = TEST_PROFILES / "portal_params.py"
CUSTOM = {
    "nodes": [{"name": "x", "hardware": "m400", "scratch": True}, {"name": "y"}],
    "lan": {"bandwidth": 500, "jumbo": True},
    "tags": ["a", "b"],
}


def _nodes(xml: bytes) -> dict[str, str | None]:
    return {n.client_id: n.hardware_type for n in rspec.parse_request(xml).nodes}


def test_params_file_in_the_portal_form_renders_structs_and_lists(tmp_path: Path) -> None:
    from elastic.profile.render import to_bindings

    params = tmp_path / "params.json"
    params.write_text(json.dumps(to_bindings(CUSTOM)))  # {"bindings": {NAME: {"value": V}}}
    result = runner.invoke(app, ["render", str(PORTAL_PARAMS), "--params-file", str(params)])
    assert result.exit_code == 0, result.output
    assert _nodes(result.stdout_bytes) == {"x": "m400", "y": None}
    t = rspec.parse_request(result.stdout_bytes)
    assert t.links[0].bandwidth_kbps == 500000
    assert t.links[0].features == ["jumbo-frames"]
    assert [b.mount for b in t.node("x").blockstores] == ["/scratch"]
    assert json.loads(t.parameters["tags"]) == ["a", "b"]


def test_cli_syntax_gives_the_same_request_as_the_file(tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    params.write_text(json.dumps(CUSTOM))  # the plain {NAME: V} form is read too
    from_file = runner.invoke(app, ["render", str(PORTAL_PARAMS), "--params-file", str(params)])
    from_cli = runner.invoke(
        app,
        [
            "render",
            str(PORTAL_PARAMS),
            "-p",
            "nodes[0].name=x",
            "-p",
            "nodes[0].hardware=m400",
            "-p",
            "nodes[0].scratch=true",
            "-p",
            'nodes[1]:={"name": "y"}',
            "-p",
            "lan.bandwidth=500",
            "-p",
            "lan.jumbo=yes",
            "-p",
            'tags:=["a", "b"]',
        ],
    )
    assert from_file.exit_code == 0 and from_cli.exit_code == 0, from_cli.output
    assert from_cli.stdout_bytes == from_file.stdout_bytes


def test_param_overrides_one_member_of_the_file(tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    params.write_text(json.dumps(CUSTOM))
    result = runner.invoke(
        app,
        ["render", str(PORTAL_PARAMS), "--params-file", str(params), "-p", "nodes[1].name=z"],
    )
    assert result.exit_code == 0, result.output
    assert _nodes(result.stdout_bytes) == {"x": "m400", "z": None}
    assert rspec.parse_request(result.stdout_bytes).links[0].bandwidth_kbps == 500000


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["-p", "nodes[0].hardware=vax"], ["nodes[0].hardware", "legal values: any, m400"]),
        (["-p", "nodes[0].cpu=4"], ["nodes[0].cpu", "members are: name"]),
        (["-p", "lan.bandwidth=fast"], ["lan.bandwidth", "Could not coerce"]),
        (["-p", 'tags:=["a","b","c","d","e"]'], ["tags", "at most 4"]),
        (["-p", "nodes[1].name=b"], ["nodes[0]", "missing"]),
        (["-p", "lan:=[1"], ["lan:=[1", "not JSON"]),
    ],
)
def test_bad_members_are_named(args: list[str], fragments: list[str]) -> None:
    result = runner.invoke(app, ["check", str(PORTAL_PARAMS), *args])
    assert isinstance(result.exception, InputError), result.output
    for fragment in fragments:
        assert fragment in str(result.exception)


def test_bad_member_in_the_params_file_is_named(tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    params.write_text(
        json.dumps({"bindings": {"nodes": {"value": [{"value": {"hardware": {"value": "vax"}}}]}}})
    )
    result = runner.invoke(app, ["check", str(PORTAL_PARAMS), "--params-file", str(params)])
    assert isinstance(result.exception, InputError), result.output
    assert "nodes[0].hardware" in str(result.exception)
    assert "m400" in str(result.exception)


@pytest.mark.parametrize(
    ("content", "fragment"), [("{not json", "not a JSON file"), ("[1, 2]", "params.json")]
)
def test_bad_params_file_is_named(tmp_path: Path, content: str, fragment: str) -> None:
    params = tmp_path / "params.json"
    params.write_text(content)
    result = runner.invoke(app, ["render", str(PORTAL_PARAMS), "--params-file", str(params)])
    assert isinstance(result.exception, InputError), result.output
    assert fragment in str(result.exception)


def test_missing_params_file_is_named(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["render", str(PORTAL_PARAMS), "--params-file", str(tmp_path / "nope.json")]
    )
    assert isinstance(result.exception, NotFoundError)
    assert "nope.json" in str(result.exception)


@pytest.mark.parametrize("command", ["render", "check"])
def test_warnings_are_shown(command: str) -> None:
    result = runner.invoke(app, [command, str(PORTAL_PARAMS), "-p", "lan.bandwidth=5"])
    assert result.exit_code == 0, result.output
    assert "warning: lan.bandwidth: a LAN under 10 Mbit/s is very slow" in result.stderr


@pytest.mark.parametrize("command", ["render", "check"])
def test_warnings_are_fatal_with_the_flag(command: str) -> None:
    result = runner.invoke(
        app, [command, str(PORTAL_PARAMS), "-p", "lan.bandwidth=5", "--warnings-fatal"]
    )
    assert isinstance(result.exception, InputError), result.output
    assert "lan.bandwidth" in str(result.exception)
    assert "very slow" in str(result.exception)
    assert not result.stdout_bytes  # no request is printed


def test_no_warning_no_noise() -> None:
    result = runner.invoke(app, ["render", str(PORTAL_PARAMS), "--warnings-fatal"])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr


# --- check's summary -------------------------------------------------------------------------


def _profile(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "profile.py"
    script.write_text(
        "import geni.portal as portal\nimport geni.rspec.emulab\nimport geni.rspec.pg as pg\n"
        "pc = portal.context\nrequest = pc.makeRequestRSpec()\n"
        + body
        + "pc.printRequestRSpec(request)\n"
    )
    return script


def test_check_shows_size_zero_blockstore_as_all_free_space(tmp_path: Path) -> None:
    script = _profile(
        tmp_path,
        "node = request.RawPC('n')\nbs = node.Blockstore('big', '/big')\nbs.size = '0GB'\n"
        "small = node.Blockstore('small', '/small')\nsmall.size = '30GB'\n",
    )
    result = runner.invoke(app, ["check", str(script)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "big all free space at /big" in result.stdout
    assert "small 30GB at /small" in result.stdout
    assert "?GB" not in result.stdout


def test_check_fails_a_remote_blockstore_without_dataset(tmp_path: Path) -> None:
    script = _profile(
        tmp_path,
        "node = request.RawPC('n')\nremote = request.RemoteBlockstore('ds', '/ds')\n"
        "link = request.Link('l')\n"
        "link.addInterface(node.addInterface('if0', pg.IPv4Address('10.9.0.1', '255.255.255.0')))\n"
        "remote.interface.addAddress(pg.IPv4Address('10.9.0.2', '255.255.255.0'))\n"
        "link.addInterface(remote.interface)\n",
    )
    result = runner.invoke(app, ["check", str(script)])
    assert isinstance(result.exception, InputError), result.output
    assert "'ds'" in str(result.exception)
    assert "dataset" in str(result.exception)


def test_check_shows_shaping_per_direction() -> None:
    result = runner.invoke(
        app, ["check", str(TEST_PROFILES / "shaped_pair.py")], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "b:if0 -> a:if0: 50000 kbps, 20 ms" in result.stdout
    assert "a:if0 -> b:if0: 20000 kbps, 5 ms, 0.01 loss" in result.stdout


def test_check_shows_an_illegal_value_with_the_legal_ones() -> None:
    result = runner.invoke(app, ["check", str(SLURM_PROFILE), "-p", "configServerCount=2"])
    assert isinstance(result.exception, InputError), result.output
    message = str(result.exception)
    assert "configServerCount" in message
    assert "1, 3, 5" in message


def test_check_survives_a_profile_printing_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    script = _profile(
        tmp_path,
        "import sys\nsys.stdout.buffer.write(b'caf\\xe9\\n')\nsys.stdout.flush()\n"
        "sys.stderr.buffer.write(b'\\xff\\xfe\\n')\nrequest.RawPC('n')\n",
    )
    result = runner.invoke(app, ["check", str(script)])
    assert result.exit_code == 0, result.output
    assert "ok: 1 nodes" in result.stdout


def test_members_merge_and_whole_values_replace() -> None:
    from elastic.profile.render import merge_params, parse_param_args

    old = {"lan": {"bandwidth": 100, "jumbo": True}, "nodes": [{"name": "a"}, {"name": "b"}]}
    # member by member: only those members change
    assert parse_param_args(["lan.bandwidth=5", "nodes[1].name=c"], old) == {
        "lan": {"bandwidth": "5", "jumbo": True},
        "nodes": [{"name": "a"}, {"name": "c"}],
    }
    # whole values replace: a shorter list shrinks, a struct loses the members not given
    assert merge_params(
        old, parse_param_args(['nodes:=[{"name": "z"}]', 'lan:={"jumbo": false}'])
    ) == {
        "lan": {"jumbo": False},
        "nodes": [{"name": "z"}],
    }
    assert merge_params(old, parse_param_args(["lan.bandwidth=5"])) == {
        "lan": {"bandwidth": "5", "jumbo": True},
        "nodes": old["nodes"],
    }
    # an item past the end of the old list is added; a gap is named
    assert parse_param_args(["nodes[2].name=d"], old)["nodes"][2] == {"name": "d"}
    with pytest.raises(InputError, match=r"nodes\[2\] is missing"):
        parse_param_args(["nodes[3].name=d"], old)


def test_params_lists_struct_members_and_lists() -> None:
    result = runner.invoke(app, ["params", str(PORTAL_PARAMS)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│" in line}
    assert "list of struct" in rows["nodes"]
    assert "one of: any, m400, c220g5, d430" in rows["nodes[i].hardware"]
    assert "bandwidth" in rows["lan.bandwidth"]
    assert "list of string" in rows["tags"]
    assert "[advanced]" in rows["image"]
