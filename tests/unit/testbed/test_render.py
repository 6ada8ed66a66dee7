"""Rendering profiles/slurm_cluster.py and error reporting of render_profile."""

from __future__ import annotations

from pathlib import Path

import pytest
from testbed_support import SLURM_PROFILE, TEST_PROFILES

from elastic.errors import PtcError
from elastic.profile import rspec
from elastic.profile.render import profile_parameters, render_profile

STARTUP = "sudo bash /local/repository/profiles/startup.sh"
HEAD_ROLES = "slurm_controller,slurm_dbd,nfs_server,config_server"


def render(params: dict[str, str] | None = None) -> rspec.Topology:
    t = rspec.parse_request(render_profile(SLURM_PROFILE, params or {}))
    rspec.validate(t)
    return t


def test_default_render_has_head_and_two_compute_nodes() -> None:
    t = render()
    assert [n.client_id for n in t.nodes] == ["head", "node-0", "node-1"]
    addresses = {n.client_id: (n.interfaces[0].ip, n.interfaces[0].netmask) for n in t.nodes}
    assert addresses == {
        "head": ("10.10.1.1", "255.255.255.0"),
        "node-0": ("10.10.1.2", "255.255.255.0"),
        "node-1": ("10.10.1.3", "255.255.255.0"),
    }
    assert [(lk.client_id, lk.kind) for lk in t.links] == [("lan", "lan")]
    assert t.links[0].interface_refs == ["head:if1", "node-0:if1", "node-1:if1"]
    assert t.links[0].bandwidth_kbps is None  # 0 = unshaped
    head = t.node("head")
    assert [e.command for e in head.execute] == [f"{STARTUP} --groups {HEAD_ROLES}"]
    assert t.node("node-1").execute[0].command == f"{STARTUP} --groups slurm_compute,nfs_client"
    assert all(n.disk_image and n.disk_image.endswith("UBUNTU24-64-STD") for n in t.nodes)
    assert all(n.hardware_type is None for n in t.nodes)
    assert head.blockstores == []
    assert t.parameters["computeNodeCount"] == "2"
    assert t.parameters["iacBranch"] == "main"


def test_three_nodes_storage_bandwidth_and_hardware() -> None:
    t = render(
        {
            "computeNodeCount": "3",
            "sharedStorageGB": "50",
            "lanBandwidth": "1000000",
            "hardwareType": "m510",
            "computeRoles": "slurm_compute",
        }
    )
    assert [n.client_id for n in t.nodes] == ["head", "node-0", "node-1", "node-2"]
    assert t.node("node-2").interfaces[0].ip == "10.10.1.4"
    assert {n.hardware_type for n in t.nodes} == {"m510"}
    assert t.links[0].bandwidth_kbps == 1000000
    (bs,) = t.node("head").blockstores
    assert (bs.mount, bs.size_gb, bs.remote) == ("/exports", 50.0, False)
    assert t.node("node-0").execute[0].command.endswith("--groups slurm_compute")
    assert t.parameters["computeNodeCount"] == "3"
    assert t.parameters["sharedStorageGB"] == "50"


@pytest.mark.parametrize(
    ("params", "name", "fragment"),
    [
        ({"computeNodeCount": "0"}, "computeNodeCount", "between 1 and 100"),
        ({"computeNodeCount": "101"}, "computeNodeCount", "between 1 and 100"),
        ({"computeNodeCount": "two"}, "computeNodeCount", "Could not coerce"),
        ({"lanBandwidth": "5"}, "lanBandwidth", "kbps"),
        ({"computeRoles": "slurm_compute,slurm_controller"}, "computeRoles", "slurm_controller"),
        ({"iacRepo": "ftp://x"}, "iacRepo", "http"),
        ({"sharedStorageGB": "-1"}, "sharedStorageGB", "negative"),
    ],
)
def test_bad_parameter_error_names_it(params: dict[str, str], name: str, fragment: str) -> None:
    with pytest.raises(PtcError) as info:
        render_profile(SLURM_PROFILE, params)
    msg = str(info.value)
    assert name in msg
    assert fragment in msg


def test_several_bad_parameters_are_all_reported() -> None:
    with pytest.raises(PtcError) as info:
        render_profile(SLURM_PROFILE, {"computeNodeCount": "0", "computeRoles": "bogus"})
    msg = str(info.value)
    assert "2 error(s)" in msg
    assert "computeNodeCount='0'" in msg
    assert "computeRoles='bogus'" in msg


def test_unknown_parameter_lists_the_known_ones() -> None:
    with pytest.raises(PtcError) as info:
        render_profile(SLURM_PROFILE, {"nodes": "3"})
    msg = str(info.value)
    assert "'nodes'" in msg
    assert "computeNodeCount" in msg
    assert "osImage" in msg


@pytest.mark.parametrize(
    ("profile", "fragment"),
    [("broken_syntax.py", "SyntaxError"), ("broken_runtime.py", "InvalidAddressTypeError")],
)
def test_broken_profile_reports_traceback_tail(profile: str, fragment: str) -> None:
    with pytest.raises(PtcError) as info:
        render_profile(TEST_PROFILES / profile, {})
    msg = str(info.value)
    assert profile in msg
    assert fragment in msg
    assert "portal_runner" not in msg  # runner frames are trimmed
    log = Path(msg.rsplit("kept in ", 1)[1].strip())
    assert fragment in log.read_text()


def test_missing_profile_is_named(tmp_path: Path) -> None:
    with pytest.raises(PtcError, match=r"nope\.py"):
        render_profile(tmp_path / "nope.py", {})


def test_profile_without_print_is_reported(tmp_path: Path) -> None:
    script = tmp_path / "silent.py"
    script.write_text("import geni.portal as portal\nportal.context.makeRequestRSpec()\n")
    with pytest.raises(PtcError, match="printRequestRSpec"):
        render_profile(script, {})


def test_profile_parameters_lists_types_and_defaults() -> None:
    params = {p.name: p for p in profile_parameters(SLURM_PROFILE)}
    assert list(params)[:3] == ["computeNodeCount", "hardwareType", "osImage"]
    assert params["computeNodeCount"].type == "integer"
    assert params["computeNodeCount"].default == 2
    assert params["sharedStorageGB"].default == 0
    assert params["computeRoles"].default == "slurm_compute,nfs_client"
