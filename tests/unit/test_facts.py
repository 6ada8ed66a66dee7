"""Every fact has one home in ``elastic``, and what cannot import it agrees with it.

A path on the nodes, a group's name, a wire constant, an RSpec namespace: each is defined once
(``elastic.node_paths``, ``elastic.cluster_groups``, ``elastic.wire``,
``elastic.profile.namespaces``, ...) and imported everywhere else. Two kinds of place cannot
import it: the roles (YAML and Jinja, which decide the paths on the nodes) and the files that
run without the package (``tests/support/probe.py``, the local testbed's node overlay). The
first tests hold each of those to its owner, so changing one side alone fails here, naming the
other. The last ones fail when a module spells an owned literal again instead of importing it.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from support import probe
from support.role_vars import render, role_context

from elastic import cluster_groups, node_paths, wire
from elastic.configserver import election, snapshot
from elastic.deploy import runner
from elastic.manager import etcd_store, tokens
from elastic.manager.core import ManagerConfig
from elastic.manager.service import DEFAULT_TTL
from elastic.paths import REPO_ROOT
from elastic.policies import DEFAULT_DOWNSCALING_POLICY
from elastic.slurm import provision
from elastic.slurm.provision import PlaybookProvisioner
from elastic.slurm.service import SlurmClientSettings
from elastic.testbed.backends.cloudlab import portal
from elastic.testbed.backends.local import backend, control, fileserver
from elastic.testbed.groups import KNOWN_GROUPS

ROLES = REPO_ROOT / "roles"
ELASTIC_ROLE = ROLES / "elastic"
OVERLAY = REPO_ROOT / "elastic" / "testbed" / "backends" / "local" / "overlay"

# -- reading the roles ---------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def elastic_role() -> dict[str, Any]:
    return role_context("elastic")


def template_setting(template: Path, key: str, context: dict[str, Any]) -> Any:
    """The value a YAML template writes for its top-level ``key``, rendered and parsed."""
    lines = [ln for ln in template.read_text().splitlines() if ln.startswith(f"{key}: ")]
    assert len(lines) == 1, f"{template}: expected one line `{key}: ...`, found {len(lines)}"
    return yaml.safe_load(render(lines[0], context))[key]


def task_values(tasks: Path, keys: tuple[str, ...], context: dict[str, Any]) -> set[str]:
    """Every value of ``keys`` anywhere in a task file, rendered where it can be."""

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in keys and isinstance(v, str):
                    yield v
                yield from walk(v)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    found = set()
    for value in walk(load_yaml(tasks)):
        try:
            found.add(render(value, context))
        except jinja2.TemplateError:
            found.add(value)
    return found


# -- the elastic role's paths, names, ports and settings -------------------------------------------


def test_the_elastic_role_puts_its_files_where_node_paths_says(
    elastic_role: dict[str, Any],
) -> None:
    assert elastic_role["elastic_config_dir"] == node_paths.ELASTIC_CONFIG_DIR
    assert elastic_role["elastic_tls_dir"] == node_paths.ELASTIC_TLS_DIR
    assert elastic_role["__elastic_tokens_dir"] == node_paths.ELASTIC_TOKENS_DIR
    assert elastic_role["elastic_state_dir"] == node_paths.ELASTIC_STATE_DIR
    assert elastic_role["elastic_log_dir"] == node_paths.ELASTIC_LOG_DIR
    assert elastic_role["elastic_venv"] == node_paths.ELASTIC_VENV
    assert elastic_role["elastic_repository"] == node_paths.REPOSITORY
    assert elastic_role["elastic_playbook_state_dir"] == node_paths.PLAYBOOK_STATE_DIR
    assert elastic_role["elastic_etcd_client_dir"] == node_paths.ETCD_CLIENT_DIR
    # the wheels are downloaded where Ansible runs, which is where ptc deploy fingerprints them
    home = "{{ lookup('env', 'HOME') }}"
    assert elastic_role["elastic_wheelhouse"] == home + "/" + str(
        runner.WHEELHOUSE.relative_to(Path.home())
    )


def test_the_elastic_role_writes_the_configurations_the_services_read_by_default(
    elastic_role: dict[str, Any],
) -> None:
    written = task_values(ELASTIC_ROLE / "tasks" / "client.yml", ("dest",), elastic_role)
    assert node_paths.SLURM_CLIENT_CONFIG in written
    assert node_paths.CLIENT_KNOWN_HOSTS in written
    written = task_values(ELASTIC_ROLE / "tasks" / "manager.yml", ("dest",), elastic_role)
    assert node_paths.MANAGER_CONFIG in written
    tls = task_values(ELASTIC_ROLE / "tasks" / "tls.yml", ("dest",), elastic_role)
    assert {node_paths.ELASTIC_CA, node_paths.ELASTIC_NODE_CERT, node_paths.ELASTIC_NODE_KEY} <= tls


def test_the_slurm_client_configuration_names_the_files_of_node_paths(
    elastic_role: dict[str, Any],
) -> None:
    template = ELASTIC_ROLE / "templates" / "slurm-client.yml.j2"

    def setting(key: str) -> Any:
        return template_setting(template, key, elastic_role)

    assert setting("manager_ca") == node_paths.ELASTIC_CA
    assert setting("tls") == {
        "cert": node_paths.ELASTIC_NODE_CERT,
        "key": node_paths.ELASTIC_NODE_KEY,
    }
    partition = SlurmClientSettings.partition
    assert setting("token_file") == f"{node_paths.ELASTIC_TOKENS_DIR}/partition-{partition}.token"
    assert setting("log_file") == node_paths.HOOKS_LOG
    assert setting("timings_file") == node_paths.RESUME_TIMINGS
    # the provisioner's settings, each the default PlaybookProvisioner would take without it
    assert tuple(setting("playbook_command")) == PlaybookProvisioner.playbook_command
    assert setting("playbook_state_dir") == str(PlaybookProvisioner.playbook_state_dir)
    assert setting("ssh_key") == str(PlaybookProvisioner.ssh_key)
    assert setting("known_hosts") == str(PlaybookProvisioner.known_hosts)
    assert setting("port") == wire.CLIENT_PORT


def test_the_manager_configuration_names_the_files_and_keys_of_their_owners(
    elastic_role: dict[str, Any],
) -> None:
    template = ELASTIC_ROLE / "templates" / "manager.yml.j2"

    def setting(key: str) -> Any:
        return template_setting(template, key, elastic_role)

    assert setting("tokens") == node_paths.ELASTIC_TOKENS_DIR
    assert setting("tls") == {
        "cert": node_paths.ELASTIC_NODE_CERT,
        "key": node_paths.ELASTIC_NODE_KEY,
        "ca": node_paths.ELASTIC_CA,
    }
    assert setting("state") == node_paths.MANAGER_STATE
    assert setting("port") == wire.MANAGER_PORT
    assert setting("store")["key"] == etcd_store.DEFAULT_KEY
    assert setting("store")["credentials"] == node_paths.ETCD_CLIENT_DIR
    assert setting("election")["key"] == election.DEFAULT_KEY


def test_the_elastic_units_and_programs_run_what_node_paths_names(
    elastic_role: dict[str, Any],
) -> None:
    def rendered(name: str) -> str:
        return render((ELASTIC_ROLE / "templates" / name).read_text(), elastic_role)

    python = f"{node_paths.ELASTIC_VENV}/bin/python"
    manager = rendered("ptc-elastic-manager.service.j2")
    assert f"{python} -m elastic.manager --config {node_paths.MANAGER_CONFIG}" in manager
    client = rendered("ptc-elastic-slurm-client.service.j2")
    assert f"{python} -m elastic.slurm --config {node_paths.SLURM_CLIENT_CONFIG} serve" in client
    for unit in (manager, client):
        assert f"PYTHONPATH={node_paths.REPOSITORY}" in unit
    hook = rendered("ptc-elastic-hook.j2")
    assert f"--config {node_paths.SLURM_CLIENT_CONFIG} " in hook
    assert f">>{node_paths.HOOKS_LOG} " in hook
    rebalance = rendered("ptc-elastic-rebalance.service.j2")
    assert f"ConditionPathExists={node_paths.SITES_FILE}" in rebalance
    assert f"--sites {node_paths.SITES_FILE} " in rebalance
    assert f"--log {node_paths.REBALANCE_LOG}" in rebalance
    assert f"--policy {DEFAULT_DOWNSCALING_POLICY}" in rebalance


def test_the_elastic_role_s_groups_are_the_cluster_s(elastic_role: dict[str, Any]) -> None:
    assert elastic_role["elastic_manager_group"] == cluster_groups.CONFIG_SERVER
    assert elastic_role["elastic_etcd_group"] == cluster_groups.CONFIG_SERVER
    assert elastic_role["elastic_client_group"] == cluster_groups.SLURM_CONTROLLER
    assert elastic_role["elastic_pool_group"] == cluster_groups.SLURM_COMPUTE


def test_the_elastic_role_s_defaults_are_the_services_defaults(
    elastic_role: dict[str, Any],
) -> None:
    """What the role writes when nobody sets anything is what the services assume when a
    setting is left out of their files."""
    assert elastic_role["elastic_manager_port"] == wire.MANAGER_PORT
    assert elastic_role["elastic_client_port"] == wire.CLIENT_PORT
    assert elastic_role["elastic_notify_interval"] == ManagerConfig.notify_interval
    assert elastic_role["elastic_max_pv_age"] == ManagerConfig.max_pv_age
    assert elastic_role["elastic_manager_election_ttl"] == DEFAULT_TTL
    assert elastic_role["elastic_tokens_etcd_prefix"] == tokens.DEFAULT_PREFIX
    assert elastic_role["elastic_partition"] == SlurmClientSettings.partition
    assert elastic_role["elastic_policy"] == SlurmClientSettings.policy
    assert elastic_role["elastic_policy_seed"] == SlurmClientSettings.seed
    assert elastic_role["elastic_pv_interval"] == SlurmClientSettings.pv_interval
    assert elastic_role["elastic_requeue_lead"] == SlurmClientSettings.requeue_lead
    assert elastic_role["elastic_register_timeout"] == SlurmClientSettings.register_timeout
    assert elastic_role["elastic_node_operation"] == PlaybookProvisioner.node_operation
    assert elastic_role["elastic_resume_playbook"] == PlaybookProvisioner.resume_playbook
    assert elastic_role["elastic_fresh_playbook"] == PlaybookProvisioner.fresh_playbook
    assert elastic_role["elastic_playbook_timeout"] == PlaybookProvisioner.playbook_timeout
    assert elastic_role["elastic_rebalance_policy"] == DEFAULT_DOWNSCALING_POLICY
    for playbook in (PlaybookProvisioner.resume_playbook, PlaybookProvisioner.fresh_playbook):
        assert (REPO_ROOT / playbook).is_file(), f"{playbook} is not a playbook of the repository"


def test_the_elastic_role_checks_for_the_control_service_where_the_testbed_mounts_it(
    elastic_role: dict[str, Any],
) -> None:
    checked = task_values(ELASTIC_ROLE / "tasks" / "client.yml", ("path",), elastic_role)
    assert str(control.SOCKET) in checked


def test_the_portal_settings_the_role_writes_are_the_ones_the_provisioner_reads(
    elastic_role: dict[str, Any],
) -> None:
    """The slurm client's ``node_control`` block under elastic_node_control=cloudlab_portal,
    rendered with the role's defaults, builds the portal control with the portal's own default
    URL and the token where the role installs it; the role's choices are the provisioner's."""
    text = (ELASTIC_ROLE / "templates" / "slurm-client.yml.j2").read_text()
    block = text[text.index("{% if elastic_node_control == 'cloudlab_portal' %}") :]
    block = block[: block.index("{% endif %}") + len("{% endif %}")]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["to_json"] = json.dumps
    env.filters["bool"] = bool
    context = {
        **elastic_role,
        "elastic_node_control": "cloudlab_portal",
        "elastic_cloudlab_experiment": "ptc,pool",
    }
    written = yaml.safe_load(env.from_string(block).render(context))
    built = provision.node_control(written)
    assert isinstance(built, portal.PortalControl)
    assert built.settings.url == portal.DEFAULT_URL
    assert (
        built.settings.token_file == Path(node_paths.ELASTIC_TOKENS_DIR) / "cloudlab-portal.token"
    )
    assert (built.settings.experiment, built.settings.allow_broad_token) == ("ptc,pool", False)
    specs = load_yaml(ELASTIC_ROLE / "meta" / "argument_specs.yml")
    options = specs["argument_specs"]["main"]["options"]
    assert options["elastic_node_control"]["choices"] == list(provision.NODE_CONTROLS)
    assert options["elastic_node_control"]["default"] == provision.NODE_CONTROLS[0]


# -- the other roles, the inventories, the profile and the node overlay ---------------------------


def test_the_other_roles_paths_are_node_paths() -> None:
    etcd = role_context("etcd")
    assert etcd["etcd_client_dir"] == node_paths.ETCD_CLIENT_DIR
    # the snapshots' bucket prefix, and the tokens kept among the secrets only root may read
    assert etcd["etcd_snapshot_prefix"] == snapshot.DEFAULT_PREFIX
    assert tokens.DEFAULT_PREFIX.startswith(etcd["etcd_secrets_prefix"])
    controller = role_context("ansible_controller")
    assert controller["ansible_controller_repository"] == node_paths.REPOSITORY
    assert controller["ansible_controller_state_dir"] == node_paths.PLAYBOOK_STATE_DIR
    installed = task_values(ROLES / "ansible_controller" / "tasks" / "main.yml", ("dest",), {})
    assert node_paths.PLAYBOOK_COMMAND in installed
    assert role_context("hpgmg")["hpgmg_prefix"] == node_paths.HPGMG_PREFIX
    assert role_context("hpcc")["hpcc_prefix"] == node_paths.HPCC_PREFIX


def test_the_shares_are_where_the_testbed_mounts_them() -> None:
    cluster = load_yaml(REPO_ROOT / "inventories" / "group_vars" / "all" / "cluster.yml")
    assert {s["name"]: s["path"] for s in cluster["ptc_shares"]} == fileserver.SHARES
    assert cluster["ptc_software_prefix"] == node_paths.SHARED_SOFTWARE
    for role, key in (("nfs_server", "nfs_server_exports"), ("nfs_client", "nfs_client_mounts")):
        assert {s["name"]: s["path"] for s in role_context(role)[key]} == fileserver.SHARES
    local = load_yaml(REPO_ROOT / "inventories" / "group_vars" / "local.yml")
    assert local["nfs_local_shared_root"] == fileserver.SHARED_MOUNT
    assert local["ptc_nfs_server"] == fileserver.HOSTNAME


def test_the_mesh_key_is_the_one_the_startup_script_installs() -> None:
    script = (REPO_ROOT / "profiles" / "startup.sh").read_text()
    ssh_dir = re.search(r'^SSH_DIR="\$ROOT(/[^"]+)"$', script, re.M)
    keyfile = re.search(r"ssh-ed25519\) keyfile=(\S+) ;;", script)
    assert ssh_dir and keyfile, "startup.sh no longer says where the ed25519 key goes"
    assert f"{ssh_dir.group(1)}/{keyfile.group(1)}" == node_paths.MESH_KEY


def test_the_node_overlay_reads_geni_data_where_the_testbed_mounts_it() -> None:
    geni_get = (OVERLAY / "usr" / "local" / "bin" / "geni-get").read_text()
    assert f'DATA = Path("{backend.GENI_DIR}")' in geni_get
    execute = (OVERLAY / "usr" / "local" / "bin" / "ptc-run-execute").read_text()
    assert f"geni={backend.GENI_DIR}\n" in execute
    unit = (OVERLAY / "etc" / "systemd" / "system" / "ptc-geni-execute.path").read_text()
    assert f"PathExists={backend.GENI_DIR}/ready" in unit


# -- what runs without the package --------------------------------------------------------------


def test_the_probe_s_copies_are_their_owners_values() -> None:
    """probe.py runs on a node's system Python, as a file, without the elastic package."""
    assert probe.ACTIVE_HEADER == wire.ACTIVE_HEADER
    assert probe.DEFAULT_CA == node_paths.ELASTIC_CA
    assert not [
        n for n in ast.walk(ast.parse(Path(probe.__file__).read_text()))
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("elastic")
    ], "probe.py imports elastic: then it should import these instead of copying them"  # fmt: skip


