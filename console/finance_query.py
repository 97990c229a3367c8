"""The finance page's view as the URL carries it: the period, the rows' filters, the page.

The period: ``period`` (``today``, ``7d``, the default, ``30d``, ``90d``: days ending with
today) or ``from`` and ``until`` (``YYYY-MM-DD``, ``until`` exclusive), every day a day of the
merchant's zone (``PAYHOOKS_TIMEZONE``): from its midnight to the next, 23 or 25 hours on a
day the clocks change. The rows:
``state`` (repeated), ``preset=needs_person``, ``currency``, ``kind``, ``registered_from`` /
``registered_until`` and ``paid_from`` / ``paid_until`` (dates), ``amount_min`` /
``amount_max`` (major units; they need ``currency``), ``q`` (an identifier prefix); ``after``
(the opaque cursor of the rows, newest opened first) and ``limit``; ``view=table`` shows the
chart as a table. Without a registered or paid range the rows are those opened in the period.
Every value is checked here: a bad one is a :class:`~payhooks.console.query.BadQuery` naming it
(a 400 page). A period is
checked whole, the period of equal length before it included (the page compares with it), so
no date at the calendar's edges reaches arithmetic that would overflow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final
from zoneinfo import ZoneInfo

from werkzeug.datastructures import MultiDict

from payhooks.console.query import MAX_IDENTIFIER_LENGTH, MAX_LIMIT, BadQuery
from payhooks.storage import MINOR_UNIT_EXPONENTS, PaymentKind, ReconciliationState, to_minor_units
from payhooks.storage.reads import UNEXPECTED_KIND, FinanceFilter

__all__ = [
    "DEFAULT_PERIOD",
    "KINDS",
    "MAX_DAYS",
    "PERIODS",
    "FinanceQuery",
    "parse_finance_query",
]

#: The presets: the URL's value, its label, how many days (today the last of them).
PERIODS: Final[Mapping[str, tuple[str, int]]] = {
    "today": ("Today", 1),
    "7d": ("Last 7 days", 7),
    "30d": ("Last 30 days", 30),
    "90d": ("Last 90 days", 90),
}
DEFAULT_PERIOD: Final = "7d"
#: The longest period ``from`` and ``until`` may span.
MAX_DAYS: Final = 1100
KINDS: Final = (*(kind.value for kind in PaymentKind), UNEXPECTED_KIND)
NEEDS_PERSON: Final = "needs_person"
_DEFAULT_LIMIT: Final = 50
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_AMOUNT = re.compile(r"[0-9]{1,13}(\.[0-9]{1,3})?")
_CURRENCY = re.compile(r"[A-Z]{3}")
_LIMIT = re.compile(r"[0-9]{1,3}")
#: A cursor (``FinanceBook.page``'s): URL-safe Base64, long enough for a time and 64 characters.
_CURSOR = re.compile(r"[A-Za-z0-9_=-]{1,600}")
_UTC: Final = ZoneInfo("UTC")
_DATE_RANGES: Final = ("registered_from", "registered_until", "paid_from", "paid_until")


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    """Where ``day`` starts in ``zone``. A midnight the clocks skip (a gap) is read with the
    offset before it, which is the instant the day's first hour starts."""
    return datetime.combine(day, time(), zone)


