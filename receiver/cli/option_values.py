"""The values the ``payhooks`` commands read from the command line: amounts (whole minor
units, 1 or more; a negative number is an amount, never an unknown option), ISO 4217 currency
codes, ISO 8601 times, durations, percentages and seconds, each refused in one sentence as bad
usage (exit 2). ``nan`` and the infinities are never a number here: Python's ``float`` reads
them, and they pass every range check (``nan`` compares false with everything)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import click

from payhooks.receiver.durations import parse_duration
from payhooks.storage import MAX_AMOUNT_MINOR, minor_unit_exponent

#: What an expected amount must be, said by every refusal of one.
AMOUNT_RULE = "amounts are 1 or more minor units"


def negative_amount_error(text: str) -> click.BadParameter:
    """The refusal of an amount written with a minus sign (``-5``, ``-0``)."""
    return click.BadParameter(f"{text} is negative: {AMOUNT_RULE}.")


class NegativeAmountsCommand(click.Command):
    """A command whose negative numbers are amounts, not options.

    click reads ``payhooks expect order-1 -5 CNY`` as an unknown option ``-5``; a person meant
    an amount, so a word that is a minus sign and digits, other than the value of an option
    that takes text, is refused as a negative amount.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes_text = {
            name
            for param in self.params
            if isinstance(param, click.Option)
            and not param.is_flag
            and param.name not in AMOUNT_OPTIONS
            for name in param.opts
        }
        previous = None
        for arg in args:
            if arg == "--":
                break
            if _NEGATIVE_NUMBER.fullmatch(arg) and previous not in takes_text:
                raise negative_amount_error(arg)
            previous = arg
        return super().parse_args(ctx, args)


#: The options of :class:`NegativeAmountsCommand` whose value is an amount.
AMOUNT_OPTIONS = frozenset({"plan_amount"})
_NEGATIVE_NUMBER = re.compile(r"-[0-9]+", re.ASCII)


def amount_callback(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """Refuse an amount that is not 1 or more minor units (a payment of nothing cannot be told
    from one not made), or over :data:`payhooks.storage.MAX_AMOUNT_MINOR`, which the ledger
    would refuse too (its sums must stay exact), as bad usage rather than a traceback."""
    if value is not None and value < 0:
        raise negative_amount_error(str(value))
    if value == 0:
        raise click.BadParameter(f"0 is no amount to expect: {AMOUNT_RULE}.")
    if value is not None and value > MAX_AMOUNT_MINOR:
        raise click.BadParameter(
            f"{value} is over the largest amount the ledger takes ({MAX_AMOUNT_MINOR} minor units)."
        )
    return value


def currency_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Check an ISO 4217 code with minor units, upper-cased (``cny`` is ``CNY``)."""
    if value is None:
        return None
    code = value.strip().upper()
    try:
        minor_unit_exponent(code)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 4217 currency code.") from None
    return code


def moment_callback(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime | None:
    """Read an ISO 8601 date or time; one without an offset is UTC.

    The time is returned in UTC, as the ledger compares it: a time whose UTC is before year 1
    or after year 9999 (``0001-01-01T00:00:00+01:00``) is refused here, in one sentence,
    rather than overflowing later.
    """
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 time (2024-05-01 or 2024-05-01T12:00:00+08:00)."
        ) from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise click.BadParameter(
            f"{value!r} is outside the times the ledger can compare (years 1 to 9999 in UTC)."
        ) from None


# click 8.3 made ParamType generic; subscripting it would fail on the 8.1 the project allows.
class Duration(click.ParamType):  # type: ignore[type-arg]
    """A DURATION option (``30s``, ``15m``, ``12h``, ``90d``), read by
    :func:`~payhooks.receiver.durations.parse_duration` into a ``timedelta``; anything else is
    bad usage (exit 2) in one sentence."""

    name = "DURATION"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as err:
            self.fail(str(err), param, ctx)


#: The one instance the commands use: ``type=DURATION``.
DURATION = Duration()


class Percent(click.ParamType):  # type: ignore[type-arg]
    """A PERCENT option: a number from 0 to 100, read as a ``Decimal`` (never through a float);
    anything else (``nan``, ``inf``, ``101``) is bad usage (exit 2) in one sentence."""

    name = "PERCENT"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Decimal:
        if isinstance(value, Decimal) and value.is_finite() and 0 <= value <= 100:
            return value
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            number = Decimal("NaN")
        if not number.is_finite() or not 0 <= number <= 100:
            self.fail(f"{value!r} is not a percentage from 0 to 100 (such as 12.5).", param, ctx)
        return number


#: The one instance the commands use: ``type=PERCENT``.
PERCENT = Percent()


class Seconds(click.FloatRange):
    """A number of seconds above 0 and at most ``highest``; ``nan`` and the infinities, which
    :class:`click.FloatRange` lets through, are bad usage (exit 2) in one sentence."""

    name = "SECONDS"

    def __init__(self, highest: float) -> None:
        super().__init__(min=0, min_open=True, max=highest)

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        seconds: float = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a number of seconds.", param, ctx)
        return seconds
