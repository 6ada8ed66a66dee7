"""The EC2 provider's settings and user data, checked without any AWS (nor its fake): every
refusal names the field at fault, and the user data never holds a secret."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from elastic.errors import InputError
from elastic.sites.ec2.settings import Ec2Settings
from elastic.sites.ec2.userdata import JoinSpec


def mapping(**site: Any) -> dict[str, Any]:
    fields = {"image_id": "ami-0abc1234def567890", "instance_type": "t3.micro",
              "price_per_node_hour": 0.01} | site  # fmt: skip
    return {
        "region": "eu-west-3",
        "sites": {"paris": {k: v for k, v in fields.items() if v != "-"}},
    }


def test_settings_from_a_mapping_keep_every_field() -> None:
    settings = Ec2Settings.from_mapping(
        {
            "region": "eu-west-3",
            "endpoint_url": "http://127.0.0.1:5000",
            "sites": {
                "paris": {"image_id": "ami-0abc1234def567890", "instance_type": "c6i.xlarge",
                          "price_per_node_hour": 0.19, "subnet_id": "subnet-0a1b2c3d",
                          "security_group_ids": ["sg-0a1b2c3d"], "key_name": "ops", "max_nodes": 8},
                "spare": {"image_id": "ami-0abc1234def567890", "instance_type": "c6i.xlarge",
                          "price_per_node_hour": 0.07, "spot": True},
            },
        }
    )  # fmt: skip
    paris = settings.site("paris")
    assert (paris.subnet_id, paris.security_group_ids, paris.key_name) == (
        "subnet-0a1b2c3d", ("sg-0a1b2c3d",), "ops",
    )  # fmt: skip
    assert paris.max_nodes == 8 and not paris.spot and settings.site("spare").spot
    assert settings.by_price() == ["spare", "paris"]
    assert settings.endpoint_url == "http://127.0.0.1:5000"


@pytest.mark.parametrize(
    ("site", "message"),
    [
        ({"image_id": ""}, r"^sites\.paris\.image_id: empty; give an AMI id"),
        ({"image_id": "ubuntu-22.04"}, r"^sites\.paris\.image_id: 'ubuntu-22.04' is not an AMI"),
        ({"image_id": "-"}, r"^sites\.paris\.image_id: missing"),
        ({"instance_type": "big"}, r"^sites\.paris\.instance_type: 'big' is not like t3\.micro"),
        ({"price_per_node_hour": -1}, r"^sites\.paris\.price_per_node_hour: -1 is not a price"),
        ({"subnet_id": "net-1"}, r"^sites\.paris\.subnet_id: 'net-1' is not like subnet-"),
        ({"security_group_ids": "sg-0a1b2c3d"}, r"^sites\.paris\.security_group_ids: not a list"),
        ({"key_name": ""}, r"^sites\.paris\.key_name: empty"),
        ({"max_nodes": 0}, r"^sites\.paris\.max_nodes: 0 is less than 1"),
        ({"spot": "yes"}, r"^sites\.paris\.spot: 'yes' is not true or false"),
        ({"zone": "a"}, r"^sites\.paris\.zone: unknown field"),
    ],
)
def test_bad_site_settings_are_refused_naming_the_field(site: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        Ec2Settings.from_mapping(mapping(**site))


def test_bad_region_endpoint_and_site_names_are_refused_naming_the_field() -> None:
    with pytest.raises(InputError, match=r"^region: empty"):
        Ec2Settings.from_mapping(mapping() | {"region": ""})
    with pytest.raises(InputError, match=r"^region: 'mars' is not an AWS region"):
        Ec2Settings.from_mapping(mapping() | {"region": "mars"})
    with pytest.raises(InputError, match=r"^endpoint_url: 'ftp://x' is not an http\(s\) URL"):
        Ec2Settings.from_mapping(mapping() | {"endpoint_url": "ftp://x"})
    with pytest.raises(InputError, match=r"^endpoint_url: carries credentials"):
        Ec2Settings.from_mapping(mapping() | {"endpoint_url": "http://AKIA:secret@127.0.0.1:1"})
    with pytest.raises(InputError, match=r"^sites: none given"):
        Ec2Settings.from_mapping({"region": "eu-west-3"})
    site = mapping()["sites"]["paris"]
    with pytest.raises(InputError, match=r"^sites\.Paris_1: 'Paris_1' is not a name"):
        Ec2Settings.from_mapping({"region": "eu-west-3", "sites": {"Paris_1": site}})
    with pytest.raises(InputError, match=r"^ec2 settings\.access_key: unknown field"):
        Ec2Settings.from_mapping(mapping() | {"access_key": "AKIA"})


def test_unknown_site_is_refused_naming_the_known_ones() -> None:
    settings = Ec2Settings.from_mapping(mapping())
    with pytest.raises(InputError, match=r"^site: unknown site 'lyon' \(known: paris\)"):
        settings.site("lyon")


def test_user_data_sets_hostname_and_fetches_key_and_config_from_where_it_is_told() -> None:
    join = JoinSpec(
        munge_key="s3://keys/prod/munge.key", slurm_conf="https://conf.example/slurm.conf"
    )
    script = join.render("prod", "paris", "prod-paris-0a1b2c3d4e5f")
    assert script.startswith("#!/bin/bash\n")
    assert "node=prod-paris-0a1b2c3d4e5f\n" in script
    assert 'hostnamectl set-hostname "$node"' in script
    assert "munge_key=s3://keys/prod/munge.key\n" in script
    assert "slurm_conf=https://conf.example/slurm.conf\n" in script
    assert 'fetch "$munge_key" /etc/munge/munge.key 0400 munge:munge' in script
    assert "dynamic=yes\n" in script
    assert "node=''\n" in join.render("prod", "paris")  # a group's instance names itself


def test_user_data_quotes_what_it_is_given() -> None:
    join = JoinSpec(munge_key="/srv/keys/it's here/munge.key", slurm_conf="/etc/slurm.conf")
    script = join.render("prod", "paris", "n1")
    assert "munge_key='/srv/keys/it'\"'\"'s here/munge.key'\n" in script


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to parse the script")
def test_user_data_is_a_valid_shell_script() -> None:
    join = JoinSpec(munge_key="/srv/keys/it's $HOME `x`", slurm_conf="s3://b/slurm.conf")
    for node in ("n1", None):
        script = join.render("prod", "paris", node)
        parsed = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert parsed.returncode == 0, parsed.stderr


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", r"^munge_key: empty"),
        # The key pasted in place of its location: refused, and not repeated in the message.
        ("mK9b2xQ7pL0wZ3vR8tY1uI4oP6aS5dF=", r"^munge_key: not an s3:// object"),
        ("http://keys.example/munge.key", r"^munge_key: not an s3:// object"),
        ("https://user:pw@keys.example/munge.key", r"^munge_key: the URL carries credentials"),
        (
            "https://b.s3.amazonaws.com/munge.key?X-Amz-Signature=abc&X-Amz-Credential=AKIA",
            r"^munge_key: the URL carries credentials or a query \(a presigned URL",
        ),
        ("s3://bucket-only", r"^munge_key: not an s3:// object"),
    ],
)
def test_secrets_are_kept_out_of_user_data(source: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        JoinSpec(munge_key=source, slurm_conf="/etc/slurm.conf")
    if source:
        assert source not in str(caught.value)
