"""Property-based requests from the OpenAPI schema: no request may make the manager fail (5xx).

Half the cases carry the admin token, half a partition's, so they reach the RPCs' logic, not
only the 401 path; the state starts with nodes held, a PV and a pending reclamation. Bounded:
a fixed number of examples per operation, no shrinking of passing runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from manager_env import NODES, Clock, Notifications, make_manager
from schemathesis.checks import not_a_server_error
from schemathesis.openapi import from_asgi

from elastic.manager import Principal
from elastic.manager.app import create_app
from elastic.manager.core import Manager


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manager, dict[str, str]]:
    tmp: Path = tmp_path_factory.mktemp("schemathesis")
    manager = make_manager(tmp, Clock(), Notifications())
    admin = Principal("admin", admin=True)
    for name in NODES:
        manager.register_node(admin, name, cpus=2, memory_mb=1024)
    _, slurm = manager.create_partition(admin, "slurm", "http://127.0.0.1:9")
    manager.add_nodes(admin, "slurm", nodes=list(NODES[:3]))
    manager.set_values(Principal("slurm"), "slurm", {"node-0": 0.5, "node-1": 0.1, "node-2": 0.0})
    manager.reclaim(admin, "slurm", 1, 600)
    tokens = {"admin": (tmp / "tokens" / "admin.token").read_text().strip(), "slurm": slurm}
    return manager, tokens


OPERATIONS = [
    ("GET", "/v1/health"),
    ("GET", "/v1/status"),
    ("GET", "/v1/nodes"),
    ("PUT", "/v1/nodes/{node}"),
    ("DELETE", "/v1/nodes/{node}"),
    ("GET", "/v1/values"),
    ("GET", "/v1/partitions"),
    ("POST", "/v1/partitions"),
    ("GET", "/v1/partitions/{partition}/token"),
    ("POST", "/v1/partitions/{partition}/nodes"),
    ("POST", "/v1/partitions/{partition}/nodes/release"),
    ("PUT", "/v1/partitions/{partition}/values"),
    ("POST", "/v1/partitions/{partition}/resumes"),
    ("POST", "/v1/partitions/{partition}/notices"),
    ("POST", "/v1/partitions/{partition}/unprotect"),
    ("POST", "/v1/partitions/{partition}/repairs/{node}"),
    ("POST", "/v1/partitions/{partition}/repairs/{node}/end"),
    ("POST", "/v1/reclamations"),
    ("GET", "/v1/reclamations"),
    ("GET", "/v1/reclamations/{reclamation}"),
    ("POST", "/v1/reclamations/{reclamation}/jobs"),
    ("GET", "/v1/events"),
    ("GET", "/v1/view"),
]


def test_every_operation_is_covered(world: tuple[Manager, dict[str, str]]) -> None:
    manager, _ = world
    schema = from_asgi("/openapi.json", create_app(manager, run_loop=False))
    found = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    assert found == set(OPERATIONS)


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_no_server_errors(world: tuple[Manager, dict[str, str]], method: str, path: str) -> None:
    manager, tokens = world
    schema = from_asgi("/openapi.json", create_app(manager, run_loop=False))
    operation = schema[path][method]
    calls: list[int] = []

    @given(case=operation.as_strategy())
    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: schemathesis.Case) -> None:
        who = "admin" if len(calls) % 2 else "slurm"
        calls.append(1)
        case.call_and_validate(
            headers={"Authorization": f"Bearer {tokens[who]}"}, checks=[not_a_server_error]
        )

    run()
    assert calls
