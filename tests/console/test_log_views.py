"""The delivery log and the refused requests: the URL's filters select the rows and the count,
the cursor pages reach each row once, and a bad value is a 400 page, never a 500."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from flask.testing import FlaskClient

from payhooks.storage import Ledger
from tests.console.conftest import NOTIFY, VIEWER, Clock, Deliver
from tests.support.app import BodyFactory
from tests.support.page_html import parse_page

LOG = "/console/deliveries"
REFUSED = "/console/deliveries/refused"


@dataclass
class Stored:
    """The deliveries sent, by name, and the forged requests' count."""

    ids: dict[str, int] = field(default_factory=dict)
    forged: int = 0


@pytest.fixture
def stored(console: FlaskClient, deliver: Deliver, make_body: BodyFactory) -> Stored:
    """Five deliveries (two processed, a malformed one, a duplicate, an invalid payload) and
    two forged requests the receiver refused."""
    found = Stored()
    found.ids["paid"] = deliver(external_identifier="order-1", transaction_id="ll-1")
    found.ids["other"] = deliver(
        external_identifier="order-2", transaction_id="ll-2", amount="10.00"
    )
    found.ids["malformed"] = deliver(body=b'{"merchant_transaction_id": "order-9", ', status=400)
    found.ids["duplicate"] = deliver(
        external_identifier="order-2", transaction_id="ll-2", amount="10.00"
    )
    found.ids["invalid"] = deliver(body=b'{"merchant_transaction_id": "order-3"}', status=422)
    forged_signature = "v1," + base64.b64encode(b"\0" * 32).decode()
    for n in range(2):
        answer = console.post(
            NOTIFY,
            data=b'{"forged": true}',
            headers={
                "webhook-id": f"forged-{n}",
                "webhook-timestamp": str(int(datetime.now(UTC).timestamp())),
                "webhook-signature": forged_signature,
            },
        )
        assert answer.status_code == 401
        found.forged += 1
    return found


def _shown(client: FlaskClient, url: str) -> tuple[list[int], int, str | None]:
    """The rows' ids a log page lists, the count it gives, and its "Older" link."""
    answer = client.get(url, headers=VIEWER)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    text = answer.get_data(as_text=True)
    ids = [int(each) for each in re.findall(r'data-(?:delivery|refused)="(\d+)"', text)]
    count = re.search(r'data-count="(\d+)"', text)
    assert count is not None
    older = re.search(r'<a rel="next" href="([^"]+)">Older</a>', text)
    return ids, int(count.group(1)), None if older is None else unescape(older.group(1))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", ["invalid", "duplicate", "malformed", "other", "paid"]),
        ("?status=processed", ["other", "paid"]),
        ("?status=processed&status=duplicate", ["duplicate", "other", "paid"]),
        ("?status=malformed_json&status=invalid_payload", ["invalid", "malformed"]),
        ("?status=conflicting_outcome", []),
        ("?identifier=order-2", ["duplicate", "other"]),
        ("?identifier=order-2&status=processed", ["other"]),
        ("?identifier=order-3", ["invalid"]),
        ("?identifier=&window=", ["invalid", "duplicate", "malformed", "other", "paid"]),
        ("?identifier=nobody", []),
        ("?window=all&status=duplicate", ["duplicate"]),
        ("?code=PS", ["duplicate", "other", "paid"]),
        ("?code=PF", []),
        ("?error=malformed_json", ["malformed"]),
        ("?error=invalid_payload&status=invalid_payload", ["invalid"]),
        ("?error=signal_error", []),
        ("?q=order-", ["invalid", "duplicate", "other", "paid"]),
        ("?q=order-2", ["duplicate", "other"]),
        ("?q=rder", []),
        ("?q=ll-2", ["duplicate", "other"]),
        ("?q=ll-", []),
        ("?q=order-2&code=PS&status=duplicate", ["duplicate"]),
        ("?code=&error=&q=", ["invalid", "duplicate", "malformed", "other", "paid"]),
    ],
)
def test_filters_in_the_url_select_the_rows_newest_first_and_count_them(
    console: FlaskClient, stored: Stored, query: str, expected: list[str]
) -> None:
    ids, count, older = _shown(console, LOG + query)

    assert ids == [stored.ids[name] for name in expected]
    assert count == len(expected)
    assert older is None


@pytest.mark.parametrize(
    ("ahead", "window", "shown"),
    [
        (timedelta(hours=2), "1h", False),
        (timedelta(hours=2), "24h", True),
        (timedelta(hours=2), "", True),  # the default: the last 24 hours
        (timedelta(days=2), "24h", False),
        (timedelta(days=2), "7d", True),
        (timedelta(days=30), "7d", False),
        (timedelta(days=30), "all", True),
        (timedelta(0), "1h", True),
    ],
)
def test_the_time_presets_count_back_from_now(
    console: FlaskClient, stored: Stored, clock: Clock, ahead: timedelta, window: str, shown: bool
) -> None:
    clock.ahead = ahead

    ids, count, _ = _shown(console, f"{LOG}?window={window}")
    refused, refused_count, _ = _shown(console, f"{REFUSED}?window={window}")

    assert (count, len(ids)) == ((5, 5) if shown else (0, 0))
    assert (refused_count, len(refused)) == ((2, 2) if shown else (0, 0))