@dataclass(frozen=True, slots=True)
class FinanceQuery:
    """One view of the finance page, every value checked."""

    #: The period's first and last midnights, in :attr:`zone`: ``until - since`` is whole days
    #: of the calendar (wall-clock arithmetic, as Python does within one zone).
    since: datetime
    until: datetime
    zone: ZoneInfo = _UTC
    #: The preset chosen, or None for ``from`` and ``until``.
    period: str | None = DEFAULT_PERIOD
    states: tuple[ReconciliationState, ...] = ()
    needs_person: bool = False
    currency: str | None = None
    kind: str | None = None
    #: The dates of the URL, by name (``registered_from``...), as given.
    dates: tuple[tuple[str, date], ...] = ()
    amount_min: Decimal | None = None
    amount_max: Decimal | None = None
    q: str | None = None
    after: str | None = None
    limit: int = _DEFAULT_LIMIT
    as_table: bool = False

    @property
    def previous(self) -> tuple[datetime, datetime]:
        """The period of equal length just before this one."""
        return self.since - (self.until - self.since), self.since

    @property
    def days(self) -> int:
        return (self.until - self.since).days

    def finance_filter(self) -> FinanceFilter:
        """The rows' filter: without a registered or paid range, the rows opened in the
        period."""
        dates = {name: _midnight(day, self.zone) for name, day in self.dates}
        registered = (dates.get("registered_from"), dates.get("registered_until"))
        if not dates:
            registered = (self.since, self.until)
        low, high = (
            None
            if amount is None or self.currency is None
            else to_minor_units(amount, self.currency)
            for amount in (self.amount_min, self.amount_max)
        )
        return FinanceFilter(
            states=frozenset(self.states),
            needs_person=self.needs_person,
            currency=self.currency,
            kind=self.kind,
            registered_since=registered[0],
            registered_until=registered[1],
            paid_since=dates.get("paid_from"),
            paid_until=dates.get("paid_until"),
            amount_min_minor=low,
            amount_max_minor=high,
            identifier_prefix=self.q,
        )

    def args(self, **changes: Any) -> dict[str, Any]:
        """The URL arguments of this view with ``changes``; defaults left out."""
        query = replace(self, **changes)
        found: dict[str, Any] = {}
        if query.period is None:
            found["from"] = query.since.date().isoformat()
            found["until"] = query.until.date().isoformat()
        elif query.period != DEFAULT_PERIOD:
            found["period"] = query.period
        if query.states:
            found["state"] = [state.value for state in query.states]
        if query.needs_person:
            found["preset"] = NEEDS_PERSON
        for name in ("currency", "kind", "q", "after"):
            if getattr(query, name) is not None:
                found[name] = getattr(query, name)
        found |= {name: day.isoformat() for name, day in query.dates}
        if query.amount_min is not None:
            found["amount_min"] = str(query.amount_min)
        if query.amount_max is not None:
            found["amount_max"] = str(query.amount_max)
        if query.limit != _DEFAULT_LIMIT:
            found["limit"] = query.limit
        if query.as_table:
            found["view"] = "table"
        return found


def _date(args: MultiDict[str, str], name: str) -> date | None:
    text = args.get(name)
    if text is None or text == "":
        return None
    try:
        if _DATE.fullmatch(text) is None:
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise BadQuery(f"{name} must be a date, YYYY-MM-DD.") from None


def _period(
    args: MultiDict[str, str], today: date, zone: ZoneInfo
) -> tuple[datetime, datetime, str | None]:
    start, end = _date(args, "from"), _date(args, "until")
    preset = args.get("period") or None
    if start is None and end is None:
        preset = preset or DEFAULT_PERIOD
        if preset not in PERIODS:
            raise BadQuery(f"period must be one of: {', '.join(PERIODS)}.")
        tomorrow = today + timedelta(days=1)
        first = tomorrow - timedelta(days=PERIODS[preset][1])
        return _midnight(first, zone), _midnight(tomorrow, zone), preset
    if preset is not None:
        raise BadQuery("period cannot be given with from and until.")
    if start is None or end is None:
        raise BadQuery("from and until must be given together.")
    if not start < end or (end - start).days > MAX_DAYS:
        raise BadQuery(f"until must be after from, by at most {MAX_DAYS} days.")
    if start - date.min < end - start:
        # The page compares with the period of equal length just before this one, which a
        # datetime cannot hold when it would begin before year 1.
        raise BadQuery(
            "from is too early: the period of equal length just before it, which the page "
            "compares with, would begin before 0001-01-01."
        )
    since, until = _midnight(start, zone), _midnight(end, zone)
    try:  # a zone's midnight at the calendar's edges can fall outside years 1 to 9999 in UTC
        for moment in (since - (until - since), until):
            moment.astimezone(UTC)
    except OverflowError:
        raise BadQuery(
            "from and until are too near the calendar's edges: in this zone the period, or the "
            "one before it that the page compares with, falls outside years 1 to 9999 in UTC."
        ) from None
    return since, until, None


