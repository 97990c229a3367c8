"""``evaluate``'s ``refusals`` check on vital figures written out: its edges, its details and its
counts, decided without a ledger (``test_cli_check`` reads real ledgers)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from payhooks.receiver import CheckLimits, CheckResult
from payhooks.receiver.checks import evaluate
from payhooks.storage.reads import Vitals
from payhooks.storage.reads.vitals import WindowCounts
from tests.support.factories import T0


def vitals(
    refused: int = 0,
    deliveries: int = 0,
    *,
    by_code: dict[str, int] | None = None,
    accepted: bool = True,
) -> Vitals:
    """Figures at T0: ``refused`` requests and ``deliveries`` stored in the last hour (the day
    holds one more refusal), every refusal kept counted in ``by_code`` (default: the day's, as
    ``invalid_signature``), and a delivery accepted two hours ago unless not."""
    last_accepted = T0 - timedelta(hours=2) if accepted else None
    return Vitals(
        now=T0,
        last_delivery_at=last_accepted,
        last_accepted_at=last_accepted,
        last_finished_at=last_accepted,
        last_hour=WindowCounts(deliveries=deliveries, failures=0, refused=refused),
        last_day=WindowCounts(deliveries=deliveries + 1, failures=0, refused=refused + 1),
        errors=(),
        unsent_signals=0,
        oldest_unsent_at=None,
        last_sync=None,
        last_complete_sync_at=None,
        refused_by_code={"invalid_signature": refused + 1} if by_code is None else by_code,
    )


def decided(
    figures: Vitals, limits: CheckLimits | None = None, name: str = "refusals"
) -> CheckResult:
    """The result of the check ``name`` on ``figures``."""
    [result] = [each for each in evaluate(figures, limits).results if each.name == name]
    return result


@pytest.mark.parametrize(
    ("figures", "limits", "ok", "detail"),
    [
        pytest.param(
            vitals(by_code={}, accepted=False),
            CheckLimits(),
            True,
            "0 of 0 request(s) refused in the last hour: under 10, too few to judge.",
            id="a-new-ledger",
        ),
        pytest.param(
            vitals(10, 90),
            CheckLimits(),
            True,
            "10 of 100 request(s) refused in the last hour (10.0%, limit 50%).",
            id="some-refused-a-low-share",
        ),
        pytest.param(
            vitals(10, 10),
            CheckLimits(),
            True,
            "10 of 20 request(s) refused in the last hour (50.0%, limit 50%).",
            id="at-the-limit",
        ),
        pytest.param(
            vitals(30, 10),
            CheckLimits(),
            False,
            "30 of 40 request(s) refused in the last hour (75.0%, limit 50%).",
            id="over-the-limit",
        ),
        pytest.param(
            vitals(30, 10),
            CheckLimits(max_refused_percent=Decimal("80")),
            True,
            "30 of 40 request(s) refused in the last hour (75.0%, limit 80%).",
            id="under-a-higher-limit",
        ),
        pytest.param(
            vitals(9, 0),
            CheckLimits(),
            True,
            "9 of 9 request(s) refused in the last hour: under 10, too few to judge.",
            id="under-min-deliveries",
        ),
        pytest.param(
            vitals(9, 0),
            CheckLimits(min_deliveries=5),
            False,
            "9 of 9 request(s) refused in the last hour (100.0%, limit 50%).",
            id="over-a-lower-min-deliveries",
        ),
    ],
)
def test_refused_requests_fail_when_they_are_over_the_limits_share_of_the_last_hour(
    figures: Vitals, limits: CheckLimits, ok: bool, detail: str
) -> None:
    result = decided(figures, limits)
    assert (result.ok, result.detail) == (ok, detail)


@pytest.mark.parametrize(
    ("refused", "by_code", "detail"),
    [
        pytest.param(
            30,
            {"invalid_signature": 30},
            "30 request(s) refused (invalid_signature 30) and none ever accepted: "
            "check the signing keys (PAYHOOKS_SECRETS).",
            id="thirty-wrong-signatures",
        ),
        pytest.param(
            0,
            {"expired_timestamp": 1},
            "1 request(s) refused (expired_timestamp 1) and none ever accepted: "
            "check the signing keys (PAYHOOKS_SECRETS).",
            id="one-long-ago-under-min-deliveries",
        ),
        pytest.param(
            3,
            {"missing_signature": 2, "invalid_signature": 2, "expired_timestamp": 1},
            "5 request(s) refused (invalid_signature 2) and none ever accepted: "
            "check the signing keys (PAYHOOKS_SECRETS).",
            id="the-most-frequent-code-first-a-tie-by-name",
        ),
    ],
)
def test_refused_requests_with_none_ever_accepted_fail_however_few(
    refused: int, by_code: dict[str, int], detail: str
) -> None:
    result = decided(vitals(refused, by_code=by_code, accepted=False))
    assert (result.ok, result.detail) == (False, detail)


def test_the_refusals_counts_are_the_hour_the_day_and_every_one_kept() -> None:
    figures = vitals(4, 6, by_code={"invalid_signature": 7, "expired_timestamp": 2})
    assert decided(figures).counts == {
        "refused_last_hour": 4,
        "refused_last_day": 5,
        "refused_total": 9,
        "accepted_ever": True,
    }


def test_the_failure_rate_counts_are_the_last_hours_failures_and_deliveries() -> None:
    result = decided(vitals(3, 12), name="failure-rate")
    assert result.counts == {"failures": 0, "deliveries": 12}


@pytest.mark.parametrize("name", ["silence", "signals", "drift", "sync", "mismatches"])
def test_a_check_that_counts_nothing_has_empty_counts(name: str) -> None:
    assert decided(vitals(), name=name).counts == {}


@pytest.mark.parametrize("percent", ["-1", "100.1", "NaN", "sNaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("name", ["max_failure_percent", "max_refused_percent"])
def test_a_share_outside_0_to_100_is_refused_at_construction(percent: str, name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} must be from 0 to 100"):
        CheckLimits(**{name: Decimal(percent)})  # type: ignore[arg-type]
