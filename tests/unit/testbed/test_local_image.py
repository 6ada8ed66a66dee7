"""The local testbed's two disk images: which packages each carries and how they are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic.errors import InputError
from elastic.testbed.backends.local import image
from elastic.testbed.backends.local.role_packages import role_package_sets, role_packages

ROLES = Path(__file__).resolve().parents[3] / "roles"


def write_role(root: Path, name: str, tasks: str) -> None:
    (root / name / "tasks").mkdir(parents=True)
    (root / name / "tasks" / "main.yml").write_text(tasks)


def test_packages_installed_without_recommends_are_a_set_of_their_own(tmp_path: Path) -> None:
    write_role(
        tmp_path, "a", "- ansible.builtin.apt:\n    name: [x, y]\n    install_recommends: false\n"
    )
    write_role(tmp_path, "b", "- ansible.builtin.apt:\n    name: [y, z]\n")
    # y is installed with its Recommends by some role, so the image installs it that way too
    assert role_package_sets(tmp_path) == (("y", "z"), ("x",))
    assert role_packages(tmp_path) == ("x", "y", "z")


def test_a_task_s_own_vars_and_its_block_s_name_its_packages(tmp_path: Path) -> None:
    write_role(
        tmp_path,
        "a",
        "- ansible.builtin.apt:\n    name: '{{ __a_packages }}'\n  vars:\n    __a_packages: [x, y]\n"
        "- block:\n    - ansible.builtin.apt:\n        name: '{{ __a_packages + [__a_more] }}'\n"
        "      vars:\n        __a_more: w\n  vars:\n    __a_packages: [z]\n",
    )
    assert role_package_sets(tmp_path) == (("w", "x", "y", "z"), ())


def test_the_roles_own_split() -> None:
    with_recommends, plain = role_package_sets(ROLES)
    assert "ansible" in plain and "ansible" not in with_recommends
    assert {"slurmd", "slurmctld", "munge", "mariadb-server"} <= set(with_recommends)


def test_the_prepared_image_is_named_after_the_bare_one_and_its_own_recipe() -> None:
    recipe = image.Recipe(mirror="http://m/debian", recommended=("a",), plain=("b",))
    other = image.Recipe(mirror="http://m/debian", recommended=("a", "b"), plain=())
    assert recipe.cached == other.cached == ("a", "b")
    assert recipe.ref == other.ref, "the bare image does not depend on how packages install"
    assert recipe.prepared_ref.startswith(f"{recipe.ref}-prepared-")
    assert recipe.prepared_ref != other.prepared_ref
    assert recipe.ref_of("bare") == recipe.ref
    assert recipe.ref_of("prepared") == recipe.prepared_ref
    assert image.DEFAULT_KIND == image.KINDS[0] == "prepared"


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(InputError, match="image: 'golden' is not a local disk image"):
        image.Recipe(mirror="http://m/debian").ref_of("golden")
