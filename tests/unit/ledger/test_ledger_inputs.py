"""The ledger's inputs: sacct's runs (through the one sacct parser) and --since."""

from __future__ import annotations

import pytest
from ledger_samples import ACROSS, WHOLE

from elastic import sacct
from elastic.errors import InputError
from elastic.ledger import period, runs


def test_runs_keep_every_run_and_drop_lines_that_never_ran() -> None:
    found = runs.parse_runs(WHOLE)
    assert [(r.job_id, r.raw_id, r.state, r.node_s) for r in found] == [
        ("1", "1", "COMPLETED", 60),
        ("3", "3", "COMPLETED", 120),
        ("2_0", "4", "COMPLETED", 5),
        ("2_1", "5", "COMPLETED", 5),
        ("2_2", "2", "COMPLETED", 5),
        ("6", "6", "REQUEUED", 8),
    ]
    assert found[0].nodelist == "node-[0-1]" and found[0].end == 1796035150.0
    assert runs.parse_runs(ACROSS)[0].start == 1796035140.0


def test_the_command_asks_for_every_run_truncated_to_the_period() -> None:
    command = runs.command("2026-11-30T10:00:00", "2026-11-30T10:50:00")
    assert command.startswith("SLURM_TIME_FORMAT=%s sacct -n -P -a -D -X --truncate ")
    assert command.endswith("-o " + ",".join(runs.FIELDS))
    assert "-S 2026-11-30T10:00:00 -E 2026-11-30T10:50:00" in command


def test_a_line_with_other_fields_is_refused_naming_it() -> None:
    with pytest.raises(InputError, match="sacct line 2: expected 10 fields"):
        runs.parse_runs(WHOLE.splitlines()[0] + "\n1|2|3\n")
    with pytest.raises(InputError, match="sacct field ElapsedRaw: 'x'"):
        runs.parse_runs("1|1|ptc|main|COMPLETED|10|20|x|1|node-0\n")


def test_the_sacct_parser_keeps_duplicates_and_skips_only_when_asked() -> None:
    text = "7|REQUEUED\n7|COMPLETED\nbroken\n"
    with pytest.raises(InputError, match="sacct line 3"):
        sacct.parse(text, ("JobID", "State"))
    rows = sacct.parse(text, ("JobID", "State"), strict=False)
    assert rows == [{"JobID": "7", "State": "REQUEUED"}, {"JobID": "7", "State": "COMPLETED"}]
    assert sacct.state("CANCELLED by 0") == "CANCELLED" and sacct.state("") == ""
    assert sacct.epoch("Unknown") is None and sacct.epoch("1796035120") == 1796035120.0
    with pytest.raises(InputError, match="not epoch seconds"):
        sacct.epoch("2026-11-30T10:00:00")


NOW = 1796035800.0  # 2026-11-30T10:50:00Z


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("1796035110", 1796035110.0),
        ("2026-11-30", 1795996800.0),
        ("2026-11-30T10:00", 1796032800.0),
        ("2026-11-30T10:00:00Z", 1796032800.0),
        ("2026-11-30T11:00:00+01:00", 1796032800.0),
        ("90s", NOW - 90),
        ("45m", NOW - 2700),
        ("2h", NOW - 7200),
        ("1d", NOW - 86400),
    ],
)
def test_since_reads_epoch_iso_and_a_time_ago(text: str, when: float) -> None:
    assert period.parse_since(text, NOW) == when


@pytest.mark.parametrize(
    ("text", "why"),
    [("yesterday", "not a time"), ("2h ago", "not a time"), ("2026-12-01", "is after now")],
)
def test_a_since_that_is_no_time_or_in_the_future_is_refused_naming_since(
    text: str, why: str
) -> None:
    with pytest.raises(InputError, match=f"--since {text!r}: {why}") as err:
        period.parse_since(text, NOW)
    assert err.value.exit_code == 2