@pytest.mark.parametrize("query", ["", "&status=processed&status=duplicate", "&identifier=order-2"])
@pytest.mark.parametrize("limit", [1, 2, 4])
def test_paging_with_the_older_link_reaches_each_row_exactly_once(
    console: FlaskClient, stored: Stored, query: str, limit: int
) -> None:
    everything, total, _ = _shown(console, f"{LOG}?limit=200{query}")
    seen: list[int] = []
    url: str | None = f"{LOG}?limit={limit}{query}"
    pages = 0
    while url is not None:
        ids, count, url = _shown(console, url)
        assert count == total
        assert 0 < len(ids) <= limit
        seen.extend(ids)
        pages += 1

    assert seen == everything
    assert pages == -(-total // limit)


def test_the_refused_requests_are_listed_with_their_reason_and_size(
    console: FlaskClient, stored: Stored, ledger: Ledger
) -> None:
    kept = ledger.receiver.rejected_log().rows

    ids, count, _ = _shown(console, REFUSED)
    text = console.get(REFUSED, headers=VIEWER).get_data(as_text=True)

    assert ids == [row.id for row in kept]
    assert count == stored.forged == 2
    for row in kept:
        assert f"<code>{row.reason}</code>" in text
        assert f"{row.body_size} bytes" in text
    assert "127.0.0.1" in text


def test_each_refused_request_in_the_log_links_to_its_own_page(
    console: FlaskClient, stored: Stored, ledger: Ledger
) -> None:
    page = parse_page(console.get(REFUSED, headers=VIEWER).get_data(as_text=True))

    rows = page.find_all("tr", data_refused=None)
    links = [[a.attrs["href"] for a in row.find_all("a")] for row in rows]
    assert links == [
        [f"/console/deliveries/refused/{row.id}"] for row in ledger.receiver.rejected_log().rows
    ]
    for [href] in links:
        assert console.get(href, headers=VIEWER).status_code == 200


def test_the_refused_requests_page_one_at_a_time(console: FlaskClient, stored: Stored) -> None:
    first, _, older = _shown(console, f"{REFUSED}?limit=1")
    assert older is not None
    second, _, last = _shown(console, older)

    assert len(first + second) == len(set(first + second)) == 2
    assert last is None


def test_the_log_links_each_delivery_and_its_payment(console: FlaskClient, stored: Stored) -> None:
    text = console.get(LOG, headers=VIEWER).get_data(as_text=True)

    assert f'href="/console/deliveries/{stored.ids["paid"]}"' in text
    assert 'href="/console/payments/order-1"' in text
    assert "<code>PS</code> 25.00 CNY" in text


@pytest.mark.parametrize("page", [LOG, REFUSED])
@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("window=1y", "window"),
        ("window=24H", "window"),
        ("before=0", "before"),
        ("before=-1", "before"),
        ("before=abc", "before"),
        ("before=1.5", "before"),
        ("before=%EF%BC%91", "before"),  # a fullwidth digit one
        ("before=9223372036854775808", "before"),  # past PostgreSQL's bigint
        ("before=99999999999999999999999", "before"),
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=%20", "limit"),
    ],
)
def test_a_bad_query_value_is_a_400_page_naming_it(
    console: FlaskClient, stored: Stored, page: str, query: str, named: str
) -> None:
    answer = console.get(f"{page}?{query}", headers=VIEWER)

    assert answer.status_code == 400
    text = answer.get_data(as_text=True)
    assert 'data-error="console_bad_query"' in text
    assert re.search(rf"<h1>{named} must be [^<.]+\.</h1>", text), text


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("status=lost", "status"),
        ("status=processed&status=PROCESSED", "status"),
        ("identifier=" + "x" * 65, "identifier"),
        ("identifier=order%00-1", "identifier"),
        ("code=" + "x" * 65, "code"),
        ("code=P%00S", "code"),
        ("error=payment_failed", "error"),
        ("q=" + "x" * 256, "q"),
        ("q=order%00", "q"),
    ],
)
def test_a_bad_delivery_filter_is_a_400_page_naming_it(
    console: FlaskClient, stored: Stored, query: str, named: str
) -> None:
    answer = console.get(f"{LOG}?{query}", headers=VIEWER)

    assert answer.status_code == 400
    assert re.search(rf"<h1>{named} must be [^<]+</h1>", answer.get_data(as_text=True))


def test_an_identifier_of_64_characters_is_a_filter(console: FlaskClient, deliver: Deliver) -> None:
    longest = "o" * 64
    delivery_id = deliver(external_identifier=longest)

    ids, count, _ = _shown(console, f"{LOG}?identifier={longest}")

    assert (ids, count) == ([delivery_id], 1)


@pytest.mark.parametrize("name", ["identifier", "q", "code"])
def test_a_filter_text_with_a_bidi_override_is_shown_escaped_never_raw_in_its_box(
    console: FlaskClient, stored: Stored, name: str
) -> None:
    answer = console.get(LOG, query_string={name: "order-\u202e1"}, headers=VIEWER)

    assert answer.status_code == 200
    text = answer.get_data(as_text=True)
    assert "\u202e" not in text
    assert "<code>order-\\u202e1</code> (it holds control characters" in text
    assert f'name="{name}" maxlength' in text
