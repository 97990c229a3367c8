"""The sandbox's behaviour, without HTTP: what the service does with each request.

:class:`Sandbox` holds the state (in memory, behind one lock), checks access, makes
transactions and subscriptions, pages lists behind opaque cursors, replays idempotent
requests, settles payments (pay, fail, cancel) and has the notifier tell the merchant. The
Flask app (:mod:`payhooks.service.sandbox.app`) only translates HTTP to these calls, so tests
and merchants' CI can also drive it directly (``sandbox.settle(...)``).
"""

from __future__ import annotations

import json
import secrets
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from payhooks.service.errors import RequestValidationError
from payhooks.service.interface import (
    TransactionShape,
    is_direct_mode,
    validate_subscription,
    validate_transaction,
)
from payhooks.service.sandbox.cards import card_outcome
from payhooks.service.sandbox.notifications import Notification, Notifier
from payhooks.service.sandbox.outcomes import notification_body, return_url
from payhooks.service.sandbox.paging import Pager
from payhooks.service.sandbox.records import (
    SandboxBuyer,
    SandboxError,
    SandboxSubscription,
    SandboxTransaction,
    next_period,
    trial_end_of,
)
from payhooks.service.sandbox.replays import Replays
from payhooks.service.sandbox.settings import OUTCOMES, SandboxSettings
from payhooks.service.sandbox.tokens import issue_token

__all__ = ["Sandbox", "Settlement"]

_TRANSACTION_STATUS = {"pay": "succeeded", "fail": "failed", "cancel": "cancelled"}
_SUBSCRIPTION_STATUS = {"pay": "active", "fail": "failed", "cancel": "cancelled"}
#: Interface section 8: the direct redirect wallet's sandbox takes amounts below 1000 CNY.
_DIRECT_WALLET_CNY_LIMIT = 1000_00


@dataclass(frozen=True, slots=True)
class Settlement:
    """A payment settled: where the customer goes back to (None in the card flow)."""

    transaction_id: str
    outcome: str
    return_url: str | None
    notification: Notification | None


