"""The reconciliation rules: one payment's state, and the signals it owes, as pure functions.

Every rule about what "paid" means lives here, in Python, and nowhere else: the ledger loads a
payment's inputs (:class:`Inputs`), calls :func:`reconcile`, and stores the
:class:`~payhooks.storage.rows.ReconciliationRow` it returns, as it is, in the same transaction
as the write that changed an input (:mod:`payhooks.storage.payment_states`). SQL only stores and
reads the result: the row decided is the row the ``reconciliation`` view shows.

Two questions are kept apart on purpose:

- **The money** (the row's ``state``): what the payment's own verified outcomes say
  against what was registered. Only signed notifications move it.
- **The service's list** (the row's ``drift``): what ``payhooks sync`` read from the
  service's (unsigned) transaction list, compared with the notifications. It raises a flag for
  a person; it never changes the money state, and so never adds or removes a fulfilment.

The inputs' times are the ledger's stored text (:mod:`payhooks.storage.times`: UTC, one shape),
so they order as strings; the row's are aware datetimes. *Latest* means by ``paid_at``, ties
broken by the outcome's id (the order of arrival).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from payhooks.storage.records import STATE_RANK, PaymentState, ReconciliationState
from payhooks.storage.rows import PaymentKind, ReconciliationRow
from payhooks.storage.sync_rows import DriftKind

__all__ = [
    "DRIFT_URGENCY",
    "Expectation",
    "Inputs",
    "ListedFact",
    "OutcomeFact",
    "Problems",
    "fulfilled",
    "latest_key",
    "reconcile",
    "transaction_drift",
]

_R = ReconciliationState
_SUCCEEDED: Final = STATE_RANK[PaymentState.SUCCEEDED]
_MONEY_RETURNED: Final = frozenset({PaymentState.REFUNDED, PaymentState.CHARGED_BACK})
#: ISO 4217's "no currency": the currency of a row only the service's list names, when the
#: list gave none the ledger knows.
NO_CURRENCY: Final = "XXX"

#: The drift kinds of one payment's listed transactions, most urgent first: a payment whose
#: transactions drift in several ways is flagged with the first.
DRIFT_URGENCY: Final = (
    DriftKind.MISSED_NOTIFICATION,
    DriftKind.UNKNOWN_STATUS,
    DriftKind.STATUS_DIFFERS,
)


@dataclass(frozen=True, slots=True)
class Expectation:
    """What the merchant registered (``payments``)."""

    kind: PaymentKind
    amount_minor: int
    currency: str
    plan_amount_minor: int | None
    registered_at: str
    #: ``refused`` (the service refused to create it) or ``uncertain``; None when created or
    #: not known.
    creation: str | None = None


@dataclass(frozen=True, slots=True)
class OutcomeFact:
    """One stored outcome of the payment (``outcomes``)."""

    id: int
    transaction_id: str
    state: PaymentState
    amount_minor: int
    currency: str
    paid_at: str


@dataclass(frozen=True, slots=True)
class ListedFact:
    """One transaction of the payment as the service's list showed it (``payhooks sync``)."""

    transaction_id: str
    state: PaymentState
    currency: str | None
    first_seen_at: str


@dataclass(frozen=True, slots=True)
class Problems:
    """Authenticated deliveries about the payment that recorded nothing: refused ones (a body
    that is not a notification) and ones that contradict a stored outcome."""

    refused: int = 0
    conflicting: int = 0
    #: The newest one's reason.
    latest: str | None = None


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything one payment's state depends on."""

    external_identifier: str
    expectation: Expectation | None = None
    outcomes: Sequence[OutcomeFact] = ()
    listed: Sequence[ListedFact] = ()
    problems: Problems = Problems()
    #: The ``expected_before`` of the latest complete sync, None before the first: a payment
    #: registered before it that nothing names is missing at the service.
    missing_before: str | None = None


@dataclass(frozen=True, slots=True)
class _Transaction:
    """One ``transaction_id``'s outcomes, summed up."""

    top_rank: int
    #: The state of its highest-ranked known outcome (the latest among equals); None when
    #: every outcome is unknown.
    lifecycle: PaymentState | None
    #: Its latest known outcome's (paid_at, id); None when none is known.
    latest_known: tuple[str, int] | None
    #: Its period outcome: the lowest-ranked (then first stored) at or past ``succeeded``.
    period: OutcomeFact | None


