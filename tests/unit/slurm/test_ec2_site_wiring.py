"""An ec2 site reaches Slurm's hooks only when the deploy gave credentials and the site its
endpoint, region and image; the controller's client builds the site's EC2 control from the
sites file and its own ``ec2`` settings, and refuses, naming the setting, what is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from elastic.errors import InputError
from elastic.sites.ec2.control import Ec2Control
from elastic.slurm import hostlist, provision, service
from elastic.slurm.join import JoinTokens, KeyServer
from elastic.slurm.provision import (
    AWS_CREDENTIALS_VARIABLE,
    PlaybookProvisioner,
    control_of,
    provisioner_settings,
)
from elastic.slurm.sites import check_for_deploy, cloud_nodes, load_sites

EC2 = (
    "{region: us-east-1, image_id: ami-0123456789abcdef0, instance_type: c5.large, "
    "endpoint_url: 'http://10.10.1.1:5000'}"
)


def sites_file(tmp_path: Path, ec2: str = EC2) -> Path:
    path = tmp_path / "sites.yml"
    path.write_text(
        "sites:\n"
        "  - {name: here, price: 1, nodes: 'node-[0-1]'}\n"
        f"  - {{name: cloud, provider: ec2, price: 3, nodes: 'ec2-[0-1]', ec2: {ec2}}}\n"
    )
    return path


@pytest.fixture
def credentials(tmp_path: Path) -> Path:
    path = tmp_path / "aws-credentials"
    path.write_text("[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    path.chmod(0o600)
    return path


def test_the_deploy_takes_an_ec2_site_with_credentials_endpoint_region_and_image(
    tmp_path: Path, credentials: Path
) -> None:
    found = check_for_deploy(sites_file(tmp_path), ["node-0", "node-1"], credentials)
    assert [(s.name, s.provider) for s in found] == [("here", "local"), ("cloud", "ec2")]


@pytest.mark.parametrize(
    ("ec2", "given", "why"),
    [
        (
            EC2,
            None,
            r"\(cloud\): provider ec2: no AWS credentials given.*elastic_ec2_credentials_src",
        ),
        (EC2, "missing", r"elastic_ec2_credentials_src: .*missing is not a file"),
        (
            "{region: us-east-1, image_id: ami-0123456789abcdef0, instance_type: c5.large}",
            "file",
            r"sites\[1\] \(cloud\): field ec2.endpoint_url is missing",
        ),
    ],
)
def test_the_deploy_refuses_an_ec2_site_short_of_what_the_hooks_need(
    tmp_path: Path, credentials: Path, ec2: str, given: str | None, why: str
) -> None:
    path = sites_file(tmp_path, ec2)
    source = {None: None, "missing": tmp_path / "missing", "file": credentials}[given]
    with pytest.raises(InputError, match=why) as caught:
        check_for_deploy(path, ["node-0", "node-1"], source)
    assert str(path) in str(caught.value)


def client_ec2(credentials: Path, **changed: Any) -> dict[str, Any]:
    ec2 = {
        "cluster": "demo",
        "credentials_file": str(credentials),
        "munge_key": "/etc/munge/munge.key",
        "slurm_conf": "/etc/slurm/slurm.conf",
    }
    return {"ec2": {**ec2, **changed}}


def test_the_client_builds_the_site_s_ec2_control_from_the_sites_file(
    tmp_path: Path, credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(AWS_CREDENTIALS_VARIABLE, raising=False)
    path = sites_file(tmp_path)
    (_, cloud) = load_sites(path, hostlist.expand)
    extra = client_ec2(credentials)
    provisioner_settings(extra)  # the ec2 key is the client's own, not refused as unknown
    control = control_of(cloud, extra, f"sites file {path}: cloud")
    assert isinstance(control, Ec2Control)
    assert (control.cluster, control.site, control.site_nodes) == (
        "demo",
        "cloud",
        ("ec2-0", "ec2-1"),
    )
    assert control.provider.settings.endpoint_url == "http://10.10.1.1:5000"
    prov = PlaybookProvisioner(node_operation="release", control=control)
    assert prov.joins_by_user_data
    # boto3 finds the file by the variable, never on a command line
    import os

    assert os.environ[AWS_CREDENTIALS_VARIABLE] == str(credentials)


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({}, r"cloud: provider ec2: the controller has no ec2 settings.*credentials_src"),
        ({"ec2": {"cluster": "demo"}}, r"ec2.credentials_file: missing"),
        ("no-file", r"holds no AWS credentials at .*nowhere"),
        ("bad-cluster", r"ec2.cluster: 'Demo!'"),
        ("unknown", r"ec2.secret_key: not known"),
        ("bad-interval", r"ec2.sync_interval: -5 is not seconds >= 0"),
    ],
)
def test_the_client_refuses_an_ec2_site_it_cannot_reach(
    tmp_path: Path,
    credentials: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra: Any,
    why: str,
) -> None:
    monkeypatch.delenv(AWS_CREDENTIALS_VARIABLE, raising=False)
    path = sites_file(tmp_path)
    (_, cloud) = load_sites(path, hostlist.expand)
    if extra == "no-file":
        extra = client_ec2(tmp_path / "nowhere")
    elif extra == "bad-cluster":
        extra = client_ec2(credentials, cluster="Demo!")
    elif extra == "unknown":
        extra = client_ec2(credentials, secret_key="x")
    elif extra == "bad-interval":
        extra = client_ec2(credentials, sync_interval=-5)
    with pytest.raises(InputError, match=why):
        control_of(cloud, extra, f"sites file {path}: cloud")


def test_a_credentials_variable_naming_another_file_is_refused(
    tmp_path: Path, credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AWS_CREDENTIALS_VARIABLE, str(tmp_path / "other"))
    path = sites_file(tmp_path)
    (_, cloud) = load_sites(path, hostlist.expand)
    with pytest.raises(InputError, match=f"{AWS_CREDENTIALS_VARIABLE} is .*other"):
        control_of(cloud, client_ec2(credentials), "x")


def test_the_cloud_sites_nodes_are_read_for_slurm_conf_and_the_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ec2 = EC2.replace("}", ", cpus: 2, memory_mb: 3800}")
    path = sites_file(tmp_path, ec2)
    assert cloud_nodes(load_sites(path, hostlist.expand)) == [
        {"name": "ec2-0", "site": "cloud", "cpus": 2, "memory_mb": 3800},
        {"name": "ec2-1", "site": "cloud", "cpus": 2, "memory_mb": 3800},
    ]
    assert service.main(["site-cloud-nodes", "--sites", str(path)]) == 0
    assert [n["name"] for n in json.loads(capsys.readouterr().out)] == ["ec2-0", "ec2-1"]
    bad = sites_file(tmp_path, EC2.replace("}", ", cpus: many}"))
    assert service.main(["site-cloud-nodes", "--sites", str(bad)]) == InputError.exit_code
    assert "field ec2.cpus: 'many'" in capsys.readouterr().err


CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def joining(tmp_path: Path, credentials: Path, **changed: Any) -> dict[str, Any]:
    ca = tmp_path / "ca.crt"
    ca.write_text(CA_PEM)
    return client_ec2(
        credentials,
        munge_key="controller",
        slurm_conf="configless",
        join_url="https://10.10.1.1:8701",
        tokens_file=str(tmp_path / "join-tokens.json"),
        ca_file=str(ca),
        conf_server="10.10.1.1:6817",
        **changed,
    )


def test_each_launch_gets_a_token_for_its_node_and_no_key(
    tmp_path: Path, credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(AWS_CREDENTIALS_VARIABLE, raising=False)
    (munge := tmp_path / "munge.key").write_bytes(b"THE-MUNGE-KEY")
    path = sites_file(tmp_path)
    (_, cloud) = load_sites(path, hostlist.expand)
    extra = joining(tmp_path, credentials)
    control = control_of(cloud, extra, "x")
    assert isinstance(control, Ec2Control)
    join = control.user_data("ec2-0")
    assert join.munge_key == "https://10.10.1.1:8701/v1/join/ec2-0/munge.key"
    assert join.conf_server == "10.10.1.1:6817" and join.ca_pem == CA_PEM
    script = join.render("demo", "cloud", "ec2-0")
    assert "THE-MUNGE-KEY" not in script
    assert join.key_token is not None
    tokens = JoinTokens(tmp_path / "join-tokens.json")
    server = KeyServer(tokens, munge)
    assert server.key_for("ec2-0", join.key_token) == b"THE-MUNGE-KEY"
    assert server.key_for("ec2-0", join.key_token) is None


@pytest.mark.parametrize(
    ("changed", "why"),
    [
        (
            {"join_url": "http://10.10.1.1:8701"},
            r"ec2.join_url: 'http://10.10.1.1:8701' is not an https",
        ),
        ({"conf_server": None}, r"ec2.conf_server: missing \(slurm_conf is configless\)"),
        ({"tokens_file": None}, r"ec2.tokens_file: missing \(munge_key is controller\)"),
        ({"ca_file": "/nonexistent/ca.crt"}, r"ec2.ca_file: cannot read it"),
        ({"join_url": ""}, r"ec2.join_url: empty"),
    ],
)
def test_a_join_from_the_controller_is_refused_short_of_its_settings(
    tmp_path: Path,
    credentials: Path,
    monkeypatch: pytest.MonkeyPatch,
    changed: dict[str, Any],
    why: str,
) -> None:
    monkeypatch.delenv(AWS_CREDENTIALS_VARIABLE, raising=False)
    path = sites_file(tmp_path)
    (_, cloud) = load_sites(path, hostlist.expand)
    extra = joining(tmp_path, credentials)
    for key, value in changed.items():
        if value is None:
            del extra["ec2"][key]
        else:
            extra["ec2"][key] = value
    with pytest.raises(InputError, match=why):
        control_of(cloud, extra, "x")


def test_the_client_s_endpoint_hands_the_key_once_to_its_node(tmp_path: Path) -> None:
    (munge := tmp_path / "munge.key").write_bytes(b"THE-MUNGE-KEY")
    tokens = JoinTokens(tmp_path / "join-tokens.json")
    settings = service.SlurmClientSettings(
        manager_url="https://127.0.0.1:1",
        token_file=tmp_path / "t",
        extra={"ec2": {"munge_key": "controller", "tokens_file": str(tokens.path),
                       "key_file": str(munge)}},
    )  # fmt: skip
    keys = service.key_server(settings)
    assert keys is not None
    app = service.create_app(object(), "partition-token", run_loop=False, keys=keys)  # type: ignore[arg-type]
    token = tokens.issue("ec2-0")
    with TestClient(app) as http:
        url = "/v1/join/ec2-0/munge.key"
        assert http.get(url).status_code == 403
        assert http.get(url, headers={"Authorization": "Bearer partition-token"}).status_code == 403
        other = http.get("/v1/join/ec2-1/munge.key", headers={"Authorization": f"Bearer {token}"})
        assert other.status_code == 403  # and the token is spent
        token = tokens.issue("ec2-0")
        got = http.get(url, headers={"Authorization": f"Bearer {token}"})
        assert (got.status_code, got.content) == (200, b"THE-MUNGE-KEY")
        assert http.get(url, headers={"Authorization": f"Bearer {token}"}).status_code == 403
    no_ec2 = service.SlurmClientSettings(manager_url="https://x:1", token_file=tmp_path / "t")
    assert service.key_server(no_ec2) is None


@pytest.mark.parametrize(
    ("node", "why"),
    [
        ({"user": {"name": "ptc", "gid": 2000, "home": "/home/ptc"}}, r"ec2\.user\.uid: missing"),
        ({"user": "ptc"}, r"ec2\.user: expected \{name, uid, gid, home\}"),
        ({"shares": [{"server": "", "path": "/home"}]}, r"ec2\.shares: server ''"),
        ({"shares": "/home"}, r"ec2\.shares: expected a list"),
    ],
)
def test_the_instances_user_and_shares_are_checked_naming_the_field(
    node: dict[str, object], why: str
) -> None:
    raw = {"munge_key": "s3://bucket/munge.key", "slurm_conf": "s3://bucket/slurm.conf", **node}
    with pytest.raises(InputError, match=why):
        provision._user_data(raw)


def test_the_instances_user_and_shares_reach_their_user_data() -> None:
    raw = {
        "munge_key": "s3://bucket/munge.key",
        "slurm_conf": "s3://bucket/slurm.conf",
        "user": {"name": "ptc", "uid": 2000, "gid": 2000, "home": "/home/ptc"},
        "shares": [
            {"server": "nfs.example", "path": "/home", "options": "nodev,ro"},
            {"server": "nfs.example", "path": "/opt/ptc", "options": None},
        ],
    }
    script = provision._user_data(raw)("ec2-0").render("ptc", "cloud", "ec2-0")
    assert "share nfs.example /home nodev,ro" in script
    assert "share nfs.example /opt/ptc nodev,nosuid" in script
    assert "useradd -u 2000 -g 2000 -d /home/ptc" in script
