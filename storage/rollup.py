"""What the outcomes say, rolled up per transaction and per identifier, kept by triggers.

The reconciliation needs, per ``external_identifier``, each of its transactions' lifecycle
state, period (amount, currency, time), latest outcome and a few counts. Computed from
``outcomes`` on every report, that meant correlated searches per outcome and a second pass over
all outcomes for the unexpected ones: a report over a million payments spent most of its time
there. So those aggregates are kept in two tables, and the ``reconciliation`` view joins each
payment to one row:

- ``transactions``: one row per (``external_identifier``, ``transaction_id``), computed from
  that transaction's outcomes by the view ``transactions_from_outcomes``.
- ``identifiers``: one row per ``external_identifier`` with outcomes, computed from its
  ``transactions`` rows by the view ``identifiers_from_transactions``. Nothing in it depends
  on what was registered except ``expected`` (whether a payment names the identifier), so
  registering a payment changes one flag and the view compares amounts and currencies itself.

Each table is its view, stored. Triggers keep them so in the same transaction as the write
that changes them: a row of ``outcomes`` inserted, deleted or updated recomputes its
transaction's row and then its identifier's row (index ranges of that transaction and that
identifier); a payment registered, removed or renamed sets ``expected`` (and, when the
service's list names the identifier, its row of ``listed_identifiers``). Writes made with SQL
tools keep them current too, not only the ledger's.
:func:`payhooks.storage.sqlite.schema.migrate` refills both from the views whenever it applies a
migration, so a change of these rules is a migration, and a file from before the tables gets
them filled. Nothing here is a source of truth: emptying the tables and inserting the views
gives the same rows (the tests compare them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from payhooks.storage.listed_identifiers import (
    LISTED_TRIGGERS,
    rebuild_listed_sql,
    recompute_if_listed,
)
from payhooks.storage.records import STATE_RANK, PaymentState
from payhooks.storage.refill import refill_sql

__all__ = [
    "IDENTIFIERS_INDEX_SQL",
    "IDENTIFIERS_TABLE_SQL",
    "IDENTIFIER_COLUMNS",
    "KEY_WIDTH",
    "OUTCOME_COLUMNS",
    "ROLLUP_TRIGGERS",
    "TRANSACTIONS_TABLE_SQL",
    "TRANSACTION_COLUMNS",
    "identifiers_view_sql",
    "rebuild_sql",
    "transactions_view_sql",
]

_SUCCEEDED = STATE_RANK[PaymentState.SUCCEEDED]
_UNKNOWN = STATE_RANK[PaymentState.UNKNOWN]

#: Width of an outcome's time key (``latest``, ``latest_known``): ``paid_at`` padded to 32
#: characters, then the outcome's id in 20 digits. Stored times share one shape
#: (:mod:`payhooks.storage.times`) and none is longer than 32; a pad sorts below every character of
#: a time, so the keys sort by ``paid_at``, then by id (the order of arrival). What is written
#: after a key starts at character ``KEY_WIDTH + 1``.
KEY_WIDTH = 52
_KEY = "printf('%-32s%020d', o.paid_at, o.id)"

# -- per transaction -----------------------------------------------------------------------

# The period outcome of a transaction is its lowest (rank, id) at or past `succeeded`; its
# key carries, at fixed places, what the reconciliation needs of it.
_PERIOD_KEY = (
    f"MIN(CASE WHEN o.state_rank >= {_SUCCEEDED} THEN "
    "printf('%02d%020d%-32s', o.state_rank, o.id, o.paid_at) || o.currency || o.amount_minor "
    "END)"
)

#: The columns of ``transactions`` and of its view, in order.
TRANSACTION_COLUMNS = (
    "external_identifier",
    "transaction_id",
    "unknown_outcomes",
    "top_rank",
    "lifecycle_state",
    "latest_known",
    "latest",
    "period_paid_at",
    "period_currency",
    "period_amount_minor",
    "first_paid_at",
    "last_paid_at",
    "min_currency",
)


def transactions_view_sql(name: str = "transactions_from_outcomes") -> str:
    """One row per transaction, computed from ``outcomes``: what ``transactions`` holds."""
    return f"""
