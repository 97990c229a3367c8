"""``Ledger.finance`` on both engines: a period's tiles by the right clock with exact Decimal
totals per currency, its edges, the chart's buckets, the filtered rows by cursor, their totals
and their stream."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from payhooks.storage import MISMATCH_STATES, Ledger, PaymentState, ReconciliationState
from payhooks.storage.reads import BucketSize, FinanceFilter, bucket_size_for
from payhooks.storage.reads.finance_rows import Figure
from payhooks.storage.reads.finance_sql import RECEIVED_SQL, filtered_rows, next_prefix
from tests.support.factories import T0, FixedClock, make_outcome, record

R = ReconciliationState
DAY = timedelta(days=1)
#: The period the tests look at: 2026-11-21, the day T0 is in.
SINCE = datetime(2026, 11, 21, tzinfo=UTC)
UNTIL = SINCE + DAY


def register(ledger: Ledger, clock: FixedClock, identifier: str, minor: int, currency: str,
             at: datetime) -> None:  # fmt: skip
    clock.now = at
    ledger.expect_transaction(identifier, minor, currency)


def pay(ledger: Ledger, identifier: str, minor: int, currency: str, at: datetime) -> None:
    exponent = {"JPY": 0, "KWD": 3}.get(currency, 2)
    record(
        ledger,
        make_outcome(
            transaction_id=f"ll-{identifier}-{minor}",
            external_identifier=identifier,
            amount_minor=minor,
            amount=Decimal(minor).scaleb(-exponent),
            currency=currency,
            paid_at=at,
        ),
    )


@pytest.fixture
def day(ledger: Ledger, clock: FixedClock) -> Ledger:
    """2026-11-21 and its edges: registrations and payments in three currencies, one at the
    period's first instant, one at its end (outside), one the day before (the previous
    period), an unexpected payment, a mismatch, a payment registered before and paid inside."""
    register(ledger, clock, "cny-1", 2500, "CNY", SINCE)  # first instant: inside
    register(ledger, clock, "cny-2", 1001, "CNY", T0)
    register(ledger, clock, "eur-1", 1000, "EUR", T0)
    register(ledger, clock, "jpy-1", 500, "JPY", T0)
    register(ledger, clock, "cny-late", 700, "CNY", UNTIL)  # the end: outside
    register(ledger, clock, "cny-early", 300, "CNY", SINCE - timedelta(hours=1))  # previous
    pay(ledger, "cny-1", 2500, "CNY", T0)
    pay(ledger, "eur-1", 999, "EUR", T0)  # amount_mismatch
    pay(ledger, "jpy-1", 500, "JPY", UNTIL - timedelta(microseconds=1))  # last instant
    pay(ledger, "cny-early", 300, "CNY", SINCE)  # registered before, paid inside
    pay(ledger, "stray", 4200, "CNY", T0)  # unexpected, opened inside
    pay(ledger, "cny-late", 700, "CNY", UNTIL)  # paid at the end: outside
    return ledger


def shown(found: Mapping[str, Figure]) -> dict[str, tuple[int, str]]:
    return {currency: (f.count, str(f.amount)) for currency, f in found.items()}


def test_received_and_paid_count_money_by_paid_time_with_exact_decimals(day: Ledger) -> None:
    period = day.finance.figures(SINCE, UNTIL)

    assert shown(period.received) == {
        "CNY": (3, "70.00"),  # cny-1, cny-early (registered before), stray
        "EUR": (1, "9.99"),
        "JPY": (1, "500"),
    }
    assert shown(period.paid) == {"CNY": (2, "28.00"), "JPY": (1, "500")}
    assert all(isinstance(f.amount, Decimal) for f in period.received.values())


def test_row_tiles_count_the_rows_opened_in_the_period_as_they_stand(day: Ledger) -> None:
    period = day.finance.figures(SINCE, UNTIL)

    assert shown(period.expected) == {"CNY": (2, "35.01"), "EUR": (1, "10.00"), "JPY": (1, "500")}
    assert shown(period.mismatches) == {"CNY": (1, "42.00"), "EUR": (1, "9.99")}
    assert shown(period.pending) == {"CNY": (1, "10.01")}
    assert period.refunded == {}
    assert period.charged_back == {}
    assert period.drift == {}


def test_the_previous_period_holds_only_its_own_rows(day: Ledger) -> None:
    before = day.finance.figures(SINCE - DAY, SINCE)
    after = day.finance.figures(UNTIL, UNTIL + DAY)

    assert shown(before.expected) == {"CNY": (1, "3.00")}
    assert before.received == {}  # cny-early was paid inside the day, not before it
    assert shown(after.expected) == {"CNY": (1, "7.00")}
    assert shown(after.received) == {"CNY": (1, "7.00")}


def test_refunds_and_charge_backs_are_tiles_of_their_own(ledger: Ledger, clock: FixedClock) -> None:
    register(ledger, clock, "order-r", 2500, "CNY", T0)
    register(ledger, clock, "order-c", 1000, "EUR", T0)
    pay(ledger, "order-r", 2500, "CNY", T0)
    pay(ledger, "order-c", 1000, "EUR", T0)
    for identifier, code, state, minor, currency in (
        ("order-r", "RS", PaymentState.REFUNDED, 2500, "CNY"),
        ("order-c", "CB", PaymentState.CHARGED_BACK, 1000, "EUR"),
    ):
        record(
            ledger,
            make_outcome(
                transaction_id=f"ll-{identifier}-{minor}",
                external_identifier=identifier,
                payment_status=code,
                state=state,
                amount_minor=minor,
                amount=Decimal(minor).scaleb(-2),
                currency=currency,
                paid_at=T0 + timedelta(hours=1),
            ),
        )

    period = ledger.finance.figures(SINCE, UNTIL)

    assert shown(period.refunded) == {"CNY": (1, "25.00")}
    assert shown(period.charged_back) == {"EUR": (1, "10.00")}


def test_totals_and_rows_say_what_went_back_and_when_a_partial_refund_s_amount_is_unknown(
    ledger: Ledger, clock: FixedClock
) -> None:
    for identifier in ("order-r", "order-p", "order-c", "order-k"):
        register(ledger, clock, identifier, 2500, "CNY", T0)
        pay(ledger, identifier, 2500, "CNY", T0)
    for identifier, code, state in (
        ("order-r", "RS", PaymentState.REFUNDED),
        ("order-p", "PR", PaymentState.PARTIALLY_REFUNDED),
        ("order-c", "CB", PaymentState.CHARGED_BACK),
    ):
        record(
            ledger,
            make_outcome(
                transaction_id=f"ll-{identifier}-2500",
                external_identifier=identifier,
                payment_status=code,
                state=state,
                amount_minor=2500,
                amount=Decimal("25.00"),
                currency="CNY",
                paid_at=T0 + timedelta(hours=1),
            ),
        )
    opened = FinanceFilter(registered_since=SINCE, registered_until=UNTIL)

    [total] = ledger.finance.totals(opened)
    rows = {row.external_identifier: row for row in ledger.finance.rows(opened)}

    assert (total.count, total.received, total.refunded, total.charged_back) == (
        4,
        Decimal("100.00"),
        Decimal("25.00"),
        Decimal("25.00"),
    )
    assert (total.net, total.refunds_unknown) == (Decimal("50.00"), 1)
    assert {name for name, row in rows.items() if row.refund_amount_unknown} == {"order-p"}
    assert rows["order-p"].refunded_amount_minor == 0  # the notification said no amount


@pytest.mark.parametrize(
    ("span", "size"),
    [
        (timedelta(hours=1), BucketSize.HOUR),
        (DAY, BucketSize.HOUR),
        (DAY + timedelta(seconds=1), BucketSize.DAY),
        (62 * DAY, BucketSize.DAY),
        (63 * DAY, BucketSize.WEEK),
    ],
)
def test_bucket_size_follows_the_period_s_length(span: timedelta, size: BucketSize) -> None:
    assert bucket_size_for(SINCE, SINCE + span) is size


def test_buckets_by_hour_sum_each_currency_apart(day: Ledger) -> None:
    buckets = day.finance.buckets(SINCE, UNTIL)

    found = {
        (b.start.hour, b.currency): (str(b.expected.amount), str(b.received.amount))
        for b in buckets
    }
    assert found == {
        (0, "CNY"): ("25.00", "3.00"),
        (12, "CNY"): ("10.01", "67.00"),
        (12, "EUR"): ("10.00", "9.99"),
        (12, "JPY"): ("500", "0"),
        (23, "JPY"): ("0", "500"),
    }


def test_buckets_by_week_start_on_monday_and_the_first_at_the_period(day: Ledger) -> None:
    since = datetime(2026, 9, 3, tzinfo=UTC)  # a Thursday
    buckets = day.finance.buckets(since, UNTIL + DAY, BucketSize.WEEK)

    starts = sorted({b.start for b in buckets})
    assert starts == [datetime(2026, 11, 16, tzinfo=UTC)]  # 2026-11-21 is a Saturday
    cny = next(b for b in buckets if b.currency == "CNY")
    assert (str(cny.expected.amount), str(cny.received.amount)) == ("45.01", "77.00")


def every_row(ledger: Ledger, wanted: FinanceFilter, limit: int) -> list[str]:
    seen: list[str] = []
    after = None
    while True:
        page = ledger.finance.page(wanted, after=after, limit=limit)
        seen += [row.external_identifier for row in page.rows]
        if page.next_after is None:
            return seen
        after = page.next_after


OPENED = FinanceFilter(registered_since=SINCE, registered_until=UNTIL)


def newest_first(ledger: Ledger, wanted: FinanceFilter) -> list[str]:
    """The filtered rows in the pages' order: newest opened first, then by identifier, down."""
    rows = sorted(ledger.finance.rows(wanted), key=lambda r: (r.opened_at, r.external_identifier))
    return [row.external_identifier for row in reversed(rows)]


