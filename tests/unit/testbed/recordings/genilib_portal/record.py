"""Re-record the portal-line geni-lib's answers for profiles/tests (run by hand, never by tests).

Usage: python record.py GENILIB_SRC COMMIT [OUT_DIR]

GENILIB_SRC is a directory holding the ``geni`` package of the geni-lib the CloudLab portal
runs (its public repository, checked out outside this one; its code is never committed here).
Each case runs the profile unchanged in portal mode (GENILIB_PORTAL_MODE, a bindings
parameter file, GENILIB_PORTAL_WARNINGS_ARE_FATAL when asked) with that geni-lib alone on the
path, and writes ``recorded_<profile>_<case>.xml`` (the request RSpec, with a header comment)
and ``recorded_<profile>_<case>.json`` (exit status, stderr of a refusal, the parameters).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(REPO))

from elastic.profile.render import to_bindings  # noqa: E402

CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("portal_params", "defaults", {}, False),
    (
        "portal_params",
        "custom",
        {
            "nodes": [
                {"name": "x", "hardware": "m400", "scratch": True},
                {"name": "y"},
                {"name": "z", "scratch": "false"},
            ],
            "lan": {"bandwidth": 500, "jumbo": True},
            "tags": ["a", "b"],
            "image": "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD",
        },
        False,
    ),
    ("portal_params", "warning", {"lan": {"bandwidth": 5}}, False),
    ("portal_params", "warning-fatal", {"lan": {"bandwidth": 5}}, True),
    ("portal_params", "bad-member", {"nodes": [{"name": "x", "hardware": "vax"}]}, False),
    ("portal_params", "duplicate-name", {"nodes": [{"name": "x"}, {"name": "x"}]}, False),
    ("portal_extensions", "defaults", {}, False),
    ("shaped_pair", "link", {}, False),
    ("shaped_pair", "lan", {"lan": True, "latency": 7.5}, False),
]


def main(src: Path, commit: str, out: Path) -> None:
    for profile, case, params, fatal in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            params_path = Path(tmp) / "params.json"
            params_path.write_text(json.dumps(to_bindings(params)))
            request = Path(tmp) / "request.xml"
            env = dict(
                os.environ,
                GENILIB_PORTAL_MODE="1",
                GENILIB_PORTAL_PARAMS_PATH=str(params_path),
                GENILIB_PORTAL_REQUEST_PATH=str(request),
                PYTHONPATH=str(src),
            )
            env.pop("GENILIB_PORTAL_WARNINGS_ARE_FATAL", None)
            if fatal:
                env["GENILIB_PORTAL_WARNINGS_ARE_FATAL"] = "1"
            proc = subprocess.run(
                [sys.executable, str(REPO / "profiles" / "tests" / f"{profile}.py")],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            stem = f"recorded_{profile}_{case}"
            rec: dict[str, Any] = {
                "recorded": f"portal-line geni-lib {commit}, run once",
                "profile": f"profiles/tests/{profile}.py",
                "params": params,
                "warnings_fatal": fatal,
                "exit_status": proc.returncode,
                "request": None,
                "stderr": proc.stderr if proc.returncode else "",
            }
            if request.is_file():
                header = (
                    f"<!-- RECORDING: request RSpec written by the portal-line geni-lib "
                    f"({commit}) for profiles/tests/{profile}.py, case "
                    f"{case!r}; re-record with record.py. -->\n"
                ).encode()
                body = request.read_bytes()
                (out / f"{stem}.xml").write_bytes(header + body)
                rec["request"] = f"{stem}.xml"
            (out / f"{stem}.json").write_text(json.dumps(rec, indent=2) + "\n")
            print(stem, proc.returncode)


if __name__ == "__main__":
    main(
        Path(sys.argv[1]),
        sys.argv[2],
        Path(sys.argv[3]) if len(sys.argv) > 3 else Path(__file__).parent,
    )
