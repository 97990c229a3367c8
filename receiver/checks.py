"""The health checks: the ledger's vital figures against the operator's limits.

:func:`evaluate` decides, from one :class:`payhooks.storage.reads.Vitals`, each check's pass or fail
with one line saying why; it keeps no state, so cron can run it as often as it likes.
``payhooks check`` prints the result (docs/cli.md); :func:`run_checks` runs it in the
merchant's app, for their scheduler, and sends :data:`payhooks.receiver.signals.check_failed`
for each failing check, as ``flask payhooks check`` does.

The checks, by their stable names, and what fails each are in docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from flask import Flask, current_app

from payhooks.receiver import signals
from payhooks.receiver.durations import format_duration
from payhooks.receiver.state import receiver_state
from payhooks.storage.reads import Vitals

__all__ = [
    "CHECK_NAMES",
    "CheckLimits",
    "CheckReport",
    "CheckResult",
    "evaluate",
    "run_checks",
    "send_failed",
]

#: Every check, in the order they run and print.
CHECK_NAMES: Final = (
    "silence",
    "failure-rate",
    "refusals",
    "signals",
    "receivers",
    "drift",
    "sync",
    "mismatches",
    "rollup",
)


@dataclass(frozen=True, slots=True)
class CheckLimits:
    """What the checks allow; the defaults are what ``payhooks check`` runs with no option."""

    #: The longest time without an accepted delivery.
    max_silence: timedelta = timedelta(hours=24)
    #: The largest share of the last hour's deliveries that may fail, in percent.
    max_failure_percent: Decimal = Decimal(10)
    #: Fewer deliveries than this in the last hour pass the failure rate whatever it is, and
    #: fewer refused requests the refused share.
    min_deliveries: int = 10
    #: The largest share of the last hour's requests (refused, and deliveries stored) that may
    #: be refused, in percent.
    max_refused_percent: Decimal = Decimal(50)
    #: The longest a signal may stay owed.
    max_signal_age: timedelta = timedelta(minutes=15)
    #: The longest a signal may stay owed after its receiver raised (it is being retried).
    max_receiver_failing: timedelta = timedelta(hours=1)
    #: The longest since the last complete sync, once a sync has run.
    max_sync_age: timedelta = timedelta(days=2)
    #: A mismatch whose reconciliation row changed within this is new.
    mismatch_window: timedelta = timedelta(hours=1)
    #: The longest a change may wait to be counted in finance's totals (the health strip
    #: marks the same hour).
    max_rollup_lag: timedelta = timedelta(hours=1)
    #: Checks left out, by name.
    skip: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.skip) - set(CHECK_NAMES))
        if unknown:
            raise ValueError(f"unknown check {unknown[0]!r}; the checks are {CHECK_NAMES}")
        for name in ("max_failure_percent", "max_refused_percent"):
            value = getattr(self, name)
            # A NaN Decimal raises InvalidOperation when compared: ask first.
            finite = value.is_finite() if isinstance(value, Decimal) else isinstance(value, int)
            if not finite or not 0 <= value <= 100:
                raise ValueError(f"{name} must be from 0 to 100, a Decimal")
        if self.min_deliveries < 1:
            raise ValueError("min_deliveries must be 1 or more")


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's verdict."""

    #: One of :data:`CHECK_NAMES`.
    name: str
    ok: bool
    #: One sentence: what was found, against which limit.
    detail: str
    #: The figures it was decided on, by name (``failures``, ``refused_last_hour``...); empty
    #: for a check that counts nothing. Never part of its hash.
    counts: dict[str, int | bool] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Every check run, on one reading of the vitals."""

    vitals: Vitals
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(result.ok for result in self.results)

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(result for result in self.results if not result.ok)

    def as_json(self) -> dict[str, Any]:
        """The report as ``payhooks check --format json`` prints it."""
        return {
            "ok": self.ok,
            "checked_at": self.vitals.now.isoformat(),
            "checks": [
                {
                    "name": result.name,
                    "ok": result.ok,
                    "detail": result.detail,
                    "counts": dict(result.counts),
                }
                for result in self.results
            ],
        }


def _ago(now: datetime, moment: datetime) -> str:
    """How long ago, in whole units of the coarsest that reads well (``40m ago``, ``3h ago``):
    a line for a person, not a figure to the second."""
    seconds = max(0, int((now - moment).total_seconds()))
    for size, unit in ((172_800, 86_400), (7_200, 3_600), (120, 60)):
        if seconds >= size:
            seconds -= seconds % unit
            break
    return format_duration(timedelta(seconds=seconds)) + " ago"


def _silence(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    last = vitals.last_accepted_at
    limit = format_duration(limits.max_silence)
    if last is None:
        return CheckResult("silence", True, "No delivery has ever been accepted.")
    ok = vitals.now - last <= limits.max_silence
    return CheckResult(
        "silence", ok, f"The last accepted delivery was {_ago(vitals.now, last)} (limit {limit})."
    )


def _failure_rate(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    hour = vitals.last_hour
    said = f"{hour.failures} of {hour.deliveries} deliveries failed in the last hour"
    counts: dict[str, int | bool] = {"failures": hour.failures, "deliveries": hour.deliveries}
    if hour.deliveries < limits.min_deliveries:
        too_few = f"{said}: under {limits.min_deliveries}, too few to judge."
        return CheckResult("failure-rate", True, too_few, counts)
    percent = hour.failure_percent or Decimal(0)
    ok = percent <= limits.max_failure_percent
    limit = f"{limits.max_failure_percent.normalize():f}%"
    return CheckResult("failure-rate", ok, f"{said} ({percent}%, limit {limit}).", counts)


def _refusals(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    """A wrong key refuses every delivery and stores none, so the other checks see nothing:
    ``silence`` passes a ledger that never accepted one. Refused requests with none ever
    accepted fail at once, however few; once deliveries arrive, only a refused share of the
    last hour over the limit fails (anyone can send refused requests)."""
    hour, accepted = vitals.last_hour, vitals.last_accepted_at is not None
    counts: dict[str, int | bool] = {
        "refused_last_hour": hour.refused,
        "refused_last_day": vitals.last_day.refused,
        "refused_total": vitals.refused_total,
        "accepted_ever": accepted,
    }
    if vitals.refused_total and not accepted:
        code, count = min(vitals.refused_by_code.items(), key=lambda item: (-item[1], item[0]))
        return CheckResult(
            "refusals",
            False,
            f"{vitals.refused_total} request(s) refused ({code} {count}) and none ever "
            "accepted: check the signing keys (PAYHOOKS_SECRETS).",
            counts,
        )
    seen = hour.refused + hour.deliveries
    said = f"{hour.refused} of {seen} request(s) refused in the last hour"
    if hour.refused < limits.min_deliveries:
        too_few = f"{said}: under {limits.min_deliveries}, too few to judge."
        return CheckResult("refusals", True, too_few, counts)
    percent = (Decimal(hour.refused * 100) / seen).quantize(Decimal("0.1"))
    limit = f"{limits.max_refused_percent.normalize():f}%"
    ok = percent <= limits.max_refused_percent
    return CheckResult("refusals", ok, f"{said} ({percent}%, limit {limit}).", counts)


def _signals(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    oldest = vitals.oldest_unsent_at
    if oldest is None:
        return CheckResult("signals", True, "No signal is owed.")
    ok = vitals.now - oldest <= limits.max_signal_age
    return CheckResult(
        "signals",
        ok,
        f"{vitals.unsent_signals} signal(s) owed, the oldest since {_ago(vitals.now, oldest)} "
        f"(limit {format_duration(limits.max_signal_age)}).",
    )


def _receivers(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    limit = format_duration(limits.max_receiver_failing)
    raised = f"{vitals.receiver_errors} receiver run(s) raised in the last 24h"
    counts: dict[str, int | bool] = {
        "failing_signals": vitals.failing_signals,
        "parked_signals": vitals.parked_signals,
        "receiver_errors_last_day": vitals.receiver_errors,
    }
    oldest = vitals.oldest_failing_at
    if oldest is None:
        return CheckResult("receivers", True, f"No receiver is failing ({raised}).", counts)
    parked, failing = vitals.parked_signals, vitals.failing_signals
    ok = parked == 0 and vitals.now - oldest <= limits.max_receiver_failing
    return CheckResult(
        "receivers",
        ok,
        f"{failing} signal(s) owed after a receiver raised, {parked} of them parked; the first "
        f"raise {_ago(vitals.now, oldest)} (limit {limit}, and none parked); {raised}. "
        "`payhooks signals` lists them.",
        counts,
    )


def _drift(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    if vitals.last_sync is None:
        return CheckResult("drift", True, "The ledger has never synced.")
    if not vitals.drift:
        return CheckResult("drift", True, "The service's list and the ledger agree.")
    kinds = ", ".join(f"{kind.value} {count}" for kind, count in sorted(vitals.drift.items()))
    return CheckResult("drift", False, f"The service's list and the ledger differ: {kinds}.")


def _sync(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    run = vitals.last_sync
    limit = format_duration(limits.max_sync_age)
    if run is None:
        return CheckResult("sync", True, "The ledger has never synced.")
    complete = vitals.last_complete_sync_at
    if complete is None:
        ok = vitals.now - run.started_at <= limits.max_sync_age
        return CheckResult(
            "sync",
            ok,
            f"No sync has completed; the first started {_ago(vitals.now, run.started_at)} "
            f"(limit {limit}).",
        )
    ok = vitals.now - complete <= limits.max_sync_age
    return CheckResult(
        "sync", ok, f"The last complete sync finished {_ago(vitals.now, complete)} (limit {limit})."
    )


def _mismatches(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    window = format_duration(vitals.mismatch_window)
    recent = vitals.recent_mismatches
    return CheckResult(
        "mismatches",
        recent == 0,
        f"{recent} mismatched payment(s) changed in the last {window} "
        f"({vitals.mismatch_total} mismatched in all).",
    )


def _rollup(vitals: Vitals, limits: CheckLimits) -> CheckResult:
    limit = format_duration(limits.max_rollup_lag)
    waiting, lag = vitals.rollup_waiting_since, vitals.rollup_lag
    counts: dict[str, int | bool] = {"lag_seconds": int(lag.total_seconds())}
    if not vitals.rollup_built:
        said = (
            "Finance's rollup is not built yet (the finance page or `payhooks rollup` builds it)."
        )
        return CheckResult("rollup", True, said, counts)
    if waiting is None:
        said = f"Finance's totals are up to date (limit {limit})."
        return CheckResult("rollup", True, said, counts)
    ok = lag <= limits.max_rollup_lag
    detail = f"Finance's totals wait on a change made {_ago(vitals.now, waiting)} (limit {limit})"
    advice = "" if ok else ": run `payhooks rollup`, from cron beside this check"
    return CheckResult("rollup", ok, detail + advice + ".", counts)


_CHECKS: Final = {
    "silence": _silence,
    "failure-rate": _failure_rate,
    "refusals": _refusals,
    "signals": _signals,
    "receivers": _receivers,
    "drift": _drift,
    "sync": _sync,
    "mismatches": _mismatches,
    "rollup": _rollup,
}


def evaluate(vitals: Vitals, limits: CheckLimits | None = None) -> CheckReport:
    """Each check not skipped, in :data:`CHECK_NAMES` order, decided on ``vitals`` (read with
    ``mismatch_window=limits.mismatch_window``)."""
    limits = limits or CheckLimits()
    results = tuple(
        _CHECKS[name](vitals, limits) for name in CHECK_NAMES if name not in limits.skip
    )
    return CheckReport(vitals=vitals, results=results)


def send_failed(app: Flask, report: CheckReport) -> None:
    """Send :data:`~payhooks.receiver.signals.check_failed` for each failing check, with the
    app as sender. A receiver that raises stops the rest, as blinker does: alerting code should
    not fail silently."""
    for result in report.failed:
        signals.check_failed.send(app, check=result, vitals=report.vitals)


def run_checks(
    app: Flask | None = None,
    limits: CheckLimits | None = None,
    *,
    skip: Collection[str] = (),
) -> CheckReport:
    """Run the checks on the app's ledger now and send ``check_failed`` for each that fails:
    for a merchant's scheduler (``flask payhooks check`` does the same from cron).

    :param app: the app with :class:`~payhooks.receiver.PayHooks`; default: the current app.
    :param limits: the checks' limits; default :class:`CheckLimits`'s.
    :param skip: names of checks to leave out, added to ``limits.skip``.
    :raises ValueError: an unknown check name.
    :raises StorageError: the ledger cannot be read.
    """
    found: Flask = app or current_app._get_current_object()  # type: ignore[attr-defined]
    limits = limits or CheckLimits()
    if skip:
        limits = replace(limits, skip=frozenset(limits.skip) | frozenset(skip))
    ledger = receiver_state(found).ledger
    report = evaluate(ledger.vitals(mismatch_window=limits.mismatch_window), limits)
    send_failed(found, report)
    return report