@pytest.mark.parametrize("limit", [1, 2, 50])
def test_cursor_pages_reach_every_filtered_row_once_newest_opened_first(
    day: Ledger, limit: int
) -> None:
    # cny-1 was registered at the period's first instant, stray paid at T0 like the others.
    assert every_row(day, OPENED, limit) == ["stray", "jpy-1", "eur-1", "cny-2", "cny-1"]


@pytest.mark.parametrize("limit", [1, 2, 3, 7])
def test_rows_opened_at_the_same_instant_page_by_identifier_without_loss(
    ledger: Ledger, clock: FixedClock, limit: int
) -> None:
    """Ties on the opened time, across both parts (registered and unexpected): the cursor's
    identifier breaks them, so no row is skipped or repeated."""
    for identifier in ("b", "a", "d"):
        register(ledger, clock, identifier, 100, "EUR", T0)
    register(ledger, clock, "c", 100, "EUR", T0 + DAY)
    for identifier in ("e", "0"):
        pay(ledger, identifier, 100, "EUR", T0)  # unexpected, opened at T0 too
    wanted = FinanceFilter(registered_since=SINCE, registered_until=UNTIL + DAY)

    assert every_row(ledger, wanted, limit) == ["c", "e", "d", "b", "a", "0"]


@pytest.mark.parametrize(
    "after",
    ["cny-1", "", "e30=", "WyJ4IiwgInkiXQ==", "WyIyMDI2LTExLTIxVDAwOjAwOjAwIiwgImEiXQ==", "!!"],
)
def test_a_cursor_no_page_gave_is_a_value_error(day: Ledger, after: str) -> None:
    """Not Base64, not JSON, not a pair, a time that is not stored text (naive)."""
    with pytest.raises(ValueError, match="after is not a cursor"):
        day.finance.page(OPENED, after=after or "=")


