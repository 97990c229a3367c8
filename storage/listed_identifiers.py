"""What the service's list says per external identifier, rolled up: ``listed_identifiers``.

The reconciliation asks of every expected payment whether ``payhooks sync`` found the
service's list disagreeing with the outcomes about any of its transactions
(:data:`~payhooks.storage.service_transactions.DRIFT_KIND_SQL`). Asked per payment, that was a
search of ``service_transactions`` by identifier, then of each listed transaction's row of
``transactions``: with every transaction listed, the report over 10^6 payments took 3.9x the
bare aggregate (``bench.reconcile --synced``), against a goal of 3x (issue 17). So the answer
is kept, one row per identifier the list names, and the reconciliation reads it by primary key
as it reads ``identifiers``:

- ``external_identifier``: named by at least one row of ``service_transactions``;
- ``drift``: the most urgent drift of those transactions, for a payment that names the
  identifier (:data:`~payhooks.storage.service_transactions.DRIFT_URGENCY`:
  ``missed_notification``, ``unknown_status``, ``status_differs``), NULL when the list agrees
  with the outcomes. Whether a payment names it is left to the reader: an identifier nobody
  expects is ``unexpected`` whatever its drift.
- ``named``: 1 when a payment or an outcome names the identifier, 0 when only the list does
  (migration 0012). The reconciliation's rows for identifiers only the list names read the
  few rows at 0 through the partial index ``listed_identifiers_unnamed``; before, they were
  found by searching ``payments`` and ``identifiers`` for every listed transaction, a quarter
  of the report's SQL on a synced ledger of 10^6 payments (issue 17).

Like the rollups of :mod:`payhooks.storage.rollup` it is its view
(``listed_identifiers_from_service``), stored, kept by triggers in the writing transaction: a
listed transaction inserted, deleted, or changed in what its drift reads (its identifier, id,
state or rank; not ``last_seen_at``, which every sync rewrites) recomputes its identifier's
row, and so does an outcome's write, or a payment's, for an identifier already listed (one
primary-key search otherwise, in the delivery's commit). Migrations refill it from the view
after the other rollups. Nothing here is a source of truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from payhooks.storage.refill import refill_sql
from payhooks.storage.service_transactions import DRIFT_URGENCY, EXPECTED_DRIFT_KIND_SQL

__all__ = [
    "DRIFT_INPUTS",
    "LISTED_COLUMNS",
    "LISTED_NAMED_SQL",
    "LISTED_TABLE_SQL",
    "LISTED_TRIGGERS",
    "listed_view_sql",
    "rebuild_listed_sql",
    "recompute_if_listed",
]

#: The columns of ``listed_identifiers`` and of its view, in order.
LISTED_COLUMNS: Final = ("external_identifier", "drift", "named")
_TABLE, _VIEW = "listed_identifiers", "listed_identifiers_from_service"

#: The table as migration 0011 made it; :data:`LISTED_NAMED_SQL` is migration 0012's.
LISTED_TABLE_SQL: Final = """
CREATE TABLE listed_identifiers (
    external_identifier TEXT NOT NULL PRIMARY KEY,
    drift TEXT
) WITHOUT ROWID"""

#: Migration 0012: ``named``, and the index of the identifiers only the list names (filled by
#: the refill after the migrations).
LISTED_NAMED_SQL: Final = (
    "ALTER TABLE listed_identifiers ADD COLUMN named INTEGER NOT NULL DEFAULT 0 "
    "CHECK (named IN (0, 1))",
    "CREATE INDEX listed_identifiers_unnamed ON listed_identifiers (external_identifier) "
    "WHERE named = 0",
)

_URGENCY = " ".join(f"WHEN '{kind}' THEN {rank}" for rank, kind in enumerate(DRIFT_URGENCY, 1))
_BY_URGENCY = " ".join(f"WHEN {rank} THEN '{kind}'" for rank, kind in enumerate(DRIFT_URGENCY, 1))


def listed_view_sql(name: str = _VIEW, transactions: str = "transactions") -> str:
    """One row per listed identifier, computed from ``service_transactions``, ``payments`` and
    the rolled-up outcomes (the table ``transactions``, or for tests its view): what the table
    holds."""
    return f"""
CREATE VIEW {name} AS
SELECT
    s.external_identifier AS external_identifier,
    CASE MIN(CASE {EXPECTED_DRIFT_KIND_SQL} {_URGENCY} END) {_BY_URGENCY} END AS drift,
    CASE WHEN EXISTS (
            SELECT 1 FROM payments AS p WHERE p.external_identifier = s.external_identifier)
        OR EXISTS (
            SELECT 1 FROM {transactions} AS x WHERE x.external_identifier = s.external_identifier)
    THEN 1 ELSE 0 END AS named
FROM service_transactions AS s
LEFT JOIN {transactions} AS t
    ON t.external_identifier = s.external_identifier AND t.transaction_id = s.transaction_id
GROUP BY s.external_identifier"""  # noqa: S608 - constants only


def _recompute(row: str) -> str:
    """Make the row of ``row``'s (``NEW`` or ``OLD``) identifier its view's again (none when
    nothing lists it any more)."""
    statements = refill_sql(
        _TABLE, _VIEW, LISTED_COLUMNS, f"external_identifier = {row}.external_identifier"
    )
    return ";\n".join(statements) + ";"


def recompute_if_listed(row: str) -> str:
    """For the triggers of ``outcomes`` (after their transaction's rollup) and ``payments``:
    the drift of ``row``'s identifier again, and whether anything but the list names it, when
    the list names it (nothing written otherwise)."""
    same = f"external_identifier = {row}.external_identifier"
    return (
        f"UPDATE {_TABLE} SET (drift, named) = ("  # noqa: S608 - constants only
        f"SELECT v.drift, v.named FROM {_VIEW} AS v WHERE v.{same}) WHERE {same};"
    )


#: What a listed transaction's drift reads of its own row: the update trigger recomputes only
#: when one of them changes (a sync rewrites ``last_seen_at`` of every row it sees). All NOT
#: NULL, so ``<>`` is exact on both engines. A test checks the view reads no other column.
DRIFT_INPUTS: Final = ("external_identifier", "transaction_id", "state", "state_rank")
_CHANGED = " OR ".join(f"OLD.{column} <> NEW.{column}" for column in DRIFT_INPUTS)

#: name -> ``CREATE TRIGGER`` statement, made anew with the views after migrations.
LISTED_TRIGGERS: Mapping[str, str] = {
    "service_transactions_listed_insert": (
        "CREATE TRIGGER service_transactions_listed_insert AFTER INSERT ON service_transactions "
        f"BEGIN\n{_recompute('NEW')}\nEND"
    ),
    "service_transactions_listed_delete": (
        "CREATE TRIGGER service_transactions_listed_delete AFTER DELETE ON service_transactions "
        f"BEGIN\n{_recompute('OLD')}\nEND"
    ),
    "service_transactions_listed_update": (
        "CREATE TRIGGER service_transactions_listed_update AFTER UPDATE OF "
        f"{', '.join(DRIFT_INPUTS)} ON service_transactions WHEN {_CHANGED} "
        f"BEGIN\n{_recompute('OLD')}\n{_recompute('NEW')}\nEND"
    ),
}


def rebuild_listed_sql() -> tuple[str, ...]:
    """The statements that refill the table from its view, whole (after ``transactions``)."""
    return refill_sql(_TABLE, _VIEW, LISTED_COLUMNS)