CREATE VIEW {name} AS
SELECT
    o.external_identifier AS external_identifier,
    o.transaction_id AS transaction_id,
    COUNT(CASE WHEN o.state_rank = {_UNKNOWN} THEN 1 END) AS unknown_outcomes,
    MAX(o.state_rank) AS top_rank,
    substr(
        MAX(CASE WHEN o.state_rank > {_UNKNOWN}
            THEN printf('%02d', o.state_rank) || {_KEY} || o.state END),
        {KEY_WIDTH + 3}
    ) AS lifecycle_state,
    MAX(CASE WHEN o.state_rank > {_UNKNOWN} THEN {_KEY} END) AS latest_known,
    MAX({_KEY} || o.state) AS latest,
    rtrim(substr({_PERIOD_KEY}, 23, 32)) AS period_paid_at,
    substr({_PERIOD_KEY}, 55, 3) AS period_currency,
    CAST(substr({_PERIOD_KEY}, 58) AS INTEGER) AS period_amount_minor,
    MIN(o.paid_at) AS first_paid_at,
    MAX(o.paid_at) AS last_paid_at,
    MIN(o.currency) AS min_currency
FROM outcomes AS o
GROUP BY o.external_identifier, o.transaction_id"""  # noqa: S608 - constants only


#: ``lifecycle_state``: the state of the transaction's highest-ranked known outcome (the latest
#: among equals; NULL when every outcome is unknown). ``latest_known``: the time key of its
#: latest known outcome; ``latest``: that of its latest outcome, followed by its state. The
#: ``period_*`` columns are those of its period outcome, NULL unless it succeeded.
TRANSACTIONS_TABLE_SQL = """
CREATE TABLE transactions (
    external_identifier TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    unknown_outcomes INTEGER NOT NULL,
    top_rank INTEGER NOT NULL,
    lifecycle_state TEXT,
    latest_known TEXT,
    latest TEXT NOT NULL,
    period_paid_at TEXT,
    period_currency TEXT,
    period_amount_minor INTEGER,
    first_paid_at TEXT NOT NULL,
    last_paid_at TEXT NOT NULL,
    min_currency TEXT NOT NULL,
    PRIMARY KEY (external_identifier, transaction_id)
) WITHOUT ROWID"""

# -- per identifier ------------------------------------------------------------------------


def _furthest_case(top_rank: str) -> str:
    """``CASE <top_rank> ...``: the state of the furthest rank, from ``succeeded`` on.

    From :data:`STATE_RANK`; those ranks must name one state each.
    """
    arms = []
    for state, rank in sorted(STATE_RANK.items(), key=lambda item: item[1]):
        if rank < _SUCCEEDED:
            continue
        if [other for other, r in STATE_RANK.items() if r == rank] != [state]:
            raise RuntimeError(  # pragma: no cover - guards a future edit of STATE_RANK
                f"STATE_RANK gives {state} a rank it shares; the view cannot tell them apart"
            )
        arms.append(f"WHEN {rank} THEN '{state}'")
    return f"CASE {top_rank} " + " ".join(arms) + " END"


#: The columns of ``identifiers`` and of its view, in order.
IDENTIFIER_COLUMNS = (
    "external_identifier",
    "expected",
    "periods",
    "top_rank",
    "latest_state",
    "lifecycle_state",
    "period_total",
    "period_currency_min",
    "period_currency_max",
    "first_period_amount",
    "later_amount_min",
    "later_amount_max",
    "transaction_ids",
    "unknown_outcomes",
    "first_paid_at",
    "last_paid_at",
    "min_currency",
)


def identifiers_view_sql(
    name: str = "identifiers_from_transactions", transactions: str = "transactions"
) -> str:
    """One row per identifier, computed from its rows of ``transactions`` (the table, or for
    tests its view): what ``identifiers`` holds.

    The first period is the earliest by ``period_paid_at`` (ties: the amount, as text); the
    *later* amounts are those of every other period. Their least and greatest let the
    reconciliation check them against any plan amount without this row knowing it.
    """
    first_period = "MIN(t.period_paid_at || ' ' || t.period_amount_minor)"
    # Periods other than one copy of the first: every period whose key differs from the
    # first's, and the first's amount again when another period has the very same key.
    other_periods = f"""
        FROM {transactions} AS x
        WHERE x.external_identifier = a.external_identifier
          AND x.period_currency IS NOT NULL"""
    not_first = "(x.period_paid_at || ' ' || x.period_amount_minor) <> a.first_period"
    first_again = f"(SELECT COUNT(*) {other_periods} AND NOT {not_first}) > 1"
    later_min = (
        f"CASE WHEN {first_again} THEN min(a.first_period_amount, "
        f"COALESCE((SELECT MIN(x.period_amount_minor) {other_periods} AND {not_first}), "
        "a.first_period_amount)) "
        f"ELSE (SELECT MIN(x.period_amount_minor) {other_periods} AND {not_first}) END"
    )
    later_max = later_min.replace("min(", "max(").replace("MIN(x.", "MAX(x.")
    return f"""
