"""The ledger's upkeep: ``payhooks migrate``, ``copy-ledger``, ``prune``, ``restore-pruned``,
``backup`` and ``rollup``.

``migrate`` is the deploy step that brings a ledger to this payhooks' schema, on either engine
(:func:`payhooks.storage.migrate`): on PostgreSQL it is the only way the schema changes, and it
is safe to run from several hosts at once. ``copy-ledger`` copies a SQLite ledger into an empty
PostgreSQL database and checks the copy (:mod:`payhooks.storage.postgresql.copy`).

``prune`` archives, then drops, the raw bodies and headers of old finished deliveries and old
refused requests (:mod:`payhooks.storage.retention` says what stays); ``restore-pruned`` puts an
archive's bodies back; ``backup`` copies a SQLite ledger while receivers write to it
(PostgreSQL has its own tools: pg_dump, point-in-time recovery). ``rollup`` brings finance's
period totals up to date in ``PAYHOOKS_TIMEZONE`` (:mod:`payhooks.storage.reads.rollup`).
docs/operations.md is the manual.
"""

from __future__ import annotations

import shlex
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from payhooks.receiver.cli.common import (
    DURATION,
    BadUsage,
    database_option,
    fail_on_storage_errors,
    ledger_for,
    resolve_database,
    settings,
    shown,
    terminal_text,
)
from payhooks.receiver.durations import format_duration
from payhooks.receiver.settings import STORED_HEADERS
from payhooks.storage import (
    DEFAULT_AUDIT_HORIZON,
    NotALedgerError,
    StorageError,
    backup_ledger,
    is_postgres_url,
    migrate,
    redacted,
)
from payhooks.storage import copy_ledger as copy

if TYPE_CHECKING:
    from payhooks.storage.retention import PruneReport

__all__ = [
    "backup",
    "check_command",
    "copy_ledger",
    "migrate_command",
    "prune",
    "restore_pruned",
    "rollup",
]


@click.command("migrate")
@database_option
@fail_on_storage_errors
def migrate_command(database: Path | str | None) -> None:
    """Bring the ledger to this payhooks' schema: a deploy step, before new code serves.

    A SQLite file is also migrated whenever it is opened; a PostgreSQL database only by this
    command (run once per deploy, from any host: concurrent runs take turns under an advisory
    lock). A SQLite file that is not a ledger (not SQLite, another application's tables) is
    refused and left as it was. Exit 1 when the database cannot be reached or written, is not
    a payhooks ledger, or was migrated by a newer payhooks.
    """
    target = resolve_database(database)
    before, after = migrate(target, busy_timeout_ms=settings().busy_timeout_ms)
    if before == after:
        click.echo(f"The ledger at {shown(target)} is at schema version {after}: nothing to do.")
    else:
        click.echo(f"Migrated the ledger at {shown(target)} from version {before} to {after}.")