def test_the_etcd_inventory_plugin_s_default_is_the_etcd_role_s_client_directory() -> None:
    """Ansible reads a plugin's DOCUMENTATION as a literal, so its default is a copy."""
    tree = ast.parse((REPO_ROOT / ETCD_PLUGIN).read_text())
    (documentation,) = [
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and [getattr(t, "id", None) for t in n.targets] == ["DOCUMENTATION"]
        and isinstance(n.value, ast.Constant)
    ]
    options = yaml.safe_load(documentation)["options"]
    assert options["credentials"]["default"] == node_paths.ETCD_CLIENT_DIR


# -- the groups ----------------------------------------------------------------------------------


def test_every_cluster_group_is_known_to_the_testbed_and_no_other() -> None:
    assert set(cluster_groups.ALL) == set(KNOWN_GROUPS)
    assert len(set(cluster_groups.ALL)) == len(cluster_groups.ALL)


# -- no second copy -----------------------------------------------------------------------------

NODE_PATHS = "elastic/node_paths.py"
PROBE = "tests/support/probe.py"  # checked copies, above
ETCD_PLUGIN = "plugins/inventory/ptc_etcd.py"


def contains(text: str) -> re.Pattern[str]:
    return re.compile(re.escape(text))


def whole(text: str) -> re.Pattern[str]:
    """A literal that is a fact when it is the whole string (in a sentence, it is not)."""
    return re.compile(rf"^{re.escape(text)}$")


