"""What can go wrong talking to the configuration server."""

from __future__ import annotations

from elastic.errors import PtcError


class ConfigServerError(PtcError):
    """etcd answered with an error (``code`` is its gRPC status code, ``endpoint`` who said so)."""

    def __init__(self, message: str, *, code: int | None = None, endpoint: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.endpoint = endpoint


class PermissionDenied(ConfigServerError):
    """The user may not do this (etcd's roles), or the credentials are wrong."""


class Unavailable(ConfigServerError):
    """No member answered, or none could serve the request now (no leader, no quorum).

    A read, or a write that certainly was not applied, ends here after every endpoint was tried.
    """


class Indeterminate(Unavailable):
    """A write was sent but its answer was lost: it may or may not have been applied."""
