"""What a node container is granted on the host (its podman security arguments)."""

from __future__ import annotations


def container_args() -> list[str]:
    return ["--privileged"]
