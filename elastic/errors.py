"""The one exception type the CLI turns into a clean message and a non-zero exit."""


class PtcError(Exception):
    """A user-facing error. The message must name the field, line, node or parameter at fault."""

    exit_code = 2
