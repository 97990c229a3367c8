"""Signals the receiver sends after a notification's outcome is committed.

Connect to react to payments without touching the blueprint::

    from payhooks.receiver import signals

    @signals.payment_succeeded.connect_via(app)
    def ship(app, *, outcome, outcome_id, **extra):
        ...

Every signal is sent with the Flask app as sender and these keyword arguments:

- ``outcome``: the :class:`payhooks.storage.Outcome` just recorded.
- ``outcome_id``: the stored outcome's id, the same every time its signals are sent: delivery to
  receivers is at least once (a worker that dies before marking them sent leaves them owed, and
  the next redelivery or ``flask payhooks signals --send`` sends them), so act once per id.
- ``delivery_id``: the id of the stored delivery that carried it.
- ``reconciliation``: the :class:`payhooks.storage.ReconciliationState` of its
  ``external_identifier`` after the outcome was recorded.

Take ``**extra`` too, so a receiver keeps working when a later version adds a keyword. They are
owed only for an outcome seen for the first time: a redelivery (the same ``webhook-id`` or
body) or a second delivery of an outcome already stored (the same ``transaction_id`` and
``payment_status``) sends nothing new.

Signals are sent after the commit, so a receiver sees the ledger already updated. A receiver
that raises is logged and its error recorded on the delivery; the other receivers still run
and the service still gets its 200, because the outcome is safely stored.
"""

from __future__ import annotations

from blinker import Namespace

__all__ = [
    "check_failed",
    "notification_received",
    "payment_failed",
    "payment_mismatch",
    "payment_succeeded",
    "sync_drift",
]

_signals = Namespace()

#: Every newly recorded outcome, whatever its state; sent before the more specific signals.
notification_received = _signals.signal("notification-received")

#: A ``succeeded`` outcome whose payment reconciles as ``paid``: the expected amount and
#: currency arrived. The signal to fulfil an order on.
payment_succeeded = _signals.signal("payment-succeeded")

#: A ``failed`` or ``cancelled`` outcome that leaves its payment ``failed`` or ``cancelled``:
#: the payment did not happen. Tell them apart by ``outcome.state``. A failed attempt of a
#: payment that another transaction already paid sends nothing: the payment stays ``paid``.
payment_failed = _signals.signal("payment-failed")

#: An outcome that leaves its payment in need of a person
#: (:data:`payhooks.storage.MISMATCH_STATES`): ``amount_mismatch``, ``currency_mismatch``,
#: ``duplicate_payment``, ``unexpected`` (no such payment expected) or ``unknown_status`` (a status
#: code nobody can read).
payment_mismatch = _signals.signal("payment-mismatch")

#: Sent by ``flask payhooks sync`` (in the merchant's app, after the sync is committed) when
#: the service's transaction list and the ledger differ: the signal to alert a person on. Not
#: about one outcome, so its keyword arguments are its own: ``report``, the
#: :class:`payhooks.service.sync.SyncReport`, and ``drift``, how many drift rows of each
#: :class:`payhooks.storage.DriftKind` (stream them with ``Ledger.service.sync_drift()``).
#: Sent once per sync that finds drift, again by the next sync while the drift lasts.
sync_drift = _signals.signal("sync-drift")

#: Sent by ``flask payhooks check`` and by :func:`payhooks.receiver.run_checks` (in the
#: merchant's app, never by the plain ``payhooks check``) once for each check that fails: the
#: signal for alerting in the app. Not about one outcome, so its keyword arguments are its
#: own: ``check``, the failing :class:`payhooks.receiver.CheckResult` (its ``name`` is stable),
#: and ``vitals``, the :class:`payhooks.storage.reads.Vitals` it was decided on.
check_failed = _signals.signal("check-failed")
