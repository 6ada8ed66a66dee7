"""Error kinds of the elastic manager; the API maps each to an HTTP status (``status``)."""

from __future__ import annotations

from elastic.errors import InputError, NotFoundError, PtcError


class FieldError(InputError):
    """A request field is invalid (HTTP 422). ``field`` names it."""

    status = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class UnknownError(NotFoundError):
    """A request names a node, partition or reclamation that does not exist (HTTP 404)."""

    status = 404

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Unauthenticated(PtcError):
    """No token, or a token that belongs to nobody (HTTP 401)."""

    status = 401


class Forbidden(PtcError):
    """The caller is known but may not do this, e.g. touch another partition's node (HTTP 403)."""

    status = 403

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class Conflict(PtcError):
    """The request is well formed but the state does not allow it now (HTTP 409):
    a node held by someone else, a stale or missing preemption vector."""

    status = 409

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class RevisionConflict(PtcError):
    """The store's revision moved since it was read (compare-and-swap lost); retry."""


class NotActive(PtcError):
    """This manager is a standby, or it has just lost its lease (HTTP 503): ask the active one.
    ``active`` is the active manager's URL when known."""

    status = 503

    def __init__(self, message: str, active: str | None = None) -> None:
        super().__init__(message)
        self.active = active
