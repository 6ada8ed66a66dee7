"""The pool's sites file: providers, operations and their settings, each refusal naming the
file, the site and the field; and the hostlist notation expanded without Slurm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elastic.errors import InputError
from elastic.slurm import hostlist
from elastic.slurm.sites import (
    check_for_deploy,
    check_same_providers,
    features,
    load_sites,
    parse_sites,
)

EC2 = {"region": "us-east-1", "image_id": "ami-0123456789abcdef0", "instance_type": "c5.large"}


def sites(*extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "sites": [
            {"name": "here", "price": 1.0, "nodes": "node-[0-1]"},
            *extra,
        ]
    }


def test_a_pool_of_three_providers_is_read_with_defaults() -> None:
    parsed = parse_sites(
        sites(
            {"name": "portal", "provider": "cloudlab", "price": 0.5, "nodes": "node-2"},
            {
                "name": "cloud",
                "provider": "ec2",
                "price": 3,
                "nodes": "ec2-[0-3]",
                "max_nodes": 2,
                "ec2": {**EC2, "endpoint_url": "http://127.0.0.1:5000"},
            },
        ),
        hostlist.expand,
    )
    here, portal, cloud = parsed
    assert (here.provider, here.operation, here.site.capacity) == ("local", "", 2)
    assert (portal.provider, portal.operation) == ("cloudlab", "power")
    assert (cloud.provider, cloud.operation, cloud.site.capacity) == ("ec2", "terminate", 2)
    assert cloud.nodes == ("ec2-0", "ec2-1", "ec2-2", "ec2-3")
    settings = cloud.ec2_settings()
    assert settings.endpoint_url == "http://127.0.0.1:5000"
    assert settings.site("cloud").price_per_node_hour == 3 and settings.site("cloud").max_nodes == 2
    assert features(parsed)["ec2-3"] == ["cloud"] and features(parsed)["node-0"] == ["here"]


@pytest.mark.parametrize(
    ("site", "field"),
    [
        ({"provider": "gcp"}, r"provider: 'gcp' is not one of local, cloudlab, ec2"),
        ({"provider": "ec2", "ec2": {k: v for k, v in EC2.items() if k != "region"}},
         r"ec2\.region is missing"),
        ({"provider": "ec2", "ec2": {k: v for k, v in EC2.items() if k != "image_id"}},
         r"ec2\.image_id is missing"),
        ({"provider": "ec2", "ec2": {**EC2, "image_id": "ubuntu"}}, r"ec2\.image_id: 'ubuntu'"),
        ({"provider": "ec2", "ec2": {**EC2, "region": "moon"}}, r"ec2\.region: 'moon'"),
        ({"provider": "ec2", "ec2": {**EC2, "cpus": 0}}, r"ec2\.cpus: 0"),
        ({"provider": "ec2", "ec2": {**EC2, "flavour": "x"}}, r"ec2\.flavour: not known"),
        ({"price": -2}, r"price: -2 is not a number >= 0"),
        ({"operation": "terminate"}, r"operation: 'terminate': provider local offers power, "),
        ({"provider": "cloudlab", "operation": "reload"}, r"operation: 'reload'"),
        ({"ec2": EC2}, r"ec2: settings for provider ec2, not local"),
        ({"max_nodes": 3}, r"max_nodes: 3 is not between 1 and its 2 nodes"),
        ({"desired": 3}, r"desired: 3 is more than max_nodes 2"),
        ({"nodes": "node-[3-"}, r"nodes: hostlist 'node-\[3-': brackets do not match"),
        ({"name": "Big_Site"}, r"name: 'Big_Site' is not a name"),
    ],
)  # fmt: skip
def test_a_bad_site_is_refused_naming_the_site_and_field(site: dict[str, Any], field: str) -> None:
    bad = {"name": "there", "price": 1, "nodes": "node-[2-3]", **site}
    with pytest.raises(InputError, match=r"sites\[1\]( \(\w+\))?: field " + field):
        parse_sites(sites(bad), hostlist.expand)


def test_overlapping_node_names_are_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sites.yml"
    path.write_text(
        "sites:\n"
        "  - {name: here, price: 1, nodes: 'node-[0-3]'}\n"
        "  - {name: cloud, provider: ec2, price: 2, nodes: 'node-[3-4]',\n"
        "     ec2: {region: us-east-1, image_id: ami-0123456789abcdef0, instance_type: c5.large}}\n"
    )
    with pytest.raises(
        InputError, match=rf"sites file {path}: sites\[1\] \(cloud\): field nodes: node-3 is "
    ):
        load_sites(path, hostlist.expand)


def test_the_rebalancing_round_needs_every_site_s_desired_count() -> None:
    assert parse_sites(sites(), hostlist.expand)[0].site.desired == 0
    with pytest.raises(InputError, match=r"sites\[0\] \(here\): field desired is missing"):
        parse_sites(sites(), hostlist.expand, need_desired=True)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("node-[0-2]", ["node-0", "node-1", "node-2"]),
        ("node-[0-1,5],head", ["node-0", "node-1", "node-5", "head"]),
        ("c[08-10]x", ["c08x", "c09x", "c10x"]),
        ("a,b", ["a", "b"]),
        ("", []),
    ],
)
def test_hostlists_expand_as_scontrol_does(text: str, names: list[str]) -> None:
    assert hostlist.expand(text) == names


@pytest.mark.parametrize(
    ("text", "why"),
    [("node-[3-1]", "runs backwards"), ("node-[x]", r"\[x\]"), ("n-[0-999999999]", "more than")],
)
def test_a_bad_hostlist_is_refused(text: str, why: str) -> None:
    with pytest.raises(InputError, match=why):
        hostlist.expand(text)


def test_the_deploy_refuses_a_stray_node_and_an_ec2_site_without_credentials(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sites.yml"
    path.write_text("sites:\n  - {name: here, price: 1, nodes: 'node-[0-2]'}\n")
    with pytest.raises(InputError, match=r"\(here\): field nodes: node-2 is not a compute node"):
        check_for_deploy(path, ["node-0", "node-1"])
    path.write_text(
        "sites:\n  - {name: cloud, provider: ec2, price: 1, nodes: 'ec2-0',\n"
        "     ec2: {region: us-east-1, image_id: ami-0123456789abcdef0, instance_type: c5.large,\n"
        "           endpoint_url: 'http://10.10.1.1:5000'}}\n"
    )
    with pytest.raises(InputError, match=r"\(cloud\): provider ec2: no AWS credentials given"):
        check_for_deploy(path, ["node-0"])
    path.write_text("sites:\n  - {name: here, price: 1, nodes: 'node-[0-1]'}\n")
    assert [s.nodes for s in check_for_deploy(path, ["node-0", "node-1"])] == [("node-0", "node-1")]


def test_a_rebalance_may_not_change_who_runs_a_node() -> None:
    deployed = parse_sites(
        sites({"name": "portal", "provider": "cloudlab", "price": 2, "nodes": "node-[2-3]"}),
        hostlist.expand,
    )
    cheaper = parse_sites(
        sites({"name": "portal", "provider": "cloudlab", "price": 1, "nodes": "node-2"}),
        hostlist.expand,
    )
    check_same_providers(deployed, cheaper, "sites file x")  # prices and counts may change
    moved = parse_sites(
        sites({"name": "portal", "provider": "cloudlab", "price": 2, "nodes": "node-[2-3]"},
              {"name": "new", "price": 1, "nodes": "node-4"}),
        hostlist.expand,
    )  # fmt: skip
    check_same_providers(deployed, moved, "sites file x")  # a new local site is fine
    for changed, field in (
        ({"name": "portal", "price": 2, "nodes": "node-[2-3]"}, "provider"),
        ({"name": "portal", "provider": "cloudlab", "price": 2, "nodes": "node-[2-3]",
          "cloudlab": {"experiment": "p,e"}}, "cloudlab"),
    ):  # fmt: skip
        with pytest.raises(InputError, match=rf"sites\[1\] \(portal\): field {field}: differs"):
            check_same_providers(deployed, parse_sites(sites(changed), hostlist.expand), "x")
    stolen = parse_sites(
        {"sites": [{"name": "here", "price": 1, "nodes": "node-[0-2]"}]}, hostlist.expand
    )
    with pytest.raises(InputError, match=r"field nodes: node-2 is a cloudlab node as deployed"):
        check_same_providers(deployed, stolen, "x")
