"""One parser for Slurm's durations, every form Slurm prints (squeue, sacct) or reads."""

from __future__ import annotations

import pytest

from elastic.errors import InputError
from elastic.slurm_time import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5", 300.0),  # MM
        ("05:07", 307.0),  # MM:SS
        ("1:02:03", 3723.0),  # HH:MM:SS
        ("2-03", 2 * 86400 + 3 * 3600.0),  # D-HH
        ("1-02:03", 86400 + 2 * 3600 + 3 * 60.0),  # D-HH:MM: days-hours:minutes, 93,780 s
        ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4.0),  # D-HH:MM:SS
        ("00:01.250", 1.25),  # sacct's TotalCPU under an hour: MM:SS.mmm
        ("1:00:00.5", 3600.5),
        ("1-00:00:01.5", 86401.5),
        (" 0:00 ", 0.0),
    ],
)
def test_every_form(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["UNLIMITED", "INVALID", "NOT_SET", "Partition_Limit", "N/A", "INFINITE", "", "  "]
)
def test_no_time(text: str) -> None:
    assert parse_duration(text) is None


def test_the_queue_and_the_benchmarks_read_the_same_value() -> None:
    from elastic.bench import slurm_job
    from elastic.slurm import queue

    assert queue.parse_duration is slurm_job.parse_duration is parse_duration


@pytest.mark.parametrize("text", ["1:xx", "1:2:3:4", "-5", "1-", "5.5", "1-02.5", "abc"])
def test_a_bad_value_is_named(text: str) -> None:
    with pytest.raises(InputError, match=f"Slurm time {text!r}".replace(".", r"\.")):
        parse_duration(text)
