"""The load tests' plan and its oracle (no tests here).

:func:`build_plan` makes a reproducible set of distinct notifications over a mix of payment
stories (paid, paid after pending, refunded, mismatched amount or currency, failed,
cancelled, unexpected, the same outcome under two webhook ids, a duplicate payment, a
subscription's two periods, an unmapped status, an invalid body, and payments that never hear
back), the payments to register first, and what the reconciliation must say at the end: one
:class:`ExpectedRow` per identifier, written down from the story, not computed by payhooks.

:func:`deliver_all` sends every delivery the way the service would: signed at send time, the
same ``webhook-id`` on every redelivery, retried with backoff after a 503 or a broken
connection, never after any other answer.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from payhooks.receiver.testing import Connection, Payload, send_signed
from payhooks.storage import Ledger, ReconciliationState, from_minor_units, minor_unit_exponent
from payhooks.storage.rows import SummaryRow
from payhooks.verify import Signer

__all__ = [
    "Attempt",
    "Delivered",
    "ExpectedRow",
    "Notification",
    "Plan",
    "build_plan",
    "deliver_all",
    "expected_summary",
]

_R = ReconciliationState
_CURRENCIES = ("CNY", "JPY", "KWD", "USD", "EUR")
_FORMS = ("wallet", "card", "orchestrator")
_START = datetime(2026, 3, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Notification:
    """One distinct delivery: its ``webhook-id``, its body, and the outcome it carries."""

    webhook_id: str
    body: bytes
    #: ``(transaction_id, payment_status)``, or None for a body the receiver must refuse.
    outcome: tuple[str, str] | None


@dataclass(frozen=True)
class ExpectedRow:
    """What one identifier's reconciliation row must say."""

    state: ReconciliationState
    currency: str
    expected_amount_minor: int | None
    received_currency: str | None
    received_amount_minor: int | None


@dataclass
class Plan:
    notifications: list[Notification] = field(default_factory=list)
    #: ``(external_identifier, amount_minor, currency, plan_amount_minor or None)``.
    payments: list[tuple[str, int, str, int | None]] = field(default_factory=list)
    rows: dict[str, ExpectedRow] = field(default_factory=dict)

    def register(self, ledger: Ledger) -> None:
        for external_identifier, amount, currency, plan_amount in self.payments:
            if plan_amount is None:
                ledger.expect_transaction(external_identifier, amount, currency)
            else:
                ledger.expect_subscription(external_identifier, amount, currency, plan_amount)

    @property
    def outcomes(self) -> set[tuple[str, str]]:
        """Every distinct ``(transaction_id, payment_status)`` the notifications carry."""
        return {n.outcome for n in self.notifications if n.outcome is not None}


def _amount_text(amount_minor: int, currency: str) -> str:
    """The amount as the service writes it: major units, at least two decimals."""
    exponent = minor_unit_exponent(currency)
    return f"{Decimal(amount_minor).scaleb(-exponent):.{max(exponent, 2)}f}"


