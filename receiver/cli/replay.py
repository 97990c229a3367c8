"""``payhooks replay`` and ``reprocess``: deliveries run again, over HTTP or from the ledger.

``replay`` signs JSON bodies and POSTs them to a receiver, as the service would. It doubles as
a load generator: ``--repeat`` sends everything again (each time with a fresh
``webhook-id``, as distinct deliveries, unless ``--same-id`` makes them redeliveries) and
``--concurrency`` sends from several threads. The sending itself is
:mod:`payhooks.receiver.testing`, usable from Python.

``reprocess`` runs stored deliveries through parsing again. It sends signals only inside the
merchant's app (``flask payhooks reprocess``): the receivers are connected there
(:func:`~payhooks.receiver.cli.common.app_or_none`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from payhooks.receiver.cli.common import (
    SIGNING_KEY_ENV,
    Seconds,
    app_or_none,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    settings,
    terminal_text,
)
from payhooks.receiver.cli.signing import resolve_scheme, scheme_option, signer_for
from payhooks.receiver.pipeline import UNFINISHED_STATUSES, delivery_ids, reprocess_deliveries
from payhooks.receiver.testing import ReplayError, ReplayInterrupted, ReplayResult, load_payloads
from payhooks.receiver.testing import replay as send_all
from payhooks.storage import DeliveryStatus

__all__ = ["replay", "reprocess"]


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--url",
    required=True,
    help="The receiver's notifications URL, e.g. http://127.0.0.1:8000/payhooks/notifications.",
)
@click.option(
    "--secret",
    metavar="KEY",
    help=(
        f"The signing key. Default: ${SIGNING_KEY_ENV}, else (HMAC schemes) the first of "
        "$PAYHOOKS_SECRETS."
    ),
)
@scheme_option
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="Send every body N times.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="Send from N threads at once.",
)
@click.option(
    "--same-id",
    is_flag=True,
    help="Sign every repeat of a body with the same webhook-id (redeliveries, not new ones).",
)
@click.option(
    "--timeout",
    type=Seconds(highest=86400),
    default=10.0,
    show_default=True,
    help="Seconds to wait for each answer, at most 86400 (a day).",
)
def replay(
    paths: tuple[Path, ...],
    url: str,
    secret: str | None,
    scheme: str | None,
    repeat: int,
    concurrency: int,
    same_id: bool,
    timeout: float,
) -> None:
    """Sign the JSON bodies in PATHS (files, or folders of *.json) and POST them to --url.

    *.expected.json files (expected results, as sample_payloads/ keeps them) are skipped.
    Prints how many got each answer, and which files; exits 1 if any was refused (no 2xx).
    Ctrl-C stops at once and prints what was answered so far.
    """
    chosen = resolve_scheme(scheme)
    signer = signer_for(chosen, secret)
    try:
        payloads = load_payloads(paths)
    except ReplayError as err:
        raise click.UsageError(err.message) from err
    total = len(payloads) * repeat
    interrupted = None
    with click.progressbar(length=total, label=f"Sending {total}", file=sys.stderr) as bar:

        def advance(_: ReplayResult) -> None:
            bar.update(1)

        try:
            report = send_all(
                url,
                payloads,
                signer,
                repeat=repeat,
                concurrency=concurrency,
                same_id=same_id,
                timeout=timeout,
                on_result=advance,
                keep_results=False,
            )
        except ReplayInterrupted as err:
            report, interrupted = err.report, err
        except ReplayError as err:
            raise click.BadParameter(err.message, param_hint="'--url'") from err
    for label, count in sorted(report.counts.items()):
        click.echo(f"{count:>8}  {terminal_text(label)}  ({_names(report.names[label])})")
    if any(label.startswith(("404 ", "405 ")) for label in report.counts):
        click.echo(_WRONG_URL_HINT, err=True)
    if interrupted is not None:
        raise click.ClickException(
            f"Interrupted: {report.sent} of {total} deliveries were answered before Ctrl-C."
        ) from interrupted
    if not report.ok:
        raise click.ClickException(
            f"{report.refused} of {report.sent} deliveries were refused (no 2xx answer)."
        )


_WRONG_URL_HINT = (
    "Hint: a 404 or 405 means --url is not the receiver's notifications URL: the app's "
    "PAYHOOKS_URL_PREFIX (default /payhooks) then /notifications, as "
    "http://127.0.0.1:8000/payhooks/notifications."
)


def _names(names: set[str], shown: int = 3) -> str:
    """Which files got an answer: the first few by name, and how many more."""
    first = ", ".join(terminal_text(name) for name in sorted(names)[:shown])
    return first + (f" and {len(names) - shown} more" if len(names) > shown else "")


@click.command()
@click.option(
    "--status",
    type=click.Choice([status.value for status in DeliveryStatus]),
    help=(
        "Only deliveries with this status. Default: every delivery without a recorded outcome "
        "(received, malformed_json, invalid_payload, processing_error)."
    ),
)
@click.option(
    "--no-signals",
    is_flag=True,
    help=(
        "Record the outcomes without sending their signals: they stay owed, and "
        "`flask payhooks signals --send` in the app sends them. Required outside an app: "
        "plain `payhooks` has no app whose signals it could send."
    ),
)
@database_option
@fail_on_storage_errors
def reprocess(status: str | None, no_signals: bool, database: Path | None) -> None:
    """Run stored deliveries through parsing again and record their outcomes.

    For deliveries that failed to parse (a status code the map lacked, a bug since fixed).
    Exit 1 when some still cannot be processed. Run it as `flask payhooks reprocess` in your
    app to send the app's signals for each outcome recorded for the first time; plain
    `payhooks reprocess` cannot, and refuses (exit 2) unless given --no-signals.
    """
    config = settings()
    app = None if no_signals else app_or_none()
    if app is None and not no_signals:
        raise click.UsageError(
            "Outside your app, reprocess cannot send its signals: run `flask payhooks "
            "reprocess` in the app, or pass --no-signals to record the outcomes and leave "
            "their signals owed."
        )
    statuses = UNFINISHED_STATUSES if status is None else (DeliveryStatus(status),)
    with ledger_for(database) as ledger:
        ids = delivery_ids(ledger, statuses)
        with click.progressbar(ids, label="Reprocessing", file=sys.stderr) as bar:
            try:
                report = reprocess_deliveries(
                    ledger,
                    bar,
                    time_zone=config.time_zone,
                    status_map=config.status_map,
                    app=app,
                    retries=config.signal_retries,
                )
            except ValueError as err:
                raise click.ClickException(f"The configuration cannot be used: {err}.") from err
    if not report.total:
        click.echo("No delivery to reprocess.")
        return
    listed = ", ".join(f"{count} {name}" for name, count in sorted(report.counts.items()))
    click.echo(f"Reprocessed {report.total} delivery(ies): {listed}.")
    if report.still_failing:
        options = " ".join(
            f"--status {status}" for status in report.failing_statuses if status != "not_found"
        )
        raise click.ClickException(
            f"{report.still_failing} delivery(ies) still cannot be processed; "
            f"`payhooks deliveries list {options}` shows them with their errors."
        )
