"""What finance's aggregations take and give back: a filter, figures per currency, chart
buckets, a page of rows (``Ledger.finance``, :mod:`payhooks.storage.reads.finance`).

Money is never added across currencies: every figure is keyed by its currency code, with the
minor units the SQL summed and the same amount as an exact Decimal in major units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import NamedTuple

from payhooks.storage.currencies import from_minor_units
from payhooks.storage.records import ReconciliationState
from payhooks.storage.rows import ReconciliationRow

__all__ = [
    "UNEXPECTED_KIND",
    "BucketSize",
    "ChartBucket",
    "Figure",
    "FilteredTotal",
    "FinanceFilter",
    "FinancePage",
    "PeriodFigures",
    "PeriodOverview",
    "figure",
]

#: The ``kind`` a :class:`FinanceFilter` names rows nobody registered by.
UNEXPECTED_KIND = "unexpected"


@dataclass(frozen=True, slots=True)
class Figure:
    """How many, and how much, in one currency."""

    count: int
    amount_minor: int
    #: ``amount_minor`` in major units of the currency it is keyed by.
    amount: Decimal


def figure(count: int, amount_minor: int, currency: str) -> Figure:
    """A :class:`Figure` with its Decimal amount."""
    return Figure(count, amount_minor, from_minor_units(amount_minor, currency))


@dataclass(frozen=True, slots=True)
class PeriodFigures:
    """One period's tiles, each a mapping of currency code to :class:`Figure`.

    ``received`` and ``paid`` select by paid time (a ``succeeded`` outcome's ``paid_at`` in the
    period: what was paid yesterday); the others select the rows *opened* in the period (a
    payment registered in it, an unexpected one first paid in it), as those rows stand now.
    """

    since: datetime
    until: datetime
    #: Rows of payments registered in the period: their expected amounts.
    expected: Mapping[str, Figure]
    #: Succeeded transactions paid in the period, in the currency they arrived in.
    received: Mapping[str, Figure]
    #: Of those, the ones whose payment reconciled as ``paid`` (the money matched).
    paid: Mapping[str, Figure]
    #: Rows in one of ``MISMATCH_STATES``: their count, and the money they received.
    mismatches: Mapping[str, Figure]
    #: ``pending`` rows: their count and expected amount.
    pending: Mapping[str, Figure]
    #: Rows refunded in part or whole: their count, and the amount refunded in full (a partial
    #: refund's notification does not say how much).
    refunded: Mapping[str, Figure]
    #: Rows charged back: their count, and the amount charged back.
    charged_back: Mapping[str, Figure]
    #: Rows the service's list disagrees with: their count and expected amount.
    drift: Mapping[str, Figure]
    #: None when the figures are current; else the time they hold (read from the rollup, asked
    #: with ``as_of_ok``, while changes since that time still wait to be counted).
    as_of: datetime | None = None


class BucketSize(StrEnum):
    """How wide a chart's bucket is."""

    HOUR = "hour"
    DAY = "day"
    WEEK = "week"


class ChartBucket(NamedTuple):
    """One bucket's totals in one currency: expected (registered in it) and received (paid in
    it)."""

    start: datetime
    currency: str
    expected: Figure
    received: Figure


@dataclass(frozen=True, slots=True)
class FinanceFilter:
    """Which reconciliation rows: every field narrows; the defaults narrow nothing.

    Ranges are ``[since, until)``; a missing end is open. ``amount_min_minor`` and
    ``amount_max_minor`` compare the expected amount (the received one for a row nobody
    expected) and need ``currency``: amounts in two currencies are never compared.
    """

    states: frozenset[ReconciliationState] = frozenset()
    #: Only rows in ``MISMATCH_STATES`` or with drift (what needs a person).
    needs_person: bool = False
    currency: str | None = None
    #: ``"transaction"``, ``"subscription"`` or :data:`UNEXPECTED_KIND`.
    kind: str | None = None
    registered_since: datetime | None = None
    registered_until: datetime | None = None
    paid_since: datetime | None = None
    paid_until: datetime | None = None
    amount_min_minor: int | None = None
    amount_max_minor: int | None = None
    #: Identifiers starting with this (a prefix search, so the primary key serves it).
    identifier_prefix: str | None = None


@dataclass(frozen=True, slots=True)
class PeriodOverview:
    """A period's tiles, its chart's buckets and the totals of every row opened in it: the
    finance page above its rows, read at once (``Ledger.finance.overview``)."""

    figures: PeriodFigures
    buckets: list[ChartBucket]
    #: Per currency, as :meth:`~payhooks.storage.reads.finance.FinanceBook.totals` gives them for
    #: the rows opened in the period.
    totals: list[FilteredTotal]
    #: None when the figures are current; else the time they hold (read from the rollup while
    #: changes since that time still wait to be counted).
    as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class FinancePage:
    """One page of rows, newest opened first, and the opaque cursor of the next (None: the
    last page)."""

    rows: list[ReconciliationRow] = field(default_factory=list)
    next_after: str | None = None


@dataclass(frozen=True, slots=True)
class FilteredTotal:
    """The totals of a filtered set of rows in one currency; money received in another
    currency counts in that one's total, never in this one's."""

    currency: str
    #: Rows (payments, and unexpected ones) in this currency.
    count: int
    expected: Decimal
    received: Decimal
    #: Of ``received``, refunded in full and charged back (a partial refund's amount is not
    #: known: see ``refunds_unknown``).
    refunded: Decimal = Decimal(0)
    charged_back: Decimal = Decimal(0)
    #: Rows in this currency ``partially_refunded``: refunded by an amount nobody said.
    refunds_unknown: int = 0

    @property
    def difference(self) -> Decimal:
        """Received less expected."""
        return self.received - self.expected

    @property
    def net(self) -> Decimal:
        """Received, less refunded in full and charged back (at most this while
        ``refunds_unknown``)."""
        return self.received - self.refunded - self.charged_back