class _Builder:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.plan = Plan()
        self._ids = 0
        self._forms = 0

    def _next(self) -> int:
        self._ids += 1
        return self._ids

    def body(
        self,
        external_identifier: str,
        transaction_id: str,
        status: str,
        amount_minor: int,
        currency: str,
        *,
        at: datetime,
        amount_text: str | None = None,
    ) -> bytes:
        data: dict[str, Any] = {
            "payment_status": status,
            "payment_amount": amount_text or _amount_text(amount_minor, currency),
            "payment_currency_code": currency,
            "payment_time": at.strftime("%Y%m%d%H%M%S"),
        }
        if status == "PS":  # the provider forms, which must agree on success
            form = _FORMS[self._forms % len(_FORMS)]
            self._forms += 1
            if form == "card":
                data.update(stripe_payment_intent_id=f"pi_{transaction_id}", status="succeeded")
            elif form == "orchestrator":
                data.update(adyen_psp_reference=f"psp-{transaction_id}", result_code="Authorised")
        return json.dumps(
            {
                "ll_transaction_id": transaction_id,
                "merchant_transaction_id": external_identifier,
                "payment_data": data,
            }
        ).encode()

    def send(self, body: bytes, outcome: tuple[str, str] | None) -> None:
        self.plan.notifications.append(Notification(f"msg_load_{self._next()}", body, outcome))

    def story(self, kind: str, number: int) -> None:
        rng = self.rng
        eid = f"{kind}-{number}"
        currency = rng.choice(_CURRENCIES)
        amount = rng.randrange(100, 1_000_000)
        at = _START + timedelta(minutes=number)
        tx = f"ll-{eid}"
        expect: tuple[str, int, str, int | None] | None = (eid, amount, currency, None)
        row = ExpectedRow(_R.PAID, currency, amount, currency, amount)

        def outcome(status: str, transaction_id: str = tx, *, paid: int = amount) -> None:
            body = self.body(eid, transaction_id, status, paid, currency, at=at)
            self.send(body, (transaction_id, status))

        if kind == "paid":
            outcome("PS")
        elif kind == "pending-then-paid":
            outcome("PP")
            outcome("PS")
        elif kind == "refunded":
            outcome("PS")
            outcome("RS")
            row = ExpectedRow(_R.REFUNDED, currency, amount, currency, amount)
        elif kind == "amount-mismatch":
            outcome("PS", paid=amount + 1)
            row = ExpectedRow(_R.AMOUNT_MISMATCH, currency, amount, currency, amount + 1)
        elif kind == "currency-mismatch":
            other = "USD" if currency != "USD" else "EUR"
            body = self.body(eid, tx, "PS", amount, other, at=at)
            self.send(body, (tx, "PS"))
            row = ExpectedRow(_R.CURRENCY_MISMATCH, currency, amount, other, amount)
        elif kind == "failed":
            outcome("PF")
            row = ExpectedRow(_R.FAILED, currency, amount, None, None)
        elif kind == "cancelled":
            outcome("PC")
            row = ExpectedRow(_R.CANCELLED, currency, amount, None, None)
        elif kind == "unexpected":
            outcome("PS")
            expect = None
            row = ExpectedRow(_R.UNEXPECTED, currency, None, currency, amount)
        elif kind == "one-outcome-two-ids":
            body = self.body(eid, tx, "PS", amount, currency, at=at)
            self.send(body, (tx, "PS"))
            self.send(body, (tx, "PS"))  # the service sent it again under a new id
        elif kind == "duplicate-payment":
            outcome("PS", f"{tx}-a")
            outcome("PS", f"{tx}-b")
            row = ExpectedRow(_R.DUPLICATE_PAYMENT, currency, amount, currency, 2 * amount)
        elif kind == "subscription":
            plan_amount = rng.randrange(100, 1_000_000)
            expect = (eid, amount, currency, plan_amount)
            first = self.body(eid, f"{tx}-1", "PS", amount, currency, at=at)
            later = self.body(
                eid, f"{tx}-2", "PS", plan_amount, currency, at=at + timedelta(days=30)
            )
            self.send(later, (f"{tx}-2", "PS"))
            self.send(first, (f"{tx}-1", "PS"))
            total = amount + plan_amount
            row = ExpectedRow(_R.PAID, currency, total, currency, total)
        elif kind == "unmapped-status":
            outcome("ZZ")
            row = ExpectedRow(_R.UNKNOWN_STATUS, currency, amount, None, None)
        elif kind == "invalid":
            # A signed amount (a bare integer is valid in a zero-decimal currency): authentic,
            # stored, refused 422 on every try.
            text = f"-{_amount_text(amount, currency)}"
            body = self.body(eid, tx, "PS", amount, currency, at=at, amount_text=text)
            self.send(body, None)
            return
        elif kind == "never-notified":
            row = ExpectedRow(_R.PENDING, currency, amount, None, None)
        else:  # pragma: no cover
            raise ValueError(kind)
        if expect is not None:
            self.plan.payments.append(expect)
        self.plan.rows[eid] = row


#: How often each story occurs, per 100.
STORIES: dict[str, int] = {
    "paid": 40,
    "pending-then-paid": 8,
    "refunded": 6,
    "amount-mismatch": 5,
    "currency-mismatch": 4,
    "failed": 6,
    "cancelled": 2,
    "unexpected": 6,
    "one-outcome-two-ids": 6,
    "duplicate-payment": 3,
    "subscription": 5,
    "unmapped-status": 2,
    "invalid": 2,
    "never-notified": 5,
}


def build_plan(count: int, *, seed: int = 7) -> Plan:
    """At least ``count`` distinct notifications (stories are never cut in half)."""
    rng = random.Random(seed)
    builder = _Builder(rng)
    kinds = list(STORIES)
    weights = list(STORIES.values())
    # One of each first, so every story is exercised however small the run.
    order = iter([*kinds, *rng.choices(kinds, weights, k=10 * count)])
    number = 0
    while len(builder.plan.notifications) < count:
        number += 1
        builder.story(next(order), number)
    return builder.plan