@pytest.mark.parametrize(
    ("wanted", "identifiers"),
    [
        (FinanceFilter(), ["cny-1", "cny-2", "cny-early", "cny-late", "eur-1", "jpy-1", "stray"]),
        (OPENED, ["cny-1", "cny-2", "eur-1", "jpy-1", "stray"]),
        (
            FinanceFilter(states=frozenset({R.PAID, R.PENDING})),
            ["cny-1", "cny-2", "cny-early", "cny-late", "jpy-1"],
        ),
        (FinanceFilter(needs_person=True), ["eur-1", "stray"]),
        (
            FinanceFilter(currency="CNY", registered_since=SINCE, registered_until=UNTIL),
            ["cny-1", "cny-2", "stray"],
        ),
        (FinanceFilter(kind="unexpected"), ["stray"]),
        (
            FinanceFilter(kind="transaction", registered_since=SINCE),
            ["cny-1", "cny-2", "cny-late", "eur-1", "jpy-1"],
        ),
        (
            FinanceFilter(paid_since=SINCE, paid_until=UNTIL),
            ["cny-1", "cny-early", "eur-1", "jpy-1", "stray"],
        ),
        (FinanceFilter(paid_since=UNTIL), ["cny-late"]),
        (
            FinanceFilter(currency="CNY", amount_min_minor=1001, amount_max_minor=2500),
            ["cny-1", "cny-2"],
        ),
        (FinanceFilter(currency="CNY", amount_min_minor=4200), ["stray"]),
        (FinanceFilter(identifier_prefix="cny-"), ["cny-1", "cny-2", "cny-early", "cny-late"]),
        (FinanceFilter(identifier_prefix="cny-e"), ["cny-early"]),
        (FinanceFilter(identifier_prefix="zz"), []),
    ],
)
def test_each_filter_selects_its_rows(
    day: Ledger, wanted: FinanceFilter, identifiers: list[str]
) -> None:
    assert every_row(day, wanted, 2) == newest_first(day, wanted)
    assert [row.external_identifier for row in day.finance.rows(wanted)] == identifiers


