"""What a ledger's target names: a SQLite file path or a PostgreSQL URL.

``PAYHOOKS_DATABASE``, ``--database`` and :class:`~payhooks.storage.Ledger`'s first argument
take either; the form decides the engine. Kept apart from both engines so that telling them
apart needs no driver (psycopg is an optional extra).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["is_postgres_url", "redacted"]

_SCHEMES = ("postgresql://", "postgres://")
# libpq also takes the password as a parameter: ``?password=...``.
_PASSWORD_PARAMETER = re.compile(r"((?:^|&)password=)[^&]*", re.IGNORECASE)


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(target, str) and target.startswith(_SCHEMES)


def redacted(url: str) -> str:
    """``url`` with its password, in the user part or a ``password`` parameter, shown as
    ``***``: for messages, banners and ``repr``. Anything else (a file path) as it is."""
    if not is_postgres_url(url):
        return url
    parts = urlsplit(url)
    credentials, at, hosts = parts.netloc.rpartition("@")
    netloc = parts.netloc
    if at and parts.password is not None:
        netloc = f"{credentials.partition(':')[0]}:***@{hosts}"
    query = _PASSWORD_PARAMETER.sub(r"\1***", parts.query)
    # Written out: ``urlunsplit`` would drop the ``//`` of ``postgresql:///db`` (no host).
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