def latest_key(outcome: OutcomeFact) -> tuple[str, int]:
    return outcome.paid_at, outcome.id


def _transaction(outcomes: Sequence[OutcomeFact]) -> _Transaction:
    known = [o for o in outcomes if o.state is not PaymentState.UNKNOWN]
    lifecycle = None
    if known:
        top = max(STATE_RANK[o.state] for o in known)
        lifecycle = max((o for o in known if STATE_RANK[o.state] == top), key=latest_key).state
    succeeded = [o for o in outcomes if STATE_RANK[o.state] >= _SUCCEEDED]
    return _Transaction(
        top_rank=max(STATE_RANK[o.state] for o in outcomes),
        lifecycle=lifecycle,
        latest_known=max(map(latest_key, known)) if known else None,
        period=min(succeeded, key=lambda o: (STATE_RANK[o.state], o.id)) if succeeded else None,
    )


def _by_transaction(outcomes: Iterable[OutcomeFact]) -> dict[str, _Transaction]:
    grouped: dict[str, list[OutcomeFact]] = {}
    for outcome in outcomes:
        grouped.setdefault(outcome.transaction_id, []).append(outcome)
    return {tid: _transaction(group) for tid, group in grouped.items()}


def _furthest(transactions: Iterable[_Transaction]) -> PaymentState:
    """The state of the furthest rank any period reached (``succeeded`` or beyond: those ranks
    name one state each)."""
    top = max(t.top_rank for t in transactions)
    return next(state for state, rank in STATE_RANK.items() if rank == top)


def _money_state(
    expectation: Expectation | None,
    periods: Sequence[OutcomeFact],
    transactions: dict[str, _Transaction],
    latest_is_unknown: bool,
    listed: bool,
) -> ReconciliationState:
    if expectation is None:
        return _R.UNEXPECTED
    if not transactions:
        refused = expectation.creation == "refused" and not listed
        return _R.NOT_CREATED if refused else _R.PENDING
    if not periods:
        if latest_is_unknown:
            return _R.UNKNOWN_STATUS
        deciding = max(
            (t for t in transactions.values() if t.latest_known is not None),
            key=lambda t: t.latest_known or ("", 0),
            default=None,
        )
        lifecycle = None if deciding is None else deciding.lifecycle
        if lifecycle is PaymentState.FAILED:
            return _R.FAILED
        if lifecycle is PaymentState.CANCELLED:
            return _R.CANCELLED
        return _R.PENDING
    transaction_kind = expectation.kind is PaymentKind.TRANSACTION
    if transaction_kind and len(periods) > 1:
        return _R.DUPLICATE_PAYMENT
    if any(p.currency != expectation.currency for p in periods):
        return _R.CURRENCY_MISMATCH
    if transaction_kind and periods[0].amount_minor != expectation.amount_minor:
        return _R.AMOUNT_MISMATCH
    if not transaction_kind and (
        periods[0].amount_minor != expectation.amount_minor
        or any(p.amount_minor != expectation.plan_amount_minor for p in periods[1:])
    ):
        return _R.AMOUNT_MISMATCH
    if latest_is_unknown:
        return _R.UNKNOWN_STATUS
    furthest = _furthest(transactions.values())
    return _R.PAID if furthest is PaymentState.SUCCEEDED else _R(furthest.value)


def _listed_drift(listed: ListedFact, transaction: _Transaction | None) -> DriftKind | None:
    """How one listed transaction disagrees with its notifications; None when it agrees."""
    if listed.state is PaymentState.UNKNOWN:
        return DriftKind.UNKNOWN_STATUS
    seen_rank = -1 if transaction is None else transaction.top_rank
    if listed.state is not PaymentState.PENDING and STATE_RANK[listed.state] > seen_rank:
        return DriftKind.MISSED_NOTIFICATION
    if transaction is not None and listed.state is not transaction.lifecycle:
        return DriftKind.STATUS_DIFFERS
    return None


