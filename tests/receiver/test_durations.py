"""DURATION: one spelling (30s, 15m, 12h, 90d) for every command that takes a period."""

from __future__ import annotations

from datetime import timedelta

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from payhooks.receiver.cli.common import DURATION
from payhooks.receiver.durations import MAX_DURATION, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("15m", timedelta(minutes=15)),
        ("12h", timedelta(hours=12)),
        ("90d", timedelta(days=90)),
        ("0s", timedelta(0)),
        (" 5m ", timedelta(minutes=5)),
        ("36500d", MAX_DURATION),
    ],
)
def test_a_duration_reads_as_its_timedelta(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        *("", "30", "s", "1w", "1M", "-5m", "+5m", "1.5h", "5 m", "1h30m"),
        *("\uff11h", "36501d", "9" * 11 + "s"),
    ],
)
def test_anything_else_is_refused_in_one_sentence_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="DURATION") as refused:
        parse_duration(text)
    assert repr(text) in str(refused.value)
    assert "\n" not in str(refused.value)


@given(st.integers(min_value=1, max_value=MAX_DURATION.days * 86_400))
def test_formatting_reads_back_as_the_same_duration(seconds: int) -> None:
    duration = timedelta(seconds=seconds)
    assert parse_duration(format_duration(duration)) == duration


@pytest.mark.parametrize(
    ("duration", "text"),
    [(timedelta(hours=36), "36h"), (timedelta(days=2), "2d"), (timedelta(seconds=90), "90s")],
)
def test_formatting_uses_the_largest_whole_unit(duration: timedelta, text: str) -> None:
    assert format_duration(duration) == text


@click.command()
@click.option("--older-than", type=DURATION, required=True)
def _probe(older_than: timedelta) -> None:
    click.echo(repr(older_than))


@pytest.mark.parametrize(("given_text", "code"), [("12h", 0), ("12 hours", 2), ("-1d", 2)])
def test_the_option_type_exits_2_on_bad_usage(given_text: str, code: int) -> None:
    result = CliRunner().invoke(_probe, ["--older-than", given_text])
    assert result.exit_code == code, result.output
    if code == 2:
        assert "is not a DURATION" in result.output