@click.command("copy-ledger")
@click.argument("sqlite_path", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("postgres_url")
def copy_ledger(sqlite_path: Path, postgres_url: str) -> None:
    """Copy a SQLite ledger into an empty PostgreSQL database, then check the copy.

    The PostgreSQL database is migrated first. Every table is copied in one transaction, raw
    bodies byte for byte; the check compares every table's row count, the bodies' hashes and
    the reconciliation summary. Exit 1 when the copy cannot be made or does not check out.
    """
    if not is_postgres_url(postgres_url):
        raise click.BadParameter("must be a postgresql:// URL", param_hint="POSTGRES_URL")
    try:
        report = copy(
            sqlite_path, postgres_url, lambda table: click.echo(f"Copying {table}...", err=True)
        )
    except NotALedgerError as err:
        raise BadUsage(err.message) from err
    except StorageError as err:
        raise click.ClickException(err.message) from err
    for table, (before, after) in report.counts.items():
        click.echo(f"{table}: {before} -> {after}")
    if report.problems:
        raise click.ClickException(f"The copy does not check out: {report.problems[0]}")
    click.echo(f"Copied {sqlite_path} to {redacted(postgres_url)}; the copy checks out.")


# -- retention ----------------------------------------------------------------------------------


def _archive_folder(archive: Path | None, target: Path | str) -> Path:
    """``--archive``, else the SQLite ledger's folder; PostgreSQL has no folder to default to."""
    if archive is not None:
        return archive
    if isinstance(target, str):
        raise BadUsage("A PostgreSQL ledger has no folder: pass --archive DIR for the archive.")
    return target.resolve().parent


def check_command(archive: Path) -> str:
    """The shell command that checks ``archive`` against its sha256sum file, to paste in the
    folder ``prune`` ran in.

    The sha256sum file names the archive without a folder (so it still checks once the pair is
    moved together), and ``sha256sum -c`` opens the names it lists from the current folder:
    the check runs in the archive's folder, in a subshell so the paste leaves the shell where it
    was. Both paths are quoted for the shell.
    """
    checksums = shlex.quote(f"{archive.name}.sha256")
    if archive.parent == Path():
        return f"sha256sum -c {checksums}"
    return f"(cd {shlex.quote(str(archive.parent))} && sha256sum -c {checksums})"


def _leftover_lines(report: PruneReport) -> list[str]:
    """What the prune did (or, dry, would do) with what stopped prunes left in its folder."""
    found = report.leftovers
    lines = []
    if found.removed:
        verb = "Would remove" if report.dry_run else "Removed"
        lines.append(
            f"{verb} {len(found.removed)} temporary file(s) that stopped prunes left: "
            + ", ".join(found.removed)
            + "."
        )
    for name in found.sealed:
        if report.dry_run:
            lines.append(
                f"Would read back {name}, which a stopped prune left without its checksum "
                "file, and write that file."
            )
        else:
            lines.append(
                f"Wrote the checksum file a stopped prune left out for {name} (every record "
                "read back and checked)."
            )
    return lines


def _report_lines(report: PruneReport, older_than: timedelta) -> list[str]:
    what = (
        f"{report.archived_deliveries} deliveries' bodies and {report.rejected} refused "
        f"requests ({report.body_bytes} bytes of bodies) received more than "
        f"{format_duration(older_than)} ago"
    )
    if report.dry_run:
        return [f"Would archive and drop {what}; nothing was changed (--dry-run)."]
    if report.archive is None:
        return [
            f"Nothing to prune: no finished delivery or refused request received more than "
            f"{format_duration(older_than)} ago."
        ]
    lines = [
        f"Archived {what} into {terminal_text(str(report.archive))} with its sha256sum file; "
        "check it with:",
        f"  {terminal_text(check_command(report.archive))}",
        f"Pruned {report.pruned_deliveries} deliveries' bodies and headers; deleted "
        f"{report.rejected} refused requests.",
    ]
    kept = report.archived_deliveries - report.pruned_deliveries
    if kept:
        lines.append(f"{kept} archived deliveries kept their bodies: they owe a signal again.")
    return lines


def _audit_lines(report: PruneReport, audit_older_than: timedelta) -> list[str]:
    """What the prune did (or, dry, would do) with the audit log's old entries."""
    aged = report.audit
    if aged is None:
        return []
    what = (
        f"{aged.entries} audit log entries and {aged.refusals} refusal counts made more than "
        f"{format_duration(audit_older_than)} ago"
    )
    if aged.dry_run:
        return [f"Would archive and delete {what}; nothing was changed (--dry-run)."]
    if aged.archive is None:
        return [f"No audit log entry is older than {format_duration(audit_older_than)}."]
    return [
        f"Archived {what} into {terminal_text(str(aged.archive))} with its sha256sum file, "
        "then deleted them (the audit log records it: prune_audit_log); check it with:",
        f"  {terminal_text(check_command(aged.archive))}",
    ]


@click.command("prune")
@click.option(
    "--older-than",
    type=DURATION,
    required=True,
    help="Prune what was received longer ago than this: 30s, 15m, 12h, 90d.",
)
@click.option(
    "--archive",
    type=click.Path(exists=True, file_okay=False, writable=True, path_type=Path),
    default=None,
    metavar="DIR",
    help="The folder to write the archive in. Default: the SQLite ledger's; required on "
    "PostgreSQL.",
)
@click.option(
    "--audit-older-than",
    type=DURATION,
    default=None,
    help="Archive, then delete, audit log entries made longer ago than this; at least "
    f"--older-than. Default: {format_duration(DEFAULT_AUDIT_HORIZON)}, or --older-than when "
    "longer.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be pruned; change nothing.")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10000),
    default=1000,
    show_default=True,
    help="Rows per transaction: a receiver writing meanwhile waits at most one batch.",
)
@database_option
@fail_on_storage_errors
def prune(
    older_than: timedelta,
    audit_older_than: timedelta | None,
    archive: Path | None,
    dry_run: bool,
    batch_size: int,
    database: Path | str | None,
) -> None:
    """Archive, then drop, the raw bodies and headers of finished deliveries and the refused
    requests received longer ago than --older-than.

    Finished: processed or duplicate, with every signal its outcome owes sent. Outcomes, the
    reconciliation, the signals and each payment's story stay; a pruned delivery keeps its
    body_sha256 and says which archive holds its body. The archive (JSON Lines, gzip, bodies
    in base64) and its sha256sum file are written whole before anything is dropped. First,
    what a stopped prune left in the folder is swept: its temporary files removed once their
    writer is gone, a whole archive given its missing sha256sum file. Exit 1 when the archive
    cannot be written (nothing is dropped) or the ledger fails.

    Then the audit log ages: its entries made longer ago than --audit-older-than, and the
    refusal counts as old, go into an archive of their own, then are deleted through the one
    path the audit log's triggers allow, and an entry says so.
    """
    if older_than <= timedelta(0):
        raise BadUsage("--older-than must be longer than 0s.")
    if audit_older_than is None:
        audit_older_than = max(older_than, DEFAULT_AUDIT_HORIZON)
    elif audit_older_than < older_than:
        raise BadUsage(
            "--audit-older-than must be at least --older-than: the audit log is kept longer "
            "than the bodies it speaks of."
        )
    target = resolve_database(database)
    folder = _archive_folder(archive, target)
    with ledger_for(target, read_only=dry_run) as ledger:
        report = ledger.prune(
            older_than,
            folder,
            dry_run=dry_run,
            batch=batch_size,
            audit_older_than=audit_older_than,
        )
    lines = _report_lines(report, older_than) + _audit_lines(report, audit_older_than)
    for line in [*_leftover_lines(report), *lines]:
        click.echo(line)
    for name, why in report.leftovers.left:
        click.echo(f"Left {name} as it is: {terminal_text(why)}; look at it by hand.", err=True)


