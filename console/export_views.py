"""The finance page's CSV export, as an action: started by a ``POST``, written outside the
request, downloaded when ready.

- ``POST /exports``: the finance page's form, with the session's token and the page's filters
  as hidden fields. Any role may start one (both read every row on the page anyway), but only
  through that form: the request is refused when another site sent it or the token is not the
  session's, so no other site can make a logged-in person export. The start is the audited
  action (``export_reconciliation_csv``, with the filter); it records the export
  (:meth:`~.export_files.ExportFolder.start`), starts its writer (:mod:`.export_writer`) and
  answers at once: a 303 to the export's page.
- ``GET /exports/<id>``: where it stands (running, with its rows so far; ready, with its row
  count, size, SHA-256 and the download; failed, with why); it reloads itself while running
  (a ``<meta http-equiv="refresh">``: no script).
- ``GET /exports/<id>/reconciliation.csv``: the file, for the person who started it or an
  operator. Not audited again: its start was, with the filter that decides what it holds.
- ``GET /reconciliation.csv``, the old export link: a 303 to the finance page with the same
  arguments and a line saying how exports start now. It writes no entry and reads no row.
"""

from __future__ import annotations

from urllib.parse import urlencode

from flask import Response, render_template, request, send_file, url_for
from werkzeug.wrappers import Response as BaseResponse

from payhooks.console.access import ConsoleRole, current_access
from payhooks.console.acting import Acting, begin_action, current_grant, done
from payhooks.console.answers import error_page
from payhooks.console.export_files import ExportBusy, ExportRecord, ExportState
from payhooks.console.export_writer import start_writer
from payhooks.console.finance_query import parse_finance_query

__all__ = ["ACTION", "export_download", "export_page", "old_csv_link", "start_export"]

#: The audit log's name for starting an export.
ACTION = "export_reconciliation_csv"
#: How often a running export's page reloads itself, in seconds.
REFRESH_SECONDS = 3


def start_export() -> BaseResponse:
    """``POST /exports``: check the request, record the export, start its writer, answer."""
    acting = begin_action(ACTION, None, any_role=True)
    access = current_access()
    now = access.clock()
    query = parse_finance_query(request.form, now, access.timezone)
    shown = query.args(after=None)  # the page's own arguments do not change the rows
    shown_filter = {k: v for k, v in shown.items() if k not in ("limit", "view")}
    try:
        record = access.exports.start(
            who=acting.grant.who,
            role=acting.grant.role.value,
            shown_filter=shown_filter,
            now=now,
        )
    except ExportBusy as busy:
        return error_page(429, "console_busy", busy.message)
    except OSError as err:
        return error_page(
            503,
            "console_exports_unavailable",
            f"The exports' folder cannot be written: {err.strerror or err}.",
        )
    detail = {
        "filter": shown_filter,
        "since": query.since.isoformat(),
        "until": query.until.isoformat(),
        "export": record.id,
    }
    Acting(acting.grant, ACTION, f"export {record.id}", acting.note).record_or_log(
        "started", detail
    )
    start_writer(access.exports, record, access.ledgers, query.finance_filter(), access.clock)
    location = url_for(".export_page", export_id=record.id)
    return done("Export started: this page says when it is ready.", location, "neutral")


def _own_export(export_id: str) -> ExportRecord | Response:
    """The export as its page shows it now, or the page that refuses it: none such (404),
    or another person's to a viewer (403)."""
    access = current_access()
    record = access.exports.record(export_id)
    if record is None:
        return error_page(
            404, "console_not_found", "There is no such export: exports are kept for a day."
        )
    grant = current_grant()
    if grant.who != record.who and grant.role is not ConsoleRole.OPERATOR:
        return error_page(
            403,
            "console_forbidden",
            "This export is the person's who started it: only they and operators may see it.",
        )
    return record.seen_at(access.clock())


def export_page(export_id: str) -> Response | str:
    """``GET /exports/<id>``: where the export stands."""
    record = _own_export(export_id)
    if isinstance(record, Response):
        return record
    return render_template(
        "payhooks_console/export.html",
        export=record,
        states=ExportState,
        refresh=REFRESH_SECONDS,
    )


def export_download(export_id: str) -> Response:
    """``GET /exports/<id>/reconciliation.csv``: the file, once ready, streamed from disk."""
    record = _own_export(export_id)
    if isinstance(record, Response):
        return record
    path = current_access().exports.csv_path(record.id)
    if record.state is not ExportState.READY or not path.is_file():
        return error_page(
            409,
            "console_export_not_ready",
            "This export is not ready to download: its page says where it stands.",
        )
    return send_file(
        path,
        mimetype="text/csv",
        as_attachment=True,
        download_name="reconciliation.csv",
        conditional=False,
        etag=False,
        max_age=0,
    )


def old_csv_link() -> BaseResponse:
    """``GET /reconciliation.csv``: to the finance page with the same arguments, and a line
    saying how exports start now; nothing is read or recorded."""
    query = urlencode(list(request.args.items(multi=True)))
    location = url_for(".reconciliation") + (f"?{query}" if query else "")
    return done(
        "Exports start from this page now: choose Export these rows as CSV, and the export's "
        "page offers the file when it is ready.",
        location,
        "neutral",
    )