# (a pattern of the fact in a string literal, the one file allowed to spell it, files allowed a
# copy that a test above holds to the owner)
OWNED: list[tuple[re.Pattern[str], str, frozenset[str]]] = [
    (contains("/etc/ptc-elastic"), NODE_PATHS, frozenset({PROBE})),
    (contains("/var/lib/ptc-elastic"), NODE_PATHS, frozenset()),
    (contains("/var/log/ptc-elastic"), NODE_PATHS, frozenset()),
    (contains("/opt/ptc-elastic"), NODE_PATHS, frozenset()),
    (re.compile(r"/opt/ptc(?![\w-])"), NODE_PATHS, frozenset()),  # the software share
    (contains("/local/repository"), NODE_PATHS, frozenset()),
    (contains("/var/lib/ptc/ansible"), NODE_PATHS, frozenset()),
    (contains("/usr/local/sbin/ptc-playbook"), NODE_PATHS, frozenset()),
    (contains("/root/.ssh/id_ed25519"), NODE_PATHS, frozenset()),
    (contains("/etc/ptc/etcd"), NODE_PATHS, frozenset({ETCD_PLUGIN})),
    (contains("/run/ptc-testbed"), "elastic/testbed/backends/local/control/__init__.py", frozenset()),
    (contains("X-Ptc-Active-Manager"), "elastic/wire.py", frozenset({PROBE})),
    (contains("/v1/notify-delete-pending"), "elastic/wire.py", frozenset()),
    (contains("io.ptc."), "elastic/testbed/backends/local/podman.py", frozenset()),
    (contains("http://www.geni.net/resources/rspec"), "elastic/profile/namespaces.py", frozenset()),
    (contains("http://www.protogeni.net/resources/rspec"), "elastic/profile/namespaces.py", frozenset()),
    (contains("http://www.w3.org/2001/XMLSchema-instance"), "elastic/profile/namespaces.py", frozenset()),
    (contains("emulab.net.parameter."), "elastic/profile/namespaces.py", frozenset()),
    *((whole(name), "elastic/cluster_groups.py", frozenset()) for name in cluster_groups.ALL),
]  # fmt: skip
SCANNED = ("elastic", "benchmarks", "tests/support", "plugins")


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants: prose may name a value, code may not."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def literals_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal of a file but its docstrings, f-strings' parts too."""
    tree = ast.parse(path.read_text(), str(path))
    skip = docstrings(tree)
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and id(node) not in skip:
            yield node.lineno, text


