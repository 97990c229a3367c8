"""``payhooks migrate`` and ``copy-ledger``: the ledger's schema, and moving it to PostgreSQL.

``migrate`` is the deploy step that brings a ledger to this payhooks' schema, on either engine
(:func:`payhooks.storage.migrate`): on PostgreSQL it is the only way the schema changes, and it
is safe to run from several hosts at once. ``copy-ledger`` copies a SQLite ledger into an empty
PostgreSQL database and checks the copy (:mod:`payhooks.storage.postgresql.copy`).
"""

from __future__ import annotations

from pathlib import Path

import click

from payhooks.receiver.cli.common import (
    BadUsage,
    database_option,
    fail_on_storage_errors,
    resolve_database,
    settings,
    shown,
)
from payhooks.storage import NotALedgerError, StorageError, is_postgres_url, migrate, redacted
from payhooks.storage import copy_ledger as copy

__all__ = ["copy_ledger", "migrate_command"]


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
