"""What a ledger's target names: a SQLite file path or a PostgreSQL URL.

``PAYHOOKS_DATABASE``, ``--database`` and :class:`~payhooks.storage.Ledger`'s first argument
take either; the form decides the engine. Kept apart from both engines so that telling them
apart needs no driver (psycopg is an optional extra).
"""

from __future__ import annotations

__all__ = ["is_postgres_url", "redacted"]

_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(target, str) and target.startswith(_SCHEMES)


def redacted(url: str) -> str:
    """``url`` without its password, for messages and ``repr``."""
    scheme, _, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}@{host}"
