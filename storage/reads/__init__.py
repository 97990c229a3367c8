"""What people read: the delivery log and its search, a payment's story, finance, vitals, and
the console's own book (its audit log, refusals and reviews).

These are the types the :class:`~payhooks.storage.Ledger`'s reads return and take, for the
console, the command line's reports and a merchant's own pages. The ledger delegates to these
modules, so inside :mod:`payhooks.storage` a module imports a reads module by its own path,
never this package. A type only the console's annotations name stays at its module's path.
"""

from __future__ import annotations

from payhooks.storage.reads.audit import AuditEntry
from payhooks.storage.reads.delivery_log import DeliveryFilter, LogPage, RejectedDelivery
from payhooks.storage.reads.exception_reviews import ReviewStatus
from payhooks.storage.reads.finance import bucket_size_for
from payhooks.storage.reads.finance_rows import (
    UNEXPECTED_KIND,
    BucketSize,
    Figure,
    FinanceFilter,
    FinancePage,
)
from payhooks.storage.reads.local_hours import bucket_starts
from payhooks.storage.reads.log_search import DeliveryErrorCode
from payhooks.storage.reads.story import Entry, EntryKind, PaymentStory, describe
from payhooks.storage.reads.vitals import Vitals

__all__ = [
    "UNEXPECTED_KIND",
    "AuditEntry",
    "BucketSize",
    "DeliveryErrorCode",
    "DeliveryFilter",
    "Entry",
    "EntryKind",
    "Figure",
    "FinanceFilter",
    "FinancePage",
    "LogPage",
    "PaymentStory",
    "RejectedDelivery",
    "ReviewStatus",
    "Vitals",
    "bucket_size_for",
    "bucket_starts",
    "describe",
]
