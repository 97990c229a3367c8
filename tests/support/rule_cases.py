"""One payment's history, told twice: as the pure rules' inputs and as the ledger's writes.

The rule cases (tests/storage/test_rules.py) call ``reconcile(Inputs(...))`` with
:func:`arrived`; the ledger's tests (tests/storage/test_ledger_reconciliation.py) record the
same :class:`Note` s through a ledger with :func:`as_outcome`, and hold what it stored to what
``reconcile`` decided: the same row. One definition of a history, so both
sides tell the same one. Not a test module: pytest collects nothing here.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import NamedTuple

from hypothesis import strategies as st

from payhooks.storage import Outcome, PaymentKind, PaymentState
from payhooks.storage.rules import Expectation, OutcomeFact
from payhooks.storage.times import to_text
from tests.support.factories import T0, make_outcome

__all__ = [
    "CODES",
    "CURRENCIES",
    "TXNS",
    "Note",
    "arrived",
    "as_outcome",
    "at",
    "note_histories",
    "registered",
]

#: payment_status code -> the state the default map gives it.
CODES = {
    "WP": PaymentState.PENDING,
    "PS": PaymentState.SUCCEEDED,
    "PF": PaymentState.FAILED,
    "PC": PaymentState.CANCELLED,
    "RP": PaymentState.REFUND_PENDING,
    "PR": PaymentState.PARTIALLY_REFUNDED,
    "RS": PaymentState.REFUNDED,
    "CB": PaymentState.CHARGED_BACK,
    "ZZ": PaymentState.UNKNOWN,
}


def at(minutes: int) -> str:
    """The time ``minutes`` after T0, as the ledger stores it."""
    return to_text(T0 + timedelta(minutes=minutes))


class Note(NamedTuple):
    """One verified outcome as a notification gives it: its status code, its time (minutes
    after T0), its transaction, its money (in a currency of two decimals)."""

    code: str
    minutes: int = 0
    tx: str = "ll-1"
    amount: int = 2500
    currency: str = "CNY"


def arrived(*notes: Note) -> list[OutcomeFact]:
    """The outcomes as the ledger stores them when ``notes`` arrive in this order: each id is
    its place in the arrival order (only their order matters to the rules)."""
    return [
        OutcomeFact(n, note.tx, CODES[note.code], note.amount, note.currency, at(note.minutes))
        for n, note in enumerate(notes, start=1)
    ]


def as_outcome(note: Note, external_identifier: str = "order-1") -> Outcome:
    """The outcome a verified notification of ``note`` gives the ledger."""
    return make_outcome(
        transaction_id=note.tx,
        external_identifier=external_identifier,
        payment_status=note.code,
        state=CODES[note.code],
        amount=Decimal(note.amount).scaleb(-2),
        amount_minor=note.amount,
        currency=note.currency,
        paid_at=T0 + timedelta(minutes=note.minutes),
    )


# -- the properties' payments (tests/storage/test_rules.py and test_ledger_reconciliation.py) ---

#: The transactions and currencies a property's payment draws from.
TXNS = ("t1", "t2", "t3")
CURRENCIES = ("AUD", "EUR", "USD")

#: A payment's notifications: at most one per (transaction, status code), as the ledger keeps
#: them, each with its amount, currency and minute.
note_histories = st.dictionaries(
    keys=st.tuples(st.sampled_from(TXNS), st.sampled_from(sorted(CODES))),
    values=st.tuples(
        st.sampled_from([999, 1999, 2999]), st.sampled_from(CURRENCIES), st.integers(0, 3)
    ),
    max_size=6,
).map(
    lambda spec: [
        Note(code, minutes=minute, tx=txn, amount=amount, currency=paid_in)
        for (txn, code), (amount, paid_in, minute) in spec.items()
    ]
)


def registered(kind: PaymentKind | None, currency: str) -> Expectation | None:
    """What a property's payment registers: 9.99 first, a plan of 19.99 for a subscription;
    None for a payment nobody registered."""
    if kind is None:
        return None
    plan = 1999 if kind is PaymentKind.SUBSCRIPTION else None
    return Expectation(kind, 999, currency, plan, at(0))
