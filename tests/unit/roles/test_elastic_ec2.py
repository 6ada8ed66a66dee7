"""The elastic role's wiring of ec2 sites: what the client's configuration says is what the
provisioner reads, and the AWS credentials reach boto3 through the environment of the client's
unit and of the programs slurmctld runs, only when the deploy gave them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from support.role_vars import role_context

from elastic import node_paths
from elastic.manager import metrics
from elastic.slurm import provision

ROLE = Path(__file__).resolve().parents[3] / "roles" / "elastic"


def render(name: str, context: dict[str, Any]) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    env.filters["to_json"] = json.dumps
    env.filters["quote"] = lambda s: str(s)
    env.filters["hash"] = lambda s, _: "digest"
    return env.from_string((ROLE / "templates" / name).read_text()).render(context)


@pytest.fixture
def role() -> dict[str, Any]:
    return role_context("elastic")


def ec2_block(context: dict[str, Any]) -> dict[str, Any]:
    text = (ROLE / "templates" / "slurm-client.yml.j2").read_text()
    start = text.index("{% if elastic_ec2_credentials_src | length > 0 %}")
    block = text[start : text.index("{% endif %}", start) + len("{% endif %}")]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["to_json"] = json.dumps
    env.filters["int"] = int
    parsed: dict[str, Any] = yaml.safe_load(env.from_string(block).render(context)) or {}
    return parsed


def test_the_client_s_ec2_settings_are_the_ones_the_provisioner_reads(
    role: dict[str, Any],
) -> None:
    assert ec2_block(role) == {}  # no credentials given: no ec2 settings
    written = ec2_block({**role, "elastic_ec2_credentials_src": "/home/me/aws.ini"})["ec2"]
    assert set(provision.EC2_SETTINGS) <= set(written)
    assert set(written) <= {
        *provision.EC2_SETTINGS,
        *provision.EC2_OPTIONAL,
        *provision.EC2_SECONDS,
        *provision.EC2_NODE,
    }
    assert (written["sync_interval"], written["orphan_grace"]) == (60, 300)
    assert written["user"] == {"name": "ptc", "uid": 2000, "gid": 2000, "home": "/home/ptc"}
    assert not written["shares"]
    assert (written["munge_key"], written["slurm_conf"]) == (
        provision.FROM_CONTROLLER,
        provision.CONFIGLESS,
    )
    assert written["join_url"].startswith("https://")
    assert written["credentials_file"] == f"{node_paths.ELASTIC_TOKENS_DIR}/aws-credentials"
    assert written["cluster"] == "ptc"


def test_an_instance_mounts_the_cluster_s_shares_from_the_nfs_server(role: dict[str, Any]) -> None:
    written = ec2_block(
        {
            **role,
            "elastic_ec2_credentials_src": "/home/me/aws.ini",
            "elastic_ec2_nfs_server": "nfs.example",
            "elastic_ec2_shares": [{"name": "home", "path": "/home"}, {"path": "/opt/ptc"}],
        }
    )["ec2"]
    assert [(s["server"], s["path"]) for s in written["shares"]] == [
        ("nfs.example", "/home"),
        ("nfs.example", "/opt/ptc"),
    ]
    assert [s["options"] for s in written["shares"]] == [None, None]  # the join's default


@pytest.mark.parametrize("name", ["ptc-elastic-slurm-client.service.j2", "ptc-elastic-hook.j2"])
def test_boto3_finds_the_credentials_through_the_environment_only_when_given(
    role: dict[str, Any], name: str
) -> None:
    variable = provision.AWS_CREDENTIALS_VARIABLE
    context = {"__elastic_code_digest": "x", **role}
    assert variable not in render(name, context)
    given = render(name, {**context, "elastic_ec2_credentials_src": "/home/me/aws.ini"})
    assert f"{variable}={node_paths.ELASTIC_TOKENS_DIR}/aws-credentials" in given
    assert "/home/me/aws.ini" not in given  # the source's path stays on the deploying machine


def test_the_credentials_are_copied_root_only_and_never_logged() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "client.yml").read_text())
    (task,) = [t for t in tasks if t["name"] == "Install the AWS credentials for the ec2 sites"]
    assert task["ansible.builtin.copy"]["mode"] == "0600"
    assert task["ansible.builtin.copy"]["owner"] == "root"
    assert task["no_log"] is True


def test_the_manager_s_pool_holds_the_cloud_sites_nodes_by_site(role: dict[str, Any]) -> None:
    text = (ROLE / "templates" / "manager.yml.j2").read_text()
    start = text.index("{% for node in elastic_cloud_nodes")
    block = "pool:\n" + text[start : text.index("{% endfor %}", start) + len("{% endfor %}")]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    env.filters["int"] = int
    cloud = [{"name": "ec2-0", "site": "cloud", "cpus": 2, "memory_mb": 3800}]
    (node,) = yaml.safe_load(env.from_string(block).render(elastic_cloud_nodes=cloud))["pool"]
    assert node == {"name": "ec2-0", "cpus": 2, "memory_mb": 3800, "features": ["site=cloud"]}
    assert metrics.site_of(node["features"]) == "cloud"
    assert yaml.safe_load(env.from_string(block).render()) == {"pool": None}


def test_the_role_reads_the_cloud_nodes_where_the_sites_file_is_before_the_manager() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    names = [t["name"] for t in tasks]
    read = names.index("Read the cloud sites' nodes")
    assert read < names.index("Run the elastic manager")
    assert tasks[read]["delegate_to"] == "localhost" and tasks[read]["run_once"] is True
    assert tasks[read]["ansible.builtin.command"]["argv"][3] == "site-cloud-nodes"