CREATE VIEW {name} AS
SELECT
    a.external_identifier AS external_identifier,
    a.expected AS expected,
    a.periods AS periods,
    a.top_rank AS top_rank,
    a.latest_state AS latest_state,
    a.lifecycle_state AS lifecycle_state,
    a.period_total AS period_total,
    a.period_currency_min AS period_currency_min,
    a.period_currency_max AS period_currency_max,
    a.first_period_amount AS first_period_amount,
    CASE WHEN a.periods > 1 THEN {later_min} END AS later_amount_min,
    CASE WHEN a.periods > 1 THEN {later_max} END AS later_amount_max,
    a.transaction_ids AS transaction_ids,
    a.unknown_outcomes AS unknown_outcomes,
    a.first_paid_at AS first_paid_at,
    a.last_paid_at AS last_paid_at,
    a.min_currency AS min_currency
FROM (
    SELECT
        t.external_identifier AS external_identifier,
        EXISTS (
            SELECT 1 FROM payments AS p WHERE p.external_identifier = t.external_identifier
        ) AS expected,
        COUNT(t.period_currency) AS periods,
        MAX(t.top_rank) AS top_rank,
        substr(MAX(t.latest), {KEY_WIDTH + 1}) AS latest_state,
        CASE
            WHEN COUNT(t.period_currency) > 0 THEN {_furthest_case("MAX(t.top_rank)")}
            -- Nothing succeeded: the transaction with the latest known outcome.
            ELSE COALESCE(
                substr(MAX(t.latest_known || t.lifecycle_state), {KEY_WIDTH + 1}),
                '{PaymentState.UNKNOWN}'
            )
        END AS lifecycle_state,
        SUM(t.period_amount_minor) AS period_total,
        MIN(t.period_currency) AS period_currency_min,
        MAX(t.period_currency) AS period_currency_max,
        {first_period} AS first_period,
        CAST(substr({first_period}, instr({first_period}, ' ') + 1) AS INTEGER)
            AS first_period_amount,
        json_group_array(t.transaction_id) AS transaction_ids,
        SUM(t.unknown_outcomes) AS unknown_outcomes,
        MIN(t.first_paid_at) AS first_paid_at,
        MAX(t.last_paid_at) AS last_paid_at,
        MIN(t.min_currency) AS min_currency
    FROM {transactions} AS t
    GROUP BY t.external_identifier
) AS a"""  # noqa: S608 - constants only


#: ``expected``: 1 when a payment names the identifier. ``latest_state``: the state of its
#: latest outcome. ``lifecycle_state``: with periods, the furthest state of any; without, the
#: lifecycle state of the transaction with the latest known outcome (``unknown`` when none is
#: known). The ``period_*`` columns are NULL when nothing succeeded.
IDENTIFIERS_TABLE_SQL = """
CREATE TABLE identifiers (
    external_identifier TEXT NOT NULL PRIMARY KEY,
    expected INTEGER NOT NULL,
    periods INTEGER NOT NULL,
    top_rank INTEGER NOT NULL,
    latest_state TEXT NOT NULL,
    lifecycle_state TEXT NOT NULL,
    period_total INTEGER,
    period_currency_min TEXT,
    period_currency_max TEXT,
    first_period_amount INTEGER,
    later_amount_min INTEGER,
    later_amount_max INTEGER,
    transaction_ids TEXT NOT NULL,
    unknown_outcomes INTEGER NOT NULL,
    first_paid_at TEXT NOT NULL,
    last_paid_at TEXT NOT NULL,
    min_currency TEXT NOT NULL
) WITHOUT ROWID"""

#: The identifiers no payment names, in order: what the ``unexpected`` rows read.
IDENTIFIERS_INDEX_SQL = (
    "CREATE INDEX identifiers_unexpected ON identifiers (external_identifier) WHERE NOT expected"
)

# -- keeping them current ------------------------------------------------------------------


def _recompute(row: str) -> str:
    """Statements that make the rows of ``row``'s (``NEW`` or ``OLD``) transaction and
    identifier their views' again (:mod:`payhooks.storage.refill`), and its identifier's row of
    ``listed_identifiers`` (drift, and whether anything but the list names it) when the
    service's list names it (:mod:`payhooks.storage.listed_identifiers`)."""
    same_transaction = (
        f"external_identifier = {row}.external_identifier AND transaction_id = {row}.transaction_id"
    )
    same_identifier = f"external_identifier = {row}.external_identifier"
    statements = (
        *refill_sql(
            "transactions", "transactions_from_outcomes", TRANSACTION_COLUMNS, same_transaction
        ),
        *refill_sql(
            "identifiers", "identifiers_from_transactions", IDENTIFIER_COLUMNS, same_identifier
        ),
    )
    return "".join(f"{statement};\n" for statement in statements) + recompute_if_listed(row)