def test_totals_cover_the_whole_filtered_set_per_currency(day: Ledger) -> None:
    totals = {t.currency: t for t in day.finance.totals(OPENED)}

    assert {c: (t.count, str(t.expected), str(t.received)) for c, t in totals.items()} == {
        "CNY": (3, "35.01", "67.00"),
        "EUR": (1, "10.00", "9.99"),
        "JPY": (1, "500", "500"),
    }
    assert totals["EUR"].difference == Decimal("-0.01")
    assert day.finance.page(OPENED, limit=1).next_after is not None  # one page, whole totals


@pytest.mark.parametrize(
    ("since", "until"),
    [(SINCE, UNTIL), (SINCE - DAY, UNTIL), (SINCE - 70 * DAY, UNTIL)],
    ids=["hours", "days", "weeks"],
)
def test_the_overview_is_the_tiles_the_chart_and_the_totals_read_apart(
    day: Ledger, since: datetime, until: datetime
) -> None:
    overview = day.finance.overview(since, until)

    assert overview.figures == day.finance.figures(since, until)
    assert overview.buckets == day.finance.buckets(since, until)
    opened = FinanceFilter(registered_since=since, registered_until=until)
    assert overview.totals == day.finance.totals(opened)
    assert overview.totals  # the fixture's rows are in every one of these periods


def test_the_needs_person_preset_is_the_mismatch_states_and_drift(day: Ledger) -> None:
    rows = list(day.finance.rows(FinanceFilter(needs_person=True)))

    assert rows
    assert all(row.state in MISMATCH_STATES or row.drift for row in rows)


