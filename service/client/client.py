"""The merchant's client of the service: create payments, list buyers and transactions.

Creating a payment is three steps in one call, in this order: check the request against the
interface (nothing is sent, nothing registered if it fails); register the expected payment in
the ledger, so a notification that arrives before the answer is already expected; send it,
recording the attempt in the ledger (``ledger.service``) before and what became of it after, so
a refused or unanswered creation is marked as such rather than left looking pending.

A transaction creation has no idempotency key, so an attempt whose answer was lost is never
simply sent again: the service's list is asked first whether it has the reference.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar

import httpx

from payhooks.service.client.requests import SubscriptionRequest, TransactionRequest
from payhooks.service.client.responses import (
    Buyer,
    Page,
    Subscription,
    Transaction,
    page_from_wire,
)
from payhooks.service.client.transport import RetryPolicy, Transport
from payhooks.service.errors import (
    AlreadyCreatedError,
    CreationInProgressError,
    CreationRecordError,
    ExpectationConflictError,
    RequestValidationError,
    ServiceError,
    ServiceResponseError,
)
from payhooks.service.interface import (
    MAX_PAGE_LIMIT,
    validate_subscription,
    validate_transaction,
)
from payhooks.storage import (
    ConflictError,
    CreationAttempt,
    CreationState,
    Ledger,
    StorageError,
)

__all__ = ["DEFAULT_WALLET_CHANNEL_CODES", "ServiceClient"]

_T = TypeVar("_T")
_P = ParamSpec("_P")

#: The interface's ``<wallet_channel_code>`` (the channel that makes ``billing_details`` and
#: ``cart_items`` required) is a placeholder; payhooks assumes ``WALLET`` unless told.
DEFAULT_WALLET_CHANNEL_CODES: frozenset[str] = frozenset({"WALLET"})

# An attempt in these states may have made the payment: the service's list is asked first.
_UNRESOLVED = frozenset({CreationState.SENDING, CreationState.UNCERTAIN})


class ServiceClient:
    """A client for one merchant account.

    :param base_url: the service's ``{base_url}`` (the sandbox's ``url``).
    :param access_token: the JWT sent as ``Authorization: Bearer``; how it is obtained is not
        shown by the interface, so the client takes it ready-made.
    :param merchant_account_id: sent as ``x-merchant-account-id`` on every call.
    :param ledger: where expected payments are registered before they are created, and each
        creation attempt is recorded (``ledger.service.creation_attempts``); None for a client
        that only lists (creating then raises ``ValueError``).
    :param timeout: seconds for each try (connect, read, write, pool).
    :param retry: how idempotent calls are retried.
    :param wallet_channel_codes: the ``payment_channel_code`` values of the wallet channel.
    :param sleep: how to wait between retries (tests pass a recorder).
    :param http: an ``httpx.Client`` to use (proxies, certificates); the client's own otherwise.
    """

    def __init__(
        self,
        base_url: str,
        *,
        access_token: str,
        merchant_account_id: str,
        ledger: Ledger | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        wallet_channel_codes: Collection[str] = DEFAULT_WALLET_CHANNEL_CODES,
        sleep: Callable[[float], None] | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        if not access_token or any(c.isspace() for c in access_token):
            raise ValueError("access_token must be one non-empty token without spaces")
        if not merchant_account_id:
            raise ValueError("merchant_account_id must not be empty")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout!r}")
        extra = {} if sleep is None else {"sleep": sleep}
        self._transport = Transport(
            base_url,
            headers={
                "Authorization": f"Bearer {access_token}",
                "x-merchant-account-id": merchant_account_id,
                "Accept": "application/json",
            },
            timeout=timeout,
            retry=retry or RetryPolicy(),
            http=http,
            **extra,
        )
        self._ledger = ledger
        self._timeout = timeout
        self._wallet_codes = frozenset(wallet_channel_codes)

    def close(self) -> None:
        """Close the HTTP connections the client opened (not the ledger)."""
        self._transport.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- creation --------------------------------------------------------------------------

    def create_transaction(self, request: TransactionRequest) -> Transaction:
        """``POST /v4/transactions`` in the request's shape, after expecting it in the ledger.

        Not retried after a timeout or a 5xx: the interface gives transactions no idempotency
        key, so a second try could charge twice. The attempt is then recorded ``uncertain``,
        and a later call for the same reference asks the service's list before sending: when
        the list has it, that attempt is recorded ``created`` and the listed transaction is
        returned, nothing sent.

        :raises RequestValidationError: the request breaks the interface; nothing was sent.
        :raises ExpectationConflictError: the ledger expects this reference with other data.
        :raises AlreadyCreatedError: the ledger records it created already.
        :raises CreationInProgressError: another attempt for it is still on its way.
        :raises TransportError: no answer (the payment may exist at the service).
        :raises ServiceResponseError: the service refused it (a subclass per status).
        """
        body = request.to_wire()
        validate_transaction(body, request.shape)
        ledger = self._require_ledger()
        reference = request.external_identifier
        latest = self._latest_attempt(ledger, reference)
        if latest is not None and latest.state is CreationState.CREATED:
            raise AlreadyCreatedError(reference, latest.service_id)
        description, metadata = request.ledger_description(), request.ledger_metadata()
        self._expect(
            lambda ledger: ledger.expect_transaction(
                reference,
                request.amount,
                request.currency,
                description=description,
                metadata=metadata,
            ),
            reference,
            unstated={"description": description is None, "metadata": metadata is None},
        )
        if latest is not None and latest.state in _UNRESOLVED:
            listed = self._resolve(ledger, latest)
            if listed is not None:
                return listed
        return self._create(
            ledger,
            "transaction",
            reference,
            "/v4/transactions",
            body,
            after=None if latest is None else latest.id,
            idempotency_key=None,
            headers={},
            read=Transaction.from_wire,
        )

    def create_subscription(
        self,
        request: SubscriptionRequest,
        *,
        client_ip: str,
        idempotency_key: str | None = None,
    ) -> Subscription:
        """``POST /v4/subscriptions``, after expecting it in the ledger.

        :param client_ip: the customer's IP address, sent as ``X-Forwarded-For`` (required).
        :param idempotency_key: sent as ``idempotency-key``; a fresh UUID when None. Every
            retry of this call reuses it, so the service makes the subscription at most once;
            to retry a call that raised, pass the key it used (the ``idempotency_key`` of its
            attempt in ``ledger.service.creation_attempts(...)``). A call with another key (or
            none) while the last attempt is ``uncertain`` asks the service's list first, as
            :meth:`create_transaction` does, and raises :class:`AlreadyCreatedError` when the
            list has the reference.
        """
        try:
            ipaddress.ip_address(client_ip)
        except ValueError:
            raise RequestValidationError(
                "X-Forwarded-For", f"{client_ip!r} is not an IP address"
            ) from None
        key = idempotency_key or str(uuid.uuid4())
        if not 1 <= len(key) <= 255 or not key.isprintable() or not key.isascii():
            raise RequestValidationError(
                "idempotency-key", "must be 1 to 255 printable ASCII characters"
            )
        body = request.to_wire()
        validate_subscription(body, wallet_channel_codes=self._wallet_codes)
        ledger = self._require_ledger()
        reference = request.external_identifier
        latest = self._latest_attempt(ledger, reference)
        # The same key again is the interface's own guarantee: the service answers the first.
        same_key = latest is not None and latest.idempotency_key == key
        if latest is not None and latest.state is CreationState.CREATED and not same_key:
            raise AlreadyCreatedError(reference, latest.service_id)
        self._expect(
            lambda ledger: ledger.expect_subscription(
                reference,
                request.amount,
                request.currency,
                request.plan.amount,
                description=request.description,
                metadata=request.metadata,
            ),
            reference,
            unstated={
                "description": request.description is None,
                "metadata": request.metadata is None,
            },
        )
        if latest is not None and latest.state in _UNRESOLVED and not same_key:
            listed = self._resolve(ledger, latest)
            if listed is not None:
                raise AlreadyCreatedError(reference, listed.id)
        return self._create(
            ledger,
            "subscription",
            reference,
            "/v4/subscriptions",
            body,
            after=None if latest is None else latest.id,
            idempotency_key=key,
            headers={"X-Forwarded-For": client_ip, "idempotency-key": key},
            read=Subscription.from_wire,
        )

    def _require_ledger(self) -> Ledger:
        if self._ledger is None:
            raise ValueError("this client has no ledger: pass ledger= to create payments")
        return self._ledger

    def _latest_attempt(self, ledger: Ledger, reference: str) -> CreationAttempt | None:
        attempts = self._record(ledger.service.creation_attempts, reference)
        return attempts[-1] if attempts else None

    def _resolve(self, ledger: Ledger, latest: CreationAttempt) -> Transaction | None:
        """Ask the service's list whether an attempt without an answer made the payment.

        Listed: the attempt is recorded ``created`` with the listed id (its payment's failure
        mark cleared), and the listed transaction returned. Not listed: None, and the caller
        may send, unless the attempt is ``sending`` and young enough to be still on its way.
        """
        reference = latest.external_identifier
        # The interface's list has no filter: the whole list is read, page by page.
        for listed in self.transactions(limit=MAX_PAGE_LIMIT):
            if listed.external_identifier == reference:
                self._record(
                    ledger.service.finish_creation,
                    latest.id,
                    CreationState.CREATED,
                    service_id=listed.id,
                )
                return listed
        in_flight = timedelta(seconds=self._timeout)
        if latest.state is CreationState.SENDING and (
            datetime.now(UTC) - latest.started_at < in_flight
        ):
            raise CreationInProgressError(reference, latest.started_at)
        return None

    def _record(self, call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """A write or read of the ledger's creation attempts, its failure as the client's."""
        try:
            return call(*args, **kwargs)
        except StorageError as err:
            raise CreationRecordError(
                f"The ledger could not record the creation attempt: {err}"
            ) from err

    def _expect(
        self,
        register: Callable[[Ledger], bool],
        external_identifier: str,
        *,
        unstated: Mapping[str, bool],
    ) -> None:
        """Register the expectation; a field the request leaves out (``unstated``: the wallet
        shapes carry no description) keeps what the payment was registered with."""
        ledger = self._require_ledger()
        try:
            register(ledger)
        except ConflictError as err:
            fields = tuple(name for name in err.fields if not unstated.get(name))
            if fields:
                raise ExpectationConflictError(external_identifier, fields) from err
        except ValueError as err:  # the ledger's own checks (an unknown currency code)
            # The ledger's messages start with the argument's name; its currency error
            # starts with the code instead, and says so by its own code.
            field = str(err).split(" ", 1)[0].removesuffix(":")
            if getattr(err, "code", None) == "unknown_currency":
                field = "currency"
            raise RequestValidationError(field, str(err)) from err

    def _create(
        self,
        ledger: Ledger,
        kind: str,
        external_identifier: str,
        path: str,
        body: dict[str, Any],
        *,
        after: int | None,
        idempotency_key: str | None,
        headers: dict[str, str],
        read: Callable[[Any], _T],
    ) -> _T:
        attempt = self._record(
            ledger.service.begin_creation, external_identifier, kind, idempotency_key, after=after
        )
        if attempt is None:  # another call began an attempt since this one looked
            latest = self._latest_attempt(ledger, external_identifier)
            assert latest is not None
            if latest.state is CreationState.CREATED:
                raise AlreadyCreatedError(external_identifier, latest.service_id)
            raise CreationInProgressError(external_identifier, latest.started_at)
        service = ledger.service
        try:
            answer = read(
                self._transport.call(
                    "POST", path, body=body, headers=headers, idempotent=idempotency_key is not None
                )
            )
        except ServiceError as err:
            answered = err if isinstance(err, ServiceResponseError) else None
            status = None if answered is None else answered.status
            self._record(
                service.finish_creation,
                attempt,
                CreationState.REFUSED if status and status < 500 else CreationState.UNCERTAIN,
                http_status=status,
                error_code=(answered and answered.service_code) or err.code,
                error=err.message,
            )
            raise
        service_id = getattr(answer, "id", None)
        self._record(
            service.finish_creation,
            attempt,
            CreationState.CREATED,
            service_id=service_id,
            http_status=200,
        )
        return answer

    # -- lists -----------------------------------------------------------------------------

    def buyer_pages(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Iterator[Page[Buyer]]:
        """``GET /buyers`` page by page from ``cursor`` (the first page when None)."""
        return self._pages("/buyers", Buyer.from_wire, limit, cursor)

    def buyers(self, *, limit: int | None = None, cursor: str | None = None) -> Iterator[Buyer]:
        """Every buyer, following ``next_cursor``; ``limit`` is the page size asked for."""
        for page in self.buyer_pages(limit=limit, cursor=cursor):
            yield from page.items

    def transaction_pages(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Iterator[Page[Transaction]]:
        """``GET /v4/transactions`` page by page. The items are assumed to be 2.3's object."""
        return self._pages("/v4/transactions", Transaction.from_wire, limit, cursor)

    def transactions(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> Iterator[Transaction]:
        """Every transaction, following ``next_cursor``."""
        for page in self.transaction_pages(limit=limit, cursor=cursor):
            yield from page.items

    def _pages(
        self, path: str, read: Callable[[Any], _T], limit: int | None, cursor: str | None
    ) -> Iterator[Page[_T]]:
        if limit is not None and (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_PAGE_LIMIT
        ):
            raise RequestValidationError("limit", f"must be an integer from 1 to {MAX_PAGE_LIMIT}")
        return self._walk(path, read, limit, cursor)

    def _walk(
        self, path: str, read: Callable[[Any], _T], limit: int | None, cursor: str | None
    ) -> Iterator[Page[_T]]:
        seen: set[int] = set()  # the cursors' hashes: a few bytes a page, however long each is
        while True:
            params: dict[str, str | int] = {}
            if limit is not None:
                params["limit"] = limit
            if cursor is not None:
                params["cursor"] = cursor  # as received: cursors are opaque
            page: Page[_T] = page_from_wire(
                self._transport.call("GET", path, params=params, idempotent=True), read
            )
            yield page
            cursor = page.next_cursor
            if cursor is None:
                return
            if hash(cursor) in seen:  # a service answering a cursor again would loop forever
                raise ServiceError(
                    f"GET {path} returned a next_cursor it had already returned.",
                    code="cursor_loop",
                )
            seen.add(hash(cursor))
