"""One payment's story: the rows of every table that names it, one timeline, one description.

SQL selects each table's rows for one ``external_identifier`` (the signals through the
payment's outcomes), as plain SQL both engines run with ``?`` placeholders
(:mod:`payhooks.storage.postgresql.dialect`). A row stays the table's row, its columns by name:
an :class:`Entry` adds only its moment and its table, and :meth:`PaymentStory.timeline` orders
them. Column values are typed as the ledger's other reads type them: times aware (UTC), states
and statuses their enums, money exact (the stored ``*_minor`` integers, and beside each its
``Decimal`` in major units without the suffix), metadata parsed. Text that came from outside is
exactly as stored: :func:`describe` says an entry for people, and whoever shows it escapes it.

Each statement reads what is committed when it runs: a write that lands between two of them
(a delivery arriving as the story is read) can show in one table and not yet in the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, NamedTuple

import payhooks.storage.reconciliation as reconciliation
from payhooks.storage.currencies import from_minor_units
from payhooks.storage.records import PaymentState
from payhooks.storage.rows import DeliveryStatus, PaymentKind, ReconciliationRow, ReturnKind
from payhooks.storage.sql import Connection
from payhooks.storage.sync_rows import CreationState, DriftKind
from payhooks.storage.times import from_text

__all__ = ["Entry", "EntryKind", "PaymentStory", "describe", "read_story"]


class EntryKind(StrEnum):
    """The table an entry is a row of; entries at the same moment come in this order."""

    REGISTRATION = "registration"  # payments
    CREATION_ATTEMPT = "creation_attempt"  # creation_attempts
    DELIVERY = "delivery"  # deliveries
    OUTCOME = "outcome"  # outcomes
    SIGNAL = "signal"  # owed_signals
    RETURN = "return"  # returns
    SYNC_SIGHTING = "sync_sighting"  # service_transactions


class Entry(NamedTuple):
    """One row of a payment's story."""

    #: When it happened by the ledger's clock (a registration, an attempt's start, a delivery's
    #: first arrival, an outcome recorded, a signal owed, a return, a sync's first sight).
    at: datetime
    kind: EntryKind
    #: The row's other columns by name, typed (see the module); an ``id`` is named for its
    #: table (``delivery_id``), a ``kind`` for what it tells (``payment_kind``).
    row: Mapping[str, Any]


_Types = dict[str, Callable[[Any], Any]]
_K = EntryKind
#: Per table: the statement (its time first, as ``at``) and the columns' types beyond times.
_READS: Final[dict[EntryKind, tuple[str, _Types]]] = {
    _K.REGISTRATION: (
        "SELECT created_at AS at, kind AS payment_kind, amount_minor, currency, "
        "plan_amount_minor, description, metadata FROM payments WHERE external_identifier = ?",
        {"payment_kind": PaymentKind, "metadata": json.loads},
    ),
    _K.CREATION_ATTEMPT: (
        "SELECT started_at AS at, id AS attempt_id, state, http_status, error_code, error, "
        "service_id, finished_at FROM creation_attempts WHERE external_identifier = ? ORDER BY id",
        {"state": CreationState},
    ),
    # Through the index deliveries_identifier (external_identifier, id).
    _K.DELIVERY: (
        "SELECT received_at AS at, id AS delivery_id, dedupe_key, status, attempts, error, "
        "signal_error, outcome_id, pruned_into FROM deliveries WHERE external_identifier = ? "
        "ORDER BY id",
        {"status": DeliveryStatus},
    ),
    _K.OUTCOME: (
        "SELECT recorded_at AS at, id AS outcome_id, delivery_id, transaction_id, payment_status, "
        "state, amount, currency, amount_minor, paid_at FROM outcomes "
        "WHERE external_identifier = ? ORDER BY id",
        {"state": PaymentState, "amount": Decimal},
    ),
    _K.SIGNAL: (
        "SELECT s.owed_at AS at, s.outcome_id, s.delivery_id, s.signal, s.reconciliation, "
        "s.sent_at, s.error, s.claimed_until, s.attempts, s.next_attempt_at, s.parked_at, "
        "s.dismissed_at FROM owed_signals AS s JOIN outcomes AS o ON o.id = s.outcome_id "
        "WHERE o.external_identifier = ? ORDER BY s.outcome_id, s.position",
        {},
    ),
    _K.RETURN: (
        "SELECT returned_at AS at, id AS return_id, kind AS return_kind, result_code "
        "FROM returns WHERE external_identifier = ? ORDER BY returned_at, id",
        {"return_kind": ReturnKind},
    ),
    _K.SYNC_SIGHTING: (
        "SELECT first_seen_at AS at, transaction_id, status, state, currency, amount_minor, "
        "last_seen_at, drift FROM service_transactions WHERE external_identifier = ? "
        "ORDER BY transaction_id",
        {"state": PaymentState, "drift": DriftKind},
    ),
}