def expected_summary(rows: Iterable[ExpectedRow]) -> list[SummaryRow]:
    """What :meth:`payhooks.storage.Ledger.summary` must return for these rows, grouped the same
    way: money counts in the currency it arrived in, and a period refunded in full counts as
    refunded."""
    groups: dict[tuple[str, ReconciliationState], list[int]] = {}
    for row in rows:
        group = groups.setdefault((row.currency, row.state), [0, 0, 0, 0])
        group[0] += 1
        group[1] += row.expected_amount_minor or 0
        if row.received_currency is not None and row.received_amount_minor is not None:
            where = groups.setdefault((row.received_currency, row.state), [0, 0, 0, 0])
            where[2] += row.received_amount_minor
            if row.state is _R.REFUNDED:
                where[3] += row.received_amount_minor
    return [
        SummaryRow(
            currency=currency,
            state=state,
            count=count,
            expected_amount_minor=expected,
            received_amount_minor=received,
            expected_total=from_minor_units(expected, currency),
            received_total=from_minor_units(received, currency),
            refunded_amount_minor=refunded,
        )
        for (currency, state), (count, expected, received, refunded) in sorted(groups.items())
    ]


@dataclass(frozen=True)
class Attempt:
    """One HTTP try: the status (None: no answer) and the receiver's word."""

    status: int | None
    outcome: str


@dataclass
class Delivered:
    """Everything the senders saw."""

    #: webhook id -> every attempt at it, over all its redeliveries, in no particular order.
    attempts: dict[str, list[Attempt]] = field(default_factory=dict)
    #: webhook id -> the final answer of each of its redeliveries.
    finals: dict[str, list[Attempt]] = field(default_factory=dict)
    #: Deliveries that still had no final answer after every retry.
    gave_up: list[str] = field(default_factory=list)

    def statuses(self) -> Counter[int | None]:
        return Counter(a.status for tries in self.attempts.values() for a in tries)


def _retryable(status: int | None) -> bool:
    """What the service retries: no answer at all, or a 503 (the receiver asked for it)."""
    return status is None or status == 503


def deliver_all(
    url: str,
    jobs: Sequence[Notification],
    signer: Signer,
    *,
    senders: int,
    max_tries: int = 30,
    on_progress: Callable[[int], None] | None = None,
) -> Delivered:
    """Send every job (a notification may appear several times) from ``senders`` threads.

    Each try is signed anew with the job's own ``webhook-id``; a retryable answer is tried
    again after an exponential backoff with jitter (capped at one second: the service waits
    longer, a test need not), up to ``max_tries`` (about 25 s of waiting: on a loaded machine a
    receiver may answer 503 for a while). ``on_progress`` gets the number of jobs finished so far.
    """
    delivered = Delivered()
    lock = threading.Lock()
    cursor = iter(range(len(jobs)))
    done = 0
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        nonlocal done
        rng = random.Random(seed)
        with Connection(url, timeout=30) as connection:
            while True:
                with lock:
                    index = next(cursor, None)
                if index is None:
                    return
                job = jobs[index]
                payload = Payload(job.webhook_id, job.body)
                tries: list[Attempt] = []
                for attempt in range(max_tries):
                    result = send_signed(connection, payload, signer, webhook_id=job.webhook_id)
                    tries.append(Attempt(result.status, result.outcome))
                    if not _retryable(result.status):
                        break
                    connection.close()
                    time.sleep(min(1.0, 0.01 * 2**attempt) * (0.5 + rng.random()))
                with lock:
                    delivered.attempts.setdefault(job.webhook_id, []).extend(tries)
                    if _retryable(tries[-1].status):
                        delivered.gave_up.append(job.webhook_id)
                    else:
                        delivered.finals.setdefault(job.webhook_id, []).append(tries[-1])
                    done += 1
                    finished = done
                if on_progress is not None:
                    on_progress(finished)

    def guarded(seed: int) -> None:
        try:
            work(seed)
        except BaseException as err:  # surfaced by the caller after join
            errors.append(err)
            raise

    threads = [
        threading.Thread(target=guarded, args=(seed,), name=f"sender-{seed}", daemon=True)
        for seed in range(senders)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return delivered
