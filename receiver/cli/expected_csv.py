"""Reading a file of expected payments for ``payhooks expect --csv``, every row checked first.

The file is read and checked whole before anything is registered, so a bad row on line 9,000
leaves the ledger as it was: the command reports every bad row with its line number and
registers nothing. Only a file that is entirely good goes on to the ledger, in one transaction.

Columns (a header row names them, in any order): ``external_identifier``, ``amount_minor``,
``currency``, and optionally ``kind`` (``transaction``, the default, or ``subscription``),
``plan_amount_minor`` (required for a subscription, refused for a transaction) and
``description``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, TextIO

from payhooks.storage import MAX_AMOUNT_MINOR, PaymentKind
from payhooks.storage.currencies import minor_unit_exponent

__all__ = [
    "COLUMNS",
    "REQUIRED_COLUMNS",
    "ExpectedPayment",
    "ExpectedPaymentsError",
    "RowError",
    "read_expected_payments",
]

#: Columns that every file must have.
REQUIRED_COLUMNS: Final = ("external_identifier", "amount_minor", "currency")

#: Every column a file may have.
COLUMNS: Final = (*REQUIRED_COLUMNS, "kind", "plan_amount_minor", "description")

#: How many bad rows are listed before the report stops counting them one by one.
MAX_REPORTED: Final = 20


@dataclass(frozen=True, slots=True)
class ExpectedPayment:
    """One checked row, ready for :meth:`payhooks.storage.Ledger.expect_transaction` or
    :meth:`~payhooks.storage.Ledger.expect_subscription`."""

    line: int
    external_identifier: str
    kind: PaymentKind
    amount_minor: int
    currency: str
    plan_amount_minor: int | None
    description: str | None


@dataclass(frozen=True, slots=True)
class RowError:
    """What is wrong with one line of the file."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class ExpectedPaymentsError(ValueError):
    """The file cannot be registered; ``errors`` lists every bad line found.

    ``code`` is ``invalid_csv``; ``message`` is one sentence for a person.
    """

    code = "invalid_csv"

    def __init__(self, message: str, errors: Iterable[RowError] = ()) -> None:
        self.message = message
        self.errors = tuple(errors)
        super().__init__(message)


def _minor_units(text: str, column: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise ValueError(f"{column} {text!r} is not a whole, non-negative number of minor units")
    digits = text.lstrip("0")
    if len(digits) > len(str(MAX_AMOUNT_MINOR)) or int(digits or "0") > MAX_AMOUNT_MINOR:
        raise ValueError(
            f"{column} {text[:24]!r} is over the largest amount the ledger takes "
            f"({MAX_AMOUNT_MINOR} minor units)"
        )
    return int(digits or "0")


def _check_row(line: int, row: dict[str, str]) -> ExpectedPayment:
    """One row as an :class:`ExpectedPayment`; ``ValueError`` with the first problem."""
    identifier = row["external_identifier"]
    if not 1 <= len(identifier) <= 64:
        raise ValueError("external_identifier must be 1 to 64 characters")
    amount = _minor_units(row["amount_minor"].strip(), "amount_minor")
    currency = row["currency"].strip().upper()
    try:
        minor_unit_exponent(currency)
    except ValueError:
        raise ValueError(f"currency {row['currency']!r} is not an ISO 4217 code") from None
    kind_text = (row.get("kind") or "").strip().lower() or PaymentKind.TRANSACTION.value
    try:
        kind = PaymentKind(kind_text)
    except ValueError:
        raise ValueError(
            f"kind {row.get('kind')!r} is neither 'transaction' nor 'subscription'"
        ) from None
    plan_text = (row.get("plan_amount_minor") or "").strip()
    plan: int | None = None
    if kind is PaymentKind.SUBSCRIPTION:
        if not plan_text:
            raise ValueError("a subscription needs plan_amount_minor")
        plan = _minor_units(plan_text, "plan_amount_minor")
    elif plan_text:
        raise ValueError("plan_amount_minor is only for kind 'subscription'")
    description = row.get("description") or None
    return ExpectedPayment(line, identifier, kind, amount, currency, plan, description)


def _rows(reader: csv.DictReader[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) pairs; the line is where the row ends, as a text editor counts."""
    for row in reader:
        yield reader.line_num, row


def read_expected_payments(handle: TextIO) -> list[ExpectedPayment]:
    """Read and check the whole file.

    :raises ExpectedPaymentsError: a missing or unknown column, an empty file, or any bad row
        (all of them, each with its line number; the same identifier twice with different data
        is a bad row too).
    """
    reader = csv.DictReader(handle, restkey="\0extra", strict=True)
    try:
        header = reader.fieldnames
    except csv.Error as err:
        raise ExpectedPaymentsError(f"line 1: the header cannot be read: {err}") from err
    if not header:
        raise ExpectedPaymentsError("The file is empty; it needs a header row.")
    names = [name.strip() for name in header]
    reader.fieldnames = names
    missing = [name for name in REQUIRED_COLUMNS if name not in names]
    unknown = [name for name in names if name not in COLUMNS]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing column(s) {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown column(s) {', '.join(repr(n) for n in unknown)}")
        raise ExpectedPaymentsError(f"line 1: {'; '.join(parts)} (columns: {', '.join(COLUMNS)}).")

    payments: list[ExpectedPayment] = []
    errors: list[RowError] = []
    seen: dict[str, ExpectedPayment] = {}
    try:
        for line, row in _rows(reader):
            if "\0extra" in row or any(value is None for value in row.values()):
                errors.append(RowError(line, f"expected {len(names)} fields"))
                continue
            try:
                payment = _check_row(line, row)
            except ValueError as err:
                errors.append(RowError(line, str(err)))
                continue
            earlier = seen.get(payment.external_identifier)
            if earlier is not None:
                if _same(earlier, payment):
                    continue  # the same payment twice: registering it again is a no-op anyway
                errors.append(
                    RowError(
                        line,
                        f"{payment.external_identifier!r} is already on line {earlier.line} "
                        "with different data",
                    )
                )
                continue
            seen[payment.external_identifier] = payment
            payments.append(payment)
    except csv.Error as err:
        errors.append(RowError(reader.line_num, f"the row cannot be read: {err}"))
    if errors:
        shown = errors[:MAX_REPORTED]
        more = len(errors) - len(shown)
        summary = f"{len(errors)} bad row(s)" + (f" ({more} not listed)" if more else "")
        raise ExpectedPaymentsError(f"{summary}; nothing was registered.", shown)
    return payments


def _same(first: ExpectedPayment, second: ExpectedPayment) -> bool:
    return (
        first.kind,
        first.amount_minor,
        first.currency,
        first.plan_amount_minor,
        first.description,
    ) == (
        second.kind,
        second.amount_minor,
        second.currency,
        second.plan_amount_minor,
        second.description,
    )