class Sandbox:
    """A local stand-in for the payment service. ``close()`` stops its notifier.

    :param public_url: the sandbox's own address, for ``payment_url``s; the server sets it.
    :param clock: returns the aware current time (tests freeze it).
    """

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        *,
        public_url: str = "http://127.0.0.1",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings or SandboxSettings()
        self.public_url = public_url.rstrip("/")
        self._clock = clock or (lambda: datetime.now(UTC))
        self._zone = ZoneInfo(self.settings.payment_time_zone)
        self._lock = threading.RLock()
        self._transactions: dict[str, SandboxTransaction] = {}
        self._subscriptions: dict[str, SandboxSubscription] = {}
        self._buyers: dict[str, SandboxBuyer] = {}
        self._replays = Replays()
        self._pager = Pager(self.settings)
        self._lost_answers = 0
        self._slow_answers: list[float] = []
        #: Every API request as ``(method, path, idempotency key or None)``, oldest first.
        self.requests: list[tuple[str, str, str | None]] = []
        # Deliveries are signed with the wall clock: a receiver checks it against its own.
        self.notifier = Notifier(self.settings)

    def close(self) -> None:
        self.notifier.close()

    # -- access ----------------------------------------------------------------------------

    def issue_token(
        self,
        scopes: Iterable[str] | None = None,
        *,
        subject: str | None = None,
        lifetime: float | None = 3600,
    ) -> str:
        """An access token this sandbox accepts; every endpoint's scope when ``scopes`` is
        None."""
        granted = set(self.settings.scopes.values()) if scopes is None else set(scopes)
        return issue_token(self.settings.token_secret, granted, subject=subject, lifetime=lifetime)

    # -- idempotency and faults -------------------------------------------------------------

    def idempotent(
        self,
        merchant: str,
        key: str | None,
        endpoint: str,
        body: Any,
        make: Callable[[], dict[str, Any]],
    ) -> tuple[dict[str, Any], bool]:
        """Run ``make`` once per ``(merchant, key)``: ``(answer, replayed)`` (see
        :mod:`~payhooks.service.sandbox.replays`)."""
        with self._lock:
            return self._replays.run(merchant, key, endpoint, body, make)

    def lose_next_answers(self, count: int = 1) -> None:
        """Process the next ``count`` API requests but answer 503 instead, as if the answer
        was lost on the way: what idempotent retries are for."""
        with self._lock:
            self._lost_answers += count

    def delay_next_answers(self, seconds: float, count: int = 1) -> None:
        """Process the next ``count`` API requests but wait ``seconds`` before answering: a
        client's timeout then fires although the request was processed."""
        with self._lock:
            self._slow_answers += [seconds] * count

    def take_answer_delay(self) -> float:
        """Seconds to wait before this answer (the app asks once per processed request)."""
        with self._lock:
            return self._slow_answers.pop(0) if self._slow_answers else 0.0

    def take_lost_answer(self) -> bool:
        """Whether this answer is to be lost (the app asks once per processed request)."""
        with self._lock:
            if self._lost_answers:
                self._lost_answers -= 1
                return True
            return False

    # -- creation --------------------------------------------------------------------------

    def create_transaction(self, merchant: str, body: Any) -> dict[str, Any]:
        """``POST /v4/transactions``: the transaction object (status ``processing``)."""
        shape, method = self._shape(body)
        _validated(lambda: validate_transaction(body, shape))
        if (
            shape is TransactionShape.DIRECT_WALLET
            and body["currency"] == "CNY"
            and body["amount"] >= _DIRECT_WALLET_CNY_LIMIT
        ):
            raise SandboxError(
                400,
                "amount_over_sandbox_limit",
                "The direct redirect wallet's sandbox takes amounts below 1000 CNY.",
                field="amount",
            )
        outcome = None
        if shape is TransactionShape.CARD:
            outcome = self._card(
                body["payment_method"]["payment_method_data"]["card"],
                "payment_method.payment_method_data.card.number",
            )
        transaction = SandboxTransaction(
            id=str(uuid.uuid4()),
            merchant=merchant,
            shape=shape,
            method=method,
            external_identifier=body["external_identifier"],
            amount=body["amount"],
            currency=body["currency"],
            created_at=self._clock(),
            notify_url=self.settings.notification_url,
        )
        if shape is TransactionShape.CARD:
            transaction.provider_reference = f"pi_{secrets.token_hex(12)}"
        else:
            transaction.payment_url = f"{self.public_url}/pay/{transaction.id}"
            if shape is TransactionShape.ORCHESTRATOR_WALLET:
                transaction.provider_reference = str(secrets.randbelow(10**16)).zfill(16)
                transaction.return_url = body["payment_method"]["payment_method_data"]["returnUrl"]
            else:
                transaction.redirect_url = body["payment_method"]["redirect_url"]
                transaction.cancel_url = body["payment_method"]["cancel_url"]
        with self._lock:
            self._transactions[transaction.id] = transaction
            self._pager.add("transactions", transaction)
            answer = transaction.to_wire()
        if outcome is not None:
            self.settle(transaction.id, outcome)
        return answer

    def create_subscription(self, merchant: str, body: Any) -> dict[str, Any]:
        """``POST /v4/subscriptions``: the subscription object."""
        _validated(
            lambda: validate_subscription(
                body, wallet_channel_codes=self.settings.wallet_channel_codes
            )
        )
        direct = is_direct_mode(body)
        outcome = (
            self._card(body["payment_method"]["card"], "payment_method.card.number")
            if direct
            else None
        )
        now = self._clock()
        start = (trial_end := trial_end_of(body, now)) or now  # a trial delays the first period
        method = body["payment_method"]
        processor = min(self.settings.card_processors)
        transaction = SandboxTransaction(
            id=str(uuid.uuid4()),
            merchant=merchant,
            shape=TransactionShape.CARD if direct else TransactionShape.DIRECT_WALLET,
            method=processor if direct else "checkout",
            external_identifier=body["external_identifier"],
            amount=body["amount"],
            currency=body["currency"],
            created_at=now,
            notify_url=method.get("webhooks_url") or self.settings.notification_url,
            redirect_url=method.get("redirect_url"),
            cancel_url=method.get("redirect_url"),
            provider_reference=f"pi_{secrets.token_hex(12)}" if direct else None,
        )
        subscription = SandboxSubscription(
            id=str(uuid.uuid4()),
            merchant=merchant,
            request=json.loads(json.dumps(body)),
            created=now,
            status="past_due",
            current_period_start=start,
            current_period_end=next_period(start, body["plan"].get("interval")),
            first_transaction_id=transaction.id,
            trial_end=trial_end,
        )
        transaction.subscription_id = subscription.id
        if not direct:
            transaction.payment_url = f"{self.public_url}/pay/{transaction.id}"
            subscription.payment_url_link = transaction.payment_url
        elif outcome is not None:
            subscription.status = _SUBSCRIPTION_STATUS[outcome]
        with self._lock:
            self._transactions[transaction.id] = transaction
            self._pager.add("transactions", transaction)
            self._subscriptions[subscription.id] = subscription
            self._buyer_from(merchant, body["customer"], now)
            answer = subscription.to_wire()
        if outcome is not None:
            self.settle(transaction.id, outcome)
        return answer

    def _shape(self, body: Any) -> tuple[TransactionShape, str]:
        method = body.get("payment_method") if isinstance(body, Mapping) else None
        name = method.get("method") if isinstance(method, Mapping) else None
        settings = self.settings
        for names, shape in (
            (settings.card_processors, TransactionShape.CARD),
            (settings.orchestrators, TransactionShape.ORCHESTRATOR_WALLET),
            (settings.wallets, TransactionShape.DIRECT_WALLET),
        ):
            if name in names:
                return shape, str(name)
        raise SandboxError(
            400,
            "invalid_request",
            "payment_method.method: not a payment method of this sandbox.",
            field="payment_method.method",
        )

    def _card(self, card: Mapping[str, Any], field: str) -> str | None:
        known, outcome = card_outcome(card["number"])
        if not known:
            raise SandboxError(
                400,
                "not_a_test_card",
                "The sandbox takes only its test card numbers (see docs/service.md).",
                field=field,
            )
        return outcome

    def _buyer_from(self, merchant: str, customer: Mapping[str, Any], now: datetime) -> None:
        reference = customer.get("external_identifier")
        for buyer in self._buyers.values():
            if (
                reference is not None
                and buyer.merchant == merchant
                and buyer.external_identifier == reference
            ):
                return
        self.add_buyer(
            customer.get("display_name") or customer.get("first_name") or "Buyer",
            external_identifier=reference,
            merchant=merchant,
        )

    def add_buyer(
        self,
        display_name: str,
        *,
        external_identifier: str | None = None,
        merchant: str | None = None,
    ) -> dict[str, Any]:
        """Add a buyer to ``merchant``'s list (the first account by default); its wire form."""
        now = self._clock()
        buyer = SandboxBuyer(
            id=str(uuid.uuid4()),
            merchant=merchant or self.settings.merchant_account_ids[0],
            display_name=display_name,
            external_identifier=external_identifier,
            created_at=now,
            updated_at=now,
        )
        with self._lock:
            self._buyers[buyer.id] = buyer
            self._pager.add("buyers", buyer)
        return buyer.to_wire()

    # -- lists -----------------------------------------------------------------------------

    def page(
        self, merchant: str, resource: str, *, limit: str | None, cursor: str | None
    ) -> dict[str, Any]:
        """One page of ``buyers`` or ``transactions`` of ``merchant``, oldest first."""
        with self._lock:
            return self._pager.page(resource, merchant, limit=limit, cursor=cursor)

    # -- settlement ------------------------------------------------------------------------

    def transaction(self, transaction_id: str) -> SandboxTransaction:
        """:raises SandboxError: 404 ``not_found``."""
        with self._lock:
            found = self._transactions.get(transaction_id)
        if found is None:
            raise SandboxError(404, "not_found", "There is no such transaction.")
        return found

    def subscription(self, subscription_id: str) -> dict[str, Any]:
        """A subscription's wire form. :raises SandboxError: 404 ``not_found``."""
        with self._lock:
            found = self._subscriptions.get(subscription_id)
            if found is None:
                raise SandboxError(404, "not_found", "There is no such subscription.")
            return found.to_wire()

    def bill_period(self, subscription_id: str, outcome: str = "pay") -> Settlement:
        """Bill a subscription's next period now and settle it with ``outcome``: a new
        transaction of ``plan.amount`` (the first period's amount when the plan has none),
        notified like the first. The period moves on; a failed renewal leaves the
        subscription ``past_due`` (its transitions are not shown by the interface).

        :raises SandboxError: 404 unknown subscription, 409 while the first period is unpaid
            or the subscription is cancelled or failed, 400 unknown outcome.
        """
        _check_outcome(outcome)
        with self._lock:
            subscription = self._subscriptions.get(subscription_id)
            if subscription is None:
                raise SandboxError(404, "not_found", "There is no such subscription.")
            first = self._transactions[subscription.first_transaction_id]
            if subscription.status not in ("active", "past_due"):
                raise SandboxError(
                    409, "not_billable", f"A {subscription.status} subscription is not billed."
                )
            if first.status == "processing":
                raise SandboxError(409, "not_billable", "Its first period is not settled yet.")
            reference = f"pi_{secrets.token_hex(12)}" if first.provider_reference else None
            plan = subscription.request["plan"]
            period = SandboxTransaction(
                id=str(uuid.uuid4()),
                merchant=subscription.merchant,
                shape=first.shape,
                method=first.method,
                external_identifier=first.external_identifier,
                amount=plan.get("amount", first.amount),
                currency=plan.get("currency", first.currency),
                created_at=self._clock(),
                notify_url=first.notify_url,
                provider_reference=reference,
                subscription_id=subscription.id,
            )
            self._transactions[period.id] = period
            self._pager.add("transactions", period)
            subscription.current_period_start = subscription.current_period_end
            subscription.current_period_end = next_period(
                subscription.current_period_start, plan.get("interval")
            )
        return self.settle(period.id, outcome)

    def settle(self, transaction_id: str, outcome: str) -> Settlement:
        """Decide a payment (``pay``, ``fail`` or ``cancel``), notify the merchant, and say
        where the customer goes back to.

        :raises SandboxError: 404 unknown transaction, 400 unknown outcome, 409 settled already.
        """
        _check_outcome(outcome)
        with self._lock:
            transaction = self.transaction(transaction_id)
            if transaction.status != "processing":
                raise SandboxError(409, "already_settled", "This payment is already settled.")
            transaction.status = _TRANSACTION_STATUS[outcome]
            if transaction.subscription_id is not None:
                subscription = self._subscriptions[transaction.subscription_id]
                renewal = subscription.first_transaction_id != transaction.id
                subscription.status = (
                    "past_due" if renewal and outcome == "fail" else _SUBSCRIPTION_STATUS[outcome]
                )
        notification = None
        if transaction.notify_url is not None:
            notification = self.notifier.send(
                transaction.id,
                transaction.external_identifier,
                transaction.notify_url,
                self.notification_body(transaction, outcome),
            )
        return Settlement(transaction.id, outcome, return_url(transaction, outcome), notification)

    def notification_body(self, transaction: SandboxTransaction, outcome: str) -> bytes:
        """The notification of section 6 for ``transaction`` settled with ``outcome``."""
        return notification_body(
            transaction,
            outcome,
            status_code=self.settings.status_codes[outcome],
            now=self._clock().astimezone(self._zone),
        )


def _check_outcome(outcome: str) -> None:
    if outcome not in OUTCOMES:
        raise SandboxError(
            400,
            "invalid_outcome",
            f"outcome must be one of {', '.join(OUTCOMES)}.",
            field="outcome",
        )


def _validated(check: Callable[[], None]) -> None:
    try:
        check()
    except RequestValidationError as err:
        raise SandboxError(400, "invalid_request", err.message, field=err.field) from err