def transaction_drift(
    listed: ListedFact, outcomes: Sequence[OutcomeFact], *, expected: bool
) -> tuple[DriftKind | None, PaymentState | None]:
    """One listed transaction against the payment's outcomes: how they disagree (None when
    they agree; ``unexpected`` when no payment names it), and the lifecycle state the
    notifications gave that transaction (None when none did)."""
    mine = [o for o in outcomes if o.transaction_id == listed.transaction_id]
    summary = _transaction(mine) if mine else None
    ledger_state = None if summary is None else summary.lifecycle
    if not expected:
        return DriftKind.UNEXPECTED, ledger_state
    return _listed_drift(listed, summary), ledger_state


def _drift(inputs: Inputs, transactions: dict[str, _Transaction]) -> DriftKind | None:
    if inputs.expectation is None and inputs.listed:
        return DriftKind.UNEXPECTED  # the list names a payment nobody registered
    kinds = {_listed_drift(item, transactions.get(item.transaction_id)) for item in inputs.listed}
    for kind in DRIFT_URGENCY:
        if kind in kinds:
            return kind
    expectation = inputs.expectation
    if (
        expectation is not None
        and not transactions
        and not inputs.listed
        and expectation.creation != "refused"
        and inputs.missing_before is not None
        and expectation.registered_at < inputs.missing_before
    ):
        return DriftKind.MISSING_AT_SERVICE
    return None


def _periods(outcomes: Sequence[OutcomeFact]) -> tuple[dict[str, _Transaction], list[OutcomeFact]]:
    """The transactions of ``outcomes`` (sorted by :func:`latest_key`), and their periods."""
    transactions = _by_transaction(outcomes)
    periods = sorted(
        (t.period for t in transactions.values() if t.period is not None),
        key=lambda p: (p.paid_at, str(p.amount_minor), p.id),
    )
    return transactions, periods