def string_literals() -> Iterator[tuple[str, int, str]]:
    for top in SCANNED:
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            rel = str(path.relative_to(REPO_ROOT))
            yield from ((rel, line, text) for line, text in literals_of(path))


def test_each_owned_literal_is_spelled_by_its_owner_alone() -> None:
    literals = list(string_literals())
    wrong = []
    for fact, owner, copies in OWNED:
        spelled = {(f, line, m.group()) for f, line, text in literals if (m := fact.search(text))}
        assert any(f == owner for f, _, _ in spelled), f"{owner} no longer spells {fact.pattern}"
        wrong += [f"{f}:{line} spells {found!r} (import it from {owner})"
                  for f, line, found in sorted(spelled) if f != owner and f not in copies]  # fmt: skip
    assert not wrong, "a second copy of an owned fact:\n" + "\n".join(wrong)


def test_the_copy_check_sees_a_copy_in_code_and_none_in_prose(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Prose may name /etc/ptc-elastic."""\n\n\n'
        'def f() -> str:\n    """And here: /etc/ptc-elastic."""\n    return f"{1}:/etc/ptc-elastic/x"\n'
    )
    assert list(literals_of(module)) == [(6, ":/etc/ptc-elastic/x")]


# -- references to the documentation -----------------------------------------------------------

DOC_REFERENCE = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+)|,? \(?\"([^\"]+)\")")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_comments_name_documentation_sections_that_exist() -> None:
    """A comment that sends the reader to a page's section (``docs/x.md#anchor`` or
    ``docs/x.md, "Heading"``) names one that is there: pages move, and such pointers rot."""
    wrong = []
    checked = 0
    sources = [
        *(p for top in (*SCANNED, "tests/infra", "tests/unit") for p in (REPO_ROOT / top).rglob("*.py")),
        *(REPO_ROOT / "inventories").rglob("*.yml"),
    ]  # fmt: skip
    for path in sources:
        if path.is_relative_to(REPO_ROOT / "tests" / "unit" / "roles") or path == Path(__file__):
            continue
        for match in DOC_REFERENCE.finditer(path.read_text()):
            checked += 1
            page = REPO_ROOT / "docs" / match.group(1)
            if not page.is_file():
                wrong.append(f"{path.relative_to(REPO_ROOT)}: docs/{match.group(1)} does not exist")
                continue
            headings = [
                ln.lstrip("#").strip() for ln in page.read_text().splitlines() if ln.startswith("#")
            ]
            anchor = match.group(2)
            # a title broken over comment or docstring lines, joined again
            title = re.sub(r"\s*\n\s*#?\s*", " ", match.group(3)) if match.group(3) else None
            if anchor and anchor not in {slug(h) for h in headings}:
                wrong.append(
                    f"{path.relative_to(REPO_ROOT)}: no #{anchor} in docs/{match.group(1)}"
                )
            if title and title not in headings:
                wrong.append(
                    f"{path.relative_to(REPO_ROOT)}: no {title!r} in docs/{match.group(1)}"
                )
    assert checked >= 5, "the pattern no longer finds the references it is for"
    assert not wrong, "\n".join(wrong)
