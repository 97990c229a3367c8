"""The ledger's two views, in SQL both engines run as written: what finance reads.

Neither computes anything: ``reconciliation`` reads the rows :mod:`payhooks.storage.rules`
decided and :mod:`payhooks.storage.payment_states` stored, one per payment; ``sync_drift`` reads
the drift stored on the service's listed transactions, and the payments missing at the service.
"""

from __future__ import annotations

from typing import Final

from payhooks.storage.rows import ReconciliationRow

__all__ = ["RECONCILIATION_COLUMNS", "RECONCILIATION_VIEW_SQL", "SYNC_DRIFT_VIEW_SQL"]

#: The ``reconciliation`` view's columns, in order: the fields of the row the rules decide,
#: each a column of ``payment_states`` (:mod:`payhooks.storage.payment_states`).
RECONCILIATION_COLUMNS: Final = ReconciliationRow._fields

#: One row per payment and per identifier nobody expected; expected payments first, then the
#: others, each by identifier, when read in ``payment_states_order``'s order.
RECONCILIATION_VIEW_SQL: Final = f"""
    CREATE VIEW reconciliation AS
    SELECT {", ".join(RECONCILIATION_COLUMNS)}
    FROM payment_states"""  # noqa: S608 - constants only

#: One row per drift: each listed transaction that disagrees with the notifications, each
#: payment missing at the service, and each item of the latest run the ledger could not store.
SYNC_DRIFT_VIEW_SQL: Final = """
    CREATE VIEW sync_drift AS
    SELECT s.drift AS kind, s.external_identifier AS external_identifier,
        s.transaction_id AS transaction_id, s.status AS service_status,
        s.state AS service_state, s.ledger_state AS ledger_state, s.last_seen_at AS seen_at
    FROM service_transactions AS s WHERE s.drift IS NOT NULL
    UNION ALL
    SELECT p.drift, p.external_identifier, CAST(NULL AS TEXT), CAST(NULL AS TEXT),
        CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT)
    FROM payment_states AS p WHERE p.drift = 'missing_at_service'
    UNION ALL
    SELECT 'unstorable_item', COALESCE(u.external_identifier, ''), u.transaction_id,
        CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT), u.seen_at
    FROM sync_unstorable_items AS u WHERE u.sync_run = (SELECT MAX(id) FROM sync_runs)"""
