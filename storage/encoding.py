"""How the ledger stores mappings (headers, an outcome's extra members, a payment's metadata):
compact JSON text with sorted keys, so equal mappings store equal text and a registration can be
compared with the stored one as text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ["to_json"]


def _json_default(value: object) -> str:
    # Amounts in extra members are Decimals: kept exactly, as text.
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def to_json(value: Mapping[str, Any]) -> str:
    """``value`` as stored; raises TypeError for what JSON cannot hold."""
    return json.dumps(dict(value), sort_keys=True, separators=(",", ":"), default=_json_default)