@dataclass(frozen=True, slots=True)
class PaymentStory:
    """Everything the ledger knows about one ``external_identifier``
    (:meth:`payhooks.storage.Ledger.story`)."""

    external_identifier: str
    #: Its reconciliation row (:meth:`payhooks.storage.Ledger.row`); None when the ledger keeps
    #: none for it: no registration, outcome or sighting names it, only a refused delivery or
    #: a return.
    row: ReconciliationRow | None
    #: Every row naming it, table by table in :class:`EntryKind` order, each as stored.
    entries: tuple[Entry, ...]

    def of(self, kind: EntryKind | str) -> list[Mapping[str, Any]]:
        """The rows of one table, as stored."""
        return [entry.row for entry in self.entries if entry.kind == kind]

    def timeline(self) -> tuple[Entry, ...]:
        """Every entry, oldest first; at the same moment in :class:`EntryKind` order, then as
        stored (the sort is stable)."""
        return tuple(sorted(self.entries, key=lambda entry: entry.at))


def _typed(names: list[str], values: tuple[Any, ...], types: _Types) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name, value in zip(names, values, strict=True):
        is_time = name in ("at", "claimed_until") or name.endswith("_at")
        convert = from_text if is_time else types.get(name)
        row[name] = value if value is None or convert is None else convert(value)
        if name.endswith("_minor") and name[:-6] not in names:  # amount_minor: amount
            currency = values[names.index("currency")]
            major = None if value is None or currency is None else from_minor_units(value, currency)
            row[name[:-6]] = major
    return row


def read_story(conn: Connection, external_identifier: str) -> PaymentStory | None:
    """Everything the tables hold about ``external_identifier``, or None when none names it."""
    entries = []
    for kind, (sql, types) in _READS.items():
        cursor = conn.execute(sql, (external_identifier,))
        names = [column[0] for column in cursor.description]
        for values in cursor.fetchall():
            row = _typed(names, values, types)
            entries.append(Entry(row.pop("at"), kind, MappingProxyType(row)))
    if not entries:
        return None
    reconciled = reconciliation.row_for(conn, external_identifier)
    return PaymentStory(external_identifier, reconciled, tuple(entries))


# -- for people ------------------------------------------------------------------------------


def _money(amount: Decimal | None, currency: str | None) -> str:
    return "-" if amount is None or currency is None else f"{amount} {currency}"


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def _signal(row: Mapping[str, Any], when: Callable[[datetime], str]) -> list[str]:
    parts = [f"{row['signal']} ({row['reconciliation']}) for outcome #{row['outcome_id']}"]
    for column, words in (
        ("dismissed_at", "marked handled without running"),
        ("sent_at", "sent"),
        ("claimed_until", "owed, claimed until"),
        ("parked_at", "owed, parked"),
        ("next_attempt_at", "owed, retry at"),
    ):
        if row[column] is not None:
            parts.append(f"{words} {when(row[column])}")
            break
    else:
        parts.append("owed")
    if row["attempts"]:
        parts.append(f"{row['attempts']} round(s)")
    return parts


_JSON: Final[dict[str, Any]] = {"ensure_ascii": False, "sort_keys": True}


def _said(template: str, value: Any) -> str | None:
    return None if value is None else template.format(value)


def _parts(
    kind: EntryKind, row: Mapping[str, Any], when: Callable[[datetime], str]
) -> list[str | None]:
    """What a person reads of a row, in order; None where the row has nothing to say."""
    get = row.get
    if kind is _K.REGISTRATION:
        plan, metadata = get("plan_amount"), get("metadata")
        return [
            f"{row['payment_kind']} {_money(row['amount'], row['currency'])}",
            None if plan is None else f"later periods {_money(plan, row['currency'])}",
            _said("description {}", get("description")),
            _said("metadata {}", None if metadata is None else json.dumps(metadata, **_JSON)),
        ]
    if kind is _K.CREATION_ATTEMPT:
        return [
            f"#{row['attempt_id']} {row['state']}",
            _said("HTTP {}", get("http_status")),
            ": ".join(part for part in (get("error_code"), get("error")) if part),
            _said("service id {}", get("service_id")),
        ]
    if kind is _K.DELIVERY:
        return [
            f"#{row['delivery_id']} {row['status']}",
            f"key {row['dedupe_key']}",
            f"{row['attempts']} attempt(s)",
            _said("outcome #{}", get("outcome_id")),
            _said("error {}", get("error")),
            _said("receiver error {}", get("signal_error")),
            _said("body pruned into {}", get("pruned_into")),
        ]
    if kind is _K.OUTCOME:
        return [
            f"#{row['outcome_id']} {row['transaction_id']} {row['payment_status']} "
            f"{row['state']} {_money(row['amount'], row['currency'])}",
            f"paid {when(row['paid_at'])}",
            f"delivery #{row['delivery_id']}",
        ]
    if kind is _K.SIGNAL:
        return [*_signal(row, when), _said("error {}", get("error"))]
    if kind is _K.RETURN:
        return [str(row["return_kind"]), _said("result code {}", get("result_code"))]
    return [
        f"{row['transaction_id']} listed {row['status']} ({row['state']}) "
        f"{_money(row['amount'], row['currency'])}",
        f"last seen {when(row['last_seen_at'])}",
        f"drift {row['drift'] or '-'}",
    ]


def describe(entry: Entry, when: Callable[[datetime], str] = _time) -> str:
    """``entry`` for people, as the console's payment page and ``payhooks show`` say it: its
    details in the order a person reads them, comma-separated. Not escaped: text from outside
    is as stored.

    :param when: how a time is said: by default UTC in ISO 8601 to the millisecond (the
        command line's); the page passes its own, so the details read as its "At" column.
    """
    return ", ".join(part for part in _parts(entry.kind, entry.row, when) if part)