def reconcile(inputs: Inputs) -> ReconciliationRow | None:
    """The payment's reconciliation row; None when nothing names the identifier (no payment,
    no outcome, no listed transaction). docs/reconciliation.md states these rules for users.

    - Each transaction's *lifecycle state* is that of its highest-ranked known outcome
      (:data:`~payhooks.storage.records.STATE_RANK`; between ``failed`` and ``cancelled`` the
      latest): a late ``pending`` never moves it back, ``unknown`` never lowers it.
    - A transaction with an outcome at ``succeeded`` or beyond is a *period* (a subscription's
      billing period, or a transaction's one payment); its amount and currency are those of
      its lowest-ranked such outcome.
    - No period: ``unknown_status`` when the latest outcome is unknown, else the lifecycle of
      the transaction with the latest known outcome (``failed``, ``cancelled``, or
      ``pending``); no outcome at all: ``pending``, or ``not_created`` when the service refused
      to create it.
    - With periods, money problems first: a transaction paid twice is ``duplicate_payment``;
      a period in another currency, ``currency_mismatch``; another amount (a subscription's
      first period against ``amount_minor``, later ones against ``plan_amount_minor``),
      ``amount_mismatch``. Then ``unknown_status`` when the latest outcome is unknown;
      otherwise the furthest state any period reached: ``paid``, or the refund or chargeback.
    - An identifier no payment names is ``unexpected``.
    """
    outcomes = sorted(inputs.outcomes, key=latest_key)
    expectation = inputs.expectation
    if expectation is None and not outcomes and not inputs.listed:
        return None
    transactions, periods = _periods(outcomes)
    latest_is_unknown = bool(outcomes) and outcomes[-1].state is PaymentState.UNKNOWN
    state = _money_state(expectation, periods, transactions, latest_is_unknown, bool(inputs.listed))

    if periods:
        lifecycle: PaymentState | None = _furthest(transactions.values())
    elif outcomes:
        deciding = [t for t in transactions.values() if t.latest_known is not None]
        best = max(deciding, key=lambda t: t.latest_known or ("", 0), default=None)
        lifecycle = PaymentState.UNKNOWN if best is None else best.lifecycle
    else:
        lifecycle = None

    currencies = {p.currency for p in periods}
    home = expectation.currency if expectation is not None else None
    foreign = sorted(c for c in currencies if c != home) if home is not None else []
    received_currency: str | None
    if not periods:
        received_currency = None
    elif expectation is None:
        received_currency = min(currencies)
    else:
        received_currency = foreign[0] if foreign else home
    counted = [p for p in periods if p.currency == received_currency]
    mixed = len(currencies) > 1
    received: int | None = sum(p.amount_minor for p in counted) if periods else None
    if expectation is None and mixed:
        received = None

    returned = {
        state: sum(
            t.period.amount_minor
            for t in transactions.values()
            if t.period is not None
            and t.period.currency == received_currency
            and _furthest([t]) is state
        )
        for state in _MONEY_RETURNED
    }
    expected_amount: int | None = None
    if expectation is not None:
        expected_amount = expectation.amount_minor
        if expectation.kind is PaymentKind.SUBSCRIPTION and len(periods) > 1:
            plan = expectation.plan_amount_minor or 0
            expected_amount += plan * (len(periods) - 1)

    if expectation is not None:
        currency, opened_at = expectation.currency, expectation.registered_at
    elif outcomes:
        currency = min(currencies) if currencies else min(o.currency for o in outcomes)
        opened_at = outcomes[0].paid_at
    else:
        listed_currencies = [i.currency for i in inputs.listed if i.currency is not None]
        currency = min(listed_currencies) if listed_currencies else NO_CURRENCY
        opened_at = min(i.first_seen_at for i in inputs.listed)

    problems = inputs.problems
    refunded, charged_back = returned[PaymentState.REFUNDED], returned[PaymentState.CHARGED_BACK]
    home_received = 0
    if home is not None and received_currency != home:
        home_received = sum(p.amount_minor for p in periods if p.currency == home)
    return ReconciliationRow(
        external_identifier=inputs.external_identifier,
        kind=None if expectation is None else expectation.kind,
        state=state,
        currency=currency,
        expected_amount_minor=expected_amount,
        received_currency=received_currency,
        received_amount_minor=received,
        opened_at=datetime.fromisoformat(opened_at),
        lifecycle_state=lifecycle,
        periods_paid=len(periods),
        transaction_ids=tuple(sorted(transactions)),
        unknown_outcomes=sum(o.state is PaymentState.UNKNOWN for o in outcomes),
        last_outcome_at=datetime.fromisoformat(outcomes[-1].paid_at) if outcomes else None,
        drift=_drift(inputs, transactions),
        refunded_amount_minor=refunded,
        charged_back_amount_minor=charged_back,
        net_amount_minor=None if received is None else received - refunded - charged_back,
        refused_deliveries=problems.refused,
        conflicting_deliveries=problems.conflicting,
        latest_problem=problems.latest,
        home_received_amount_minor=home_received,
    )


_NEVER_FULFILLED: Final = frozenset({_R.DUPLICATE_PAYMENT, _R.UNKNOWN_STATUS, _R.UNEXPECTED})


def fulfilled(inputs: Inputs, state: ReconciliationState) -> tuple[int, ...]:
    """The periods to fulfil, by their outcome ids in ``paid_at`` order: each owes
    ``payment-succeeded`` once (:mod:`payhooks.storage.signal_rules`). ``state`` is the
    payment's, as :func:`reconcile` decided it from the same ``inputs``.

    A period is fulfilled when its money is what was expected, and still there: the period's
    transaction succeeded and went no further (no refund, no chargeback), in the expected
    currency, at the expected amount (a subscription's first period ``amount_minor``, each later
    one ``plan_amount_minor``). None while the payment is a duplicate, unexpected, or its latest
    news is unreadable. Decided per period, so a refund or a wrong amount in one subscription
    period never withholds the next one's fulfilment."""
    expectation = inputs.expectation
    if expectation is None or state in _NEVER_FULFILLED:
        return ()
    transactions, periods = _periods(sorted(inputs.outcomes, key=latest_key))
    plan = expectation.plan_amount_minor
    return tuple(
        period.id
        for n, period in enumerate(periods)
        if transactions[period.transaction_id].lifecycle is PaymentState.SUCCEEDED
        and period.currency == expectation.currency
        and period.amount_minor == (expectation.amount_minor if n == 0 else plan)
    )
