"""One test per geni-lib 0.9.9.4 defect: the defect shows with its workaround off, not with it on.

Each check runs in a fresh interpreter, because geni-lib keeps global state (the portal context
singleton, patched classes) that one process cannot undo.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib

import pytest

from elastic import paths
from elastic.errors import PtcError
from elastic.profile import genilib_compat


def run_py(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(paths.REPO_ROOT)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=paths.REPO_ROOT,
        timeout=60,
        check=False,
    )


def install_line(skip: set[str]) -> str:
    return f"from elastic.profile import genilib_compat; genilib_compat.install(skip={skip!r})"


# --- print_statements ----------------------------------------------------------------------

IMPORT_PORTAL = """
{install}
try:
    import geni.portal
except SyntaxError as err:
    print("SyntaxError", err.lineno)
else:
    print("imported")
"""


def test_print_statements_defect_without_workaround() -> None:
    out = run_py(IMPORT_PORTAL.format(install=install_line(set(genilib_compat.WORKAROUNDS))))
    assert out.stdout.startswith("SyntaxError"), out.stderr


def test_print_statements_fixed_with_workaround() -> None:
    # Only this workaround: proves it alone makes geni.portal importable.
    others = set(genilib_compat.WORKAROUNDS) - {"print_statements"}
    out = run_py(IMPORT_PORTAL.format(install=install_line(others)))
    assert out.stdout.strip() == "imported", out.stderr


def test_fix_portal_source_rewrites_only_statements() -> None:
    src = 'x = 1\n  print "a %s" % x\nprint(x)\nprinter = 2\nval = raw_input("?")\n'
    assert genilib_compat.fix_portal_source(src) == (
        'x = 1\n  print("a %s" % x)\nprint(x)\nprinter = 2\nval = input("?")\n'
    )


# --- six -----------------------------------------------------------------------------------


def test_six_missing_becomes_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "six", None)  # makes `import six` raise ImportError
    with pytest.raises(PtcError, match="six"):
        genilib_compat.check_six()


def test_six_is_declared_because_genilib_does_not() -> None:
    # Removing the dependency from pyproject.toml removes the workaround: catch that.
    deps = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]
    assert any(d.split(">")[0].split("=")[0].strip() == "six" for d in deps)
    genilib_compat.check_six()  # and it is importable here


# --- write_xml -----------------------------------------------------------------------------

WRITE_XML = """
{install}
import geni.rspec.pg as pg, sys
req = pg.Request()
req.addResource(pg.RawPC("n"))
try:
    req.writeXML(None)
except TypeError as err:
    print("TypeError", file=sys.stderr)
"""


def test_write_xml_defect_without_workaround() -> None:
    out = run_py(WRITE_XML.format(install=install_line({"write_xml"})))
    assert "TypeError" in out.stderr
    assert "<rspec" not in out.stdout


def test_write_xml_fixed_with_workaround() -> None:
    out = run_py(WRITE_XML.format(install=install_line(set())))
    assert "TypeError" not in out.stderr
    assert '<node client_id="n"' in out.stdout


# --- boolean_params ------------------------------------------------------------------------

BOOLEAN = """
{install}
import sys
sys.argv = ["profile", "--flag", "False"]
import geni.portal as portal
portal.context.defineParameter("flag", "a flag", portal.ParameterType.BOOLEAN, True)
print("value", portal.context.bindParameters().flag)
"""


def test_boolean_params_defect_without_workaround() -> None:
    out = run_py(BOOLEAN.format(install=install_line({"boolean_params"})))
    assert out.stdout.strip() == "value True", out.stderr


def test_boolean_params_fixed_with_workaround() -> None:
    out = run_py(BOOLEAN.format(install=install_line(set())))
    assert out.stdout.strip() == "value False", out.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("False", False),
        ("false", False),
        ("", False),
        (False, False),
        (0, False),
        ("True", True),
        ("true", True),
        (1, True),
        # The portal's geni-lib reads every other string as bool(string): these are True.
        ("0", True),
        ("no", True),
        ("off", True),
        ("FALSE", True),
    ],
)
def test_parse_bool_reads_like_the_portal(text: object, expected: bool) -> None:
    assert genilib_compat.parse_bool(text) is expected


# --- manifest_parameters -------------------------------------------------------------------

MANIFEST = """
{install}
import geni.portal as portal
xml = '''<rspec xmlns="http://www.geni.net/resources/rspec/3" type="manifest">
<data_set xmlns="http://www.protogeni.net/resources/rspec/ext/profile-parameters/1">
<data_item name="emulab.net.parameter.computeNodeCount">7</data_item>
</data_set></rspec>'''
portal.context.defineParameter("computeNodeCount", "n", portal.ParameterType.INTEGER, 2)
print("value", portal.context.bindParameters(xml).computeNodeCount)
"""


def test_manifest_parameters_defect_without_workaround() -> None:
    out = run_py(MANIFEST.format(install=install_line({"manifest_parameters"})))
    assert out.stdout.strip() == "value 2", out.stderr  # silently the default


def test_manifest_parameters_fixed_with_workaround() -> None:
    out = run_py(MANIFEST.format(install=install_line(set())))
    assert out.stdout.strip() == "value 7", out.stderr


def test_install_rejects_unknown_workaround_name() -> None:
    with pytest.raises(PtcError, match="unknown geni-lib workaround"):
        genilib_compat.install(skip={"no-such-thing"})