def _expected(row: str, value: int) -> str:
    """A payment registered (1) or removed (0): the ``expected`` flag of ``row``'s identifier,
    and whether anything but the service's list names it."""
    return (
        f"UPDATE identifiers SET expected = {value} "  # noqa: S608 - constants only
        f"WHERE external_identifier = {row}.external_identifier;\n{recompute_if_listed(row)}"
    )


#: The columns of ``outcomes`` an update of which recomputes the rollups: the outcome's own,
#: every column but the bookkeeping of its signals (:mod:`payhooks.storage.owed_signals`), so
#: that owing and marking signals sent, one update per delivery each, leaves the rollups be.
#: A new column of ``outcomes`` belongs here unless the rollups can never depend on it (a test
#: compares this list with the table).
OUTCOME_COLUMNS: Final = (
    "id",
    "delivery_id",
    "transaction_id",
    "external_identifier",
    "flow",
    "provider",
    "provider_reference",
    "provider_status",
    "payment_status",
    "state",
    "state_rank",
    "amount",
    "currency",
    "amount_minor",
    "paid_at",
    "extra",
    "recorded_at",
)

#: name -> ``CREATE TRIGGER`` statement; created (again) with the views, after migrations:
#: these tables' and ``listed_identifiers``'.
ROLLUP_TRIGGERS: Mapping[str, str] = {
    "outcomes_rollup_insert": (
        "CREATE TRIGGER outcomes_rollup_insert AFTER INSERT ON outcomes BEGIN\n"
        f"{_recompute('NEW')}\nEND"
    ),
    "outcomes_rollup_delete": (
        "CREATE TRIGGER outcomes_rollup_delete AFTER DELETE ON outcomes BEGIN\n"
        f"{_recompute('OLD')}\nEND"
    ),
    "outcomes_rollup_update": (
        f"CREATE TRIGGER outcomes_rollup_update AFTER UPDATE OF {', '.join(OUTCOME_COLUMNS)} "
        "ON outcomes BEGIN\n"
        f"{_recompute('OLD')}\n{_recompute('NEW')}\nEND"
    ),
    "payments_rollup_insert": (
        "CREATE TRIGGER payments_rollup_insert AFTER INSERT ON payments BEGIN\n"
        f"{_expected('NEW', 1)}\nEND"
    ),
    "payments_rollup_delete": (
        "CREATE TRIGGER payments_rollup_delete AFTER DELETE ON payments BEGIN\n"
        f"{_expected('OLD', 0)}\nEND"
    ),
    "payments_rollup_update": (
        "CREATE TRIGGER payments_rollup_update AFTER UPDATE OF external_identifier "
        f"ON payments BEGIN\n{_expected('OLD', 0)}\n{_expected('NEW', 1)}\nEND"
    ),
    **LISTED_TRIGGERS,
}


def rebuild_sql() -> tuple[str, ...]:
    """The statements that refill both tables from their views, whole (transactions first:
    the identifiers are computed from them), then ``listed_identifiers``, which reads
    ``transactions`` too."""
    return (
        *refill_sql("transactions", "transactions_from_outcomes", TRANSACTION_COLUMNS),
        *refill_sql("identifiers", "identifiers_from_transactions", IDENTIFIER_COLUMNS),
        *rebuild_listed_sql(),
    )