def _states(args: MultiDict[str, str]) -> tuple[ReconciliationState, ...]:
    known = {state.value: state for state in ReconciliationState}
    chosen = []
    for text in args.getlist("state"):
        if text not in known:
            raise BadQuery(f"state must be one of: {', '.join(known)}.")
        chosen.append(known[text])
    return tuple(sorted(set(chosen), key=list(ReconciliationState).index))


def _text(args: MultiDict[str, str], name: str) -> str | None:
    text = args.get(name)
    if text is None or text == "":
        return None
    if len(text) > MAX_IDENTIFIER_LENGTH or "\x00" in text:
        raise BadQuery(f"{name} must be at most {MAX_IDENTIFIER_LENGTH} characters, without NUL.")
    return text


def _cursor(args: MultiDict[str, str]) -> str | None:
    """The rows' cursor as a page gave it (opaque: what it holds is the ledger's to check)."""
    text = args.get("after")
    if text is None or text == "":
        return None
    if _CURSOR.fullmatch(text) is None:
        raise BadQuery("after must be a cursor a page of rows gave; start from the first page.")
    return text


def _amount(args: MultiDict[str, str], name: str, currency: str | None) -> Decimal | None:
    text = args.get(name)
    if text is None or text == "":
        return None
    if _AMOUNT.fullmatch(text) is None:
        raise BadQuery(f"{name} must be an amount such as 25.00.")
    if currency is None:
        raise BadQuery(f"{name} needs a currency: amounts are never compared across currencies.")
    amount = Decimal(text)
    try:
        to_minor_units(amount, currency)
    except ValueError:
        raise BadQuery(f"{name} has more decimals than {currency} has.") from None
    return amount


def _choice(args: MultiDict[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    text = args.get(name)
    if text is None or text == "":
        return None
    if text not in allowed:
        raise BadQuery(f"{name} must be one of: {', '.join(allowed)}.")
    return text


def parse_finance_query(
    args: MultiDict[str, str], now: datetime, zone: ZoneInfo = _UTC
) -> FinanceQuery:
    """The view ``args`` asks for, its presets counted back from ``now``, its days ``zone``'s.

    :raises BadQuery: naming the first value out of range or unknown.
    """
    since, until, preset = _period(args, now.astimezone(zone).date(), zone)
    currency = args.get("currency") or None
    if currency is not None and (
        _CURRENCY.fullmatch(currency) is None or currency not in MINOR_UNIT_EXPONENTS
    ):
        raise BadQuery("currency must be an ISO 4217 code, such as EUR.")
    dates = tuple((name, day) for name in _DATE_RANGES if (day := _date(args, name)) is not None)
    limit_text = args.get("limit") or None
    if limit_text is not None and (
        _LIMIT.fullmatch(limit_text) is None or not 1 <= int(limit_text) <= MAX_LIMIT
    ):
        raise BadQuery(f"limit must be a whole number from 1 to {MAX_LIMIT}.")
    return FinanceQuery(
        since=since,
        until=until,
        zone=zone,
        period=preset,
        states=_states(args),
        needs_person=_choice(args, "preset", (NEEDS_PERSON,)) is not None,
        currency=currency,
        kind=_choice(args, "kind", KINDS),
        dates=dates,
        amount_min=_amount(args, "amount_min", currency),
        amount_max=_amount(args, "amount_max", currency),
        q=_text(args, "q"),
        after=_cursor(args),
        limit=_DEFAULT_LIMIT if limit_text is None else int(limit_text),
        as_table=_choice(args, "view", ("chart", "table")) == "table",
    )
