"""`ptc adopt`: an experiment made in the CloudLab portal, from its saved manifest to an
inventory, as docs/cloudlab.md tells users to bring one to ptc."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml
from testbed_support import RECORDINGS
from typer.testing import CliRunner

from elastic.cli import experiment as experiment_cli
from elastic.errors import InputError, NotFoundError
from elastic.testbed import experiment as experiments
from elastic.testbed import lifecycle
from elastic.testbed.experiment import State

PORTAL_8X25 = RECORDINGS / "reconstructed_cloudlab_portal_manifest_8x25.xml"


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "id_portal"
    path.write_text("not a real key: ptc only links it\n")
    path.chmod(0o600)
    return path


def hosts(exp: experiments.Experiment) -> dict[str, dict[str, object]]:
    inv = yaml.safe_load(exp.inventory_path.read_text())
    return dict(inv["all"]["hosts"])


def test_adopt_builds_the_inventory_with_the_chosen_user_and_links_the_key(key: Path) -> None:
    exp = lifecycle.adopt("ptadopt", PORTAL_8X25, key, user="mchen")
    assert exp.adopted and exp.state is State.READY
    assert exp.key_path.is_symlink() and exp.key_path.resolve() == key.resolve()
    found = hosts(exp)
    assert len(found) == 8
    assert {h["ansible_user"] for h in found.values()} == {"mchen"}
    assert experiments.load("ptadopt").adopted


def test_ambiguous_logins_are_refused_and_nothing_is_kept(key: Path) -> None:
    with pytest.raises(InputError, match="--user"):
        lifecycle.adopt("ptadopt", PORTAL_8X25, key)
    # the inventory failed, but the record is kept so `ptc inventory --user` can finish it
    assert experiments.load("ptadopt").adopted


def test_bad_input_names_the_option(key: Path, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="--manifest"):
        lifecycle.adopt("ptadopt", tmp_path / "nope.xml", key)
    with pytest.raises(NotFoundError, match="--key"):
        lifecycle.adopt("ptadopt", PORTAL_8X25, tmp_path / "nokey")
    request = tmp_path / "request.xml"
    request.write_text(
        '<rspec xmlns="http://www.geni.net/resources/rspec/3" type="request">'
        '<node client_id="n"/></rspec>'
    )
    with pytest.raises(InputError, match="no <login> for n"):
        lifecycle.adopt("ptadopt", request, key)
    assert not experiments.exists("ptadopt")


def test_replace_takes_a_new_manifest_only_for_adopted_experiments(key: Path) -> None:
    lifecycle.adopt("ptadopt", PORTAL_8X25, key, user="mchen")
    with pytest.raises(InputError, match="--replace"):
        lifecycle.adopt("ptadopt", PORTAL_8X25, key, user="mchen")
    exp = lifecycle.adopt("ptadopt", PORTAL_8X25, key, user="mchen", replace_manifest=True)
    assert len(hosts(exp)) == 8


def test_modify_is_refused_and_down_only_forgets(key: Path) -> None:
    lifecycle.adopt("ptadopt", PORTAL_8X25, key, user="mchen")
    with pytest.raises(InputError, match="portal's Modify"):
        lifecycle.modify("ptadopt", {})
    events: list[str] = []
    lifecycle.down("ptadopt", lambda e: events.append(e.message))
    assert not experiments.exists("ptadopt")
    assert key.exists()  # the user's own key is never touched
    assert any("terminate the experiment in the portal" in m for m in events)


def test_cli_adopt(key: Path) -> None:
    app = typer.Typer()
    experiment_cli.register(app)
    args = ["adopt", "ptadopt", "--manifest", str(PORTAL_8X25), "--key", str(key)]
    result = CliRunner().invoke(app, [*args, "--user", "mchen"])
    assert result.exit_code == 0, result.output
    assert len(hosts(experiments.load("ptadopt"))) == 8