@click.command("restore-pruned")
@click.argument(
    "archive_file",
    metavar="ARCHIVE",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@database_option
@fail_on_storage_errors
def restore_pruned(archive_file: Path, database: Path | str | None) -> None:
    """Put the bodies and headers a prune archived back into the deliveries still pruned.

    The archive is checked against its sha256sum file and every body against its SHA-256
    first; a delivery is restored only where its stored body_sha256 matches, and only with
    the headers a receiver stores (with keys configured: the scheme's and STORED_HEADERS by
    name). Refused requests are not put back. Exit 1 when the archive does not check out.
    """
    verifier = settings().verifier
    names = None if verifier is None else (*verifier.header_names, *STORED_HEADERS)
    with ledger_for(database) as ledger:
        restored, total = ledger.restore_pruned(archive_file, header_names=names)
    click.echo(
        f"Restored {restored} deliveries' bodies from {terminal_text(str(archive_file))} "
        f"({total} rows in it, every body checked against its SHA-256)."
    )


@click.command("backup")
@click.argument("dest", type=click.Path(dir_okay=False, path_type=Path))
@database_option
@fail_on_storage_errors
def backup(dest: Path, database: Path | str | None) -> None:
    """Copy a SQLite ledger to the new file DEST, consistently, while receivers write to it.

    SQLite's backup API copies one committed moment; the copy is checked, synced and renamed
    into place, so DEST is always a whole ledger. An existing DEST is never overwritten (exit
    1). A PostgreSQL ledger is refused (exit 2): back it up with pg_dump or point-in-time
    recovery (docs/operations.md).
    """
    target = resolve_database(database)
    if isinstance(target, str):
        raise BadUsage(
            f"payhooks backup copies a SQLite ledger; back up {shown(target)} with pg_dump or "
            "PostgreSQL's point-in-time recovery (docs/operations.md, Backups)."
        )
    if not target.exists():
        raise BadUsage(f"There is no ledger at {target}: pass --database or set PAYHOOKS_DATABASE.")
    try:
        size = backup_ledger(target, dest)
    except NotALedgerError as err:
        raise BadUsage(err.message) from err
    click.echo(
        f"Backed up {terminal_text(str(target))} to {terminal_text(str(dest))} ({size} bytes)."
    )


@click.command()
@click.option(
    "--verify",
    is_flag=True,
    help="Then compute the last --days local days from the rows and print every bucket "
    "stored otherwise; exit 1 when there is one.",
)
@click.option(
    "--days",
    type=click.IntRange(1, 3660),
    default=7,
    show_default=True,
    help="With --verify: how many local days, today included.",
)
@database_option
@fail_on_storage_errors
def rollup(verify: bool, days: int, database: Path | None) -> None:
    """Bring finance's period totals up to date in PAYHOOKS_TIMEZONE: the local hours changed
    since the last refresh, computed again from the rows in chunks, each written in a short
    transaction (for cron or a systemd timer; the console's finance page does the same for a
    moment before it reads). A rollup kept in another zone is built again."""
    with ledger_for(database) as ledger:
        kept = ledger.finance.rollup
        kept.zone = settings().timezone
        report = kept.refresh()
        click.echo(
            f"Marked {report.marked} hour(s), computed {report.computed} ({report.revised} "
            f"day(s) revised after they ended) in {report.seconds:.2f} s; "
            f"{report.dirty_left} left."
        )
        if not verify:
            return
        found = kept.verify(days)
    for one in found:
        key = terminal_text(" ".join(map(str, one.key)))
        click.echo(
            f"{one.table} {one.hour} {key}: stored {one.stored}, the rows say {one.computed}"
        )
    click.echo(f"Verified {days} day(s) in {kept.zone.key}: {len(found)} bucket(s) differ.")
    if found:
        raise click.exceptions.Exit(1)