@pytest.mark.parametrize(
    ("wanted", "named"),
    [
        (FinanceFilter(amount_min_minor=1), "currency"),
        (FinanceFilter(kind="refund"), "kind"),
        (FinanceFilter(identifier_prefix="a\x00"), "identifier_prefix"),
        (FinanceFilter(paid_since=datetime(2026, 11, 21)), "paid_since"),
    ],
)
def test_a_filter_the_ledger_cannot_use_is_a_value_error_naming_it(
    ledger: Ledger, wanted: FinanceFilter, named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        ledger.finance.page(wanted)


def test_a_period_must_end_after_it_starts(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="until"):
        ledger.finance.figures(SINCE, SINCE)


@pytest.mark.parametrize(
    ("prefix", "above"),
    [("abc", "abd"), ("a\U0010ffff", "b"), ("\U0010ffff", None), ("a\ud7ff", "a\ue000")],
)
def test_next_prefix_is_the_least_text_above_every_text_with_the_prefix(
    prefix: str, above: str | None
) -> None:
    assert next_prefix(prefix) == above


#: ``ANALYZE``'s statistics of a ledger of a million payments, every one registered (a merchant
#: who registers them all; ``bench.console``'s ledger, times ten): what the planner decides by
#: on a ledger that has been analyzed, where an empty one's defaults decide differently. There
#: ``payment_states_order``'s first column has one value for every row, so the planner
#: reads the table rather than that index, and the empty ``payment_states_unexpected`` has no
#: statistics of its own.
_LARGE_LEDGER_STATS = (
    ("payments", "payments", "1000000 1"),
    ("payments", "payments_created", "1000000 1"),
    ("payment_states", "payment_states", "1000000 1"),
    ("payment_states", "payment_states_order", "1000000 1000000 1"),
    ("payment_states", "payment_states_mismatches", "20000 20000 20000"),
    ("outcomes", "outcomes_paid", "900000 1 1 1 1"),
    ("outcomes", "outcomes_identifier", "940000 1"),
)


def _as_if_analyzed_at_a_million_payments(conn: Any) -> None:
    conn.execute("ANALYZE")
    conn.execute("DELETE FROM sqlite_stat1 WHERE tbl IN ('payments', 'payment_states', 'outcomes')")
    conn.executemany(
        "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (?, ?, ?)", _LARGE_LEDGER_STATS
    )
    conn.execute("ANALYZE sqlite_schema")  # reads the statistics again


@pytest.mark.sqlite_only  # SQLite's query plans
@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh", "analyzed"])
@pytest.mark.parametrize(
    "wanted",
    [
        OPENED,
        FinanceFilter(kind="unexpected", registered_since=SINCE, registered_until=UNTIL),
        FinanceFilter(paid_since=SINCE, paid_until=UNTIL),
    ],
    ids=["opened", "unexpected", "paid"],
)
def test_a_period_s_rows_are_read_through_indexes_never_a_scan(
    ledger: Ledger, wanted: FinanceFilter, analyzed: bool
) -> None:
    if analyzed:
        with ledger.database.conn:
            _as_if_analyzed_at_a_million_payments(ledger.database.conn)
    sql, params = filtered_rows(wanted, limit=51)
    steps = [row[3] for row in ledger.database.execute("EXPLAIN QUERY PLAN " + sql, params)]

    assert not [step for step in steps if step.startswith("SCAN")], steps


@pytest.mark.sqlite_only  # SQLite's query plans
def test_money_paid_in_a_period_is_summed_from_the_index_alone(ledger: Ledger) -> None:
    steps = [
        row[3]
        for row in ledger.database.execute(
            "EXPLAIN QUERY PLAN " + RECEIVED_SQL, ("2026-11-21", "2026-11-22")
        )
    ]

    assert steps[0].startswith("SEARCH o USING COVERING INDEX outcomes_paid"), steps
