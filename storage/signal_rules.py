"""Which signals a change of one payment owes: decided on the money alone.

A pure function over the payment's reconciliation row before and after the change
(:func:`payhooks.storage.rules.reconcile`), the inputs the row after was decided from, and the
outcome the change recorded, if any. The service's list (the row's drift) has no part in it:
nothing it holds adds or removes a fulfilment.
"""

from __future__ import annotations

from typing import Final

from payhooks.storage.records import MISMATCH_STATES, PaymentState, ReconciliationState
from payhooks.storage.rows import ReconciliationRow
from payhooks.storage.rules import Inputs, OutcomeFact, fulfilled, latest_key

__all__ = ["SIGNAL_ORDER", "owed_signals"]

_R = ReconciliationState

#: The signals' names, in the order one outcome's are sent.
SIGNAL_ORDER: Final = (
    "notification-received",
    "payment-succeeded",
    "payment-failed",
    "payment-mismatch",
)


_NOT_PAID_OUTCOMES: Final = frozenset({PaymentState.FAILED, PaymentState.CANCELLED})
_NOT_PAID_PAYMENTS: Final = frozenset({_R.FAILED, _R.CANCELLED})


def owed_signals(
    before: ReconciliationRow | None,
    after: ReconciliationRow | None,
    inputs: Inputs,
    new_outcome: OutcomeFact | None,
) -> list[tuple[int, str]]:
    """The signals a change of one payment owes, as (outcome id, signal name) pairs in sending
    order. The ledger keeps each pair once, so owing one again is a no-op.

    Decided on the money alone (the rows' ``state``, never the drift):

    - ``notification-received``: every new outcome.
    - ``payment-succeeded``: every period to fulfil (:func:`payhooks.storage.rules.fulfilled`:
      its money arrived as expected and is still there), once: when it arrives, or later, when
      a change makes it so (a payment registered after its outcome, an earlier period that
      arrives late).
    - ``payment-failed``: a new ``failed`` or ``cancelled`` outcome that leaves its payment
      ``failed`` or ``cancelled`` (a failed retry of a paid order sends nothing).
    - ``payment-mismatch``: a new outcome that leaves its payment in a mismatch state, or a
      payment that moved into another mismatch state without one (its latest outcome carries
      it).
    """
    owed: list[tuple[int, str]] = []
    if new_outcome is not None:
        owed.append((new_outcome.id, "notification-received"))
    if after is None:
        return owed
    owed.extend((outcome_id, "payment-succeeded") for outcome_id in fulfilled(inputs, after.state))
    if (
        new_outcome is not None
        and new_outcome.state in _NOT_PAID_OUTCOMES
        and after.state in _NOT_PAID_PAYMENTS
    ):
        owed.append((new_outcome.id, "payment-failed"))
    outcomes = inputs.outcomes
    if after.state in MISMATCH_STATES and outcomes:
        if new_outcome is not None:
            owed.append((new_outcome.id, "payment-mismatch"))
        elif before is None or before.state is not after.state:
            latest = max(outcomes, key=latest_key)
            owed.append((latest.id, "payment-mismatch"))
    rank = {name: i for i, name in enumerate(SIGNAL_ORDER)}
    return sorted(dict.fromkeys(owed), key=lambda pair: (pair[0], rank[pair[1]]))
