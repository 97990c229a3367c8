"""The merchant's client of the service (interface section 4).

Rule of this folder: no Flask and nothing of the sandbox; HTTP through httpx only
(``tests/service/test_layers.py`` enforces it).
"""

from __future__ import annotations

from payhooks.service.client.client import DEFAULT_WALLET_CHANNEL_CODES, ServiceClient
from payhooks.service.client.requests import (
    Address,
    BillingDetails,
    BrowserInfo,
    Card,
    CardTransaction,
    CartItem,
    Customer,
    DirectWalletTransaction,
    OrchestratorWalletTransaction,
    Plan,
    SubscriptionPaymentMethod,
    SubscriptionRequest,
    TransactionRequest,
)
from payhooks.service.client.responses import Buyer, CardSummary, Page, Subscription, Transaction
from payhooks.service.client.transport import RetryPolicy
from payhooks.storage import CreationAttempt, CreationState

__all__ = [
    "DEFAULT_WALLET_CHANNEL_CODES",
    "Address",
    "BillingDetails",
    "BrowserInfo",
    "Buyer",
    "Card",
    "CardSummary",
    "CardTransaction",
    "CartItem",
    "CreationAttempt",
    "CreationState",
    "Customer",
    "DirectWalletTransaction",
    "OrchestratorWalletTransaction",
    "Page",
    "Plan",
    "RetryPolicy",
    "ServiceClient",
    "Subscription",
    "SubscriptionPaymentMethod",
    "SubscriptionRequest",
    "Transaction",
    "TransactionRequest",
]
