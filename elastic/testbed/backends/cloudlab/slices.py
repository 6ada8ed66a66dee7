"""CloudLab's name for an experiment: its GENI slice."""

from __future__ import annotations

from elastic.errors import InputError

# GENI slice names: at most 19 characters, letters, digits and dashes.
MAX_SLICE_NAME = 19


def slice_name(experiment: str) -> str:
    if len(experiment) > MAX_SLICE_NAME:
        raise InputError(
            f"experiment name {experiment!r} is too long for a CloudLab slice "
            f"(at most {MAX_SLICE_NAME} characters)"
        )
    return experiment
