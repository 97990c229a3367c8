"""The interface's contract as code, shared by the client and the sandbox: request rules,
limits, and payhooks' documented choices where the interface shows none.

Rule of this folder: no I/O and no HTTP library, so both sides check the same rules the same
way (``tests/service/test_layers.py`` enforces it).
"""

from __future__ import annotations

from payhooks.service.interface.limits import (
    DEFAULT_PAGE_LIMIT,
    DESCRIPTION_LENGTH,
    EXTERNAL_IDENTIFIER_LENGTH,
    MAX_AMOUNT_MINOR,
    MAX_CURSOR_LENGTH,
    MAX_PAGE_LIMIT,
    SUBJECT_MAX_LENGTH,
    minor_unit_exponent,
)
from payhooks.service.interface.validation import (
    TransactionShape,
    is_direct_mode,
    validate_subscription,
    validate_transaction,
)

__all__ = [
    "DEFAULT_PAGE_LIMIT",
    "DESCRIPTION_LENGTH",
    "EXTERNAL_IDENTIFIER_LENGTH",
    "MAX_AMOUNT_MINOR",
    "MAX_CURSOR_LENGTH",
    "MAX_PAGE_LIMIT",
    "SUBJECT_MAX_LENGTH",
    "TransactionShape",
    "is_direct_mode",
    "minor_unit_exponent",
    "validate_subscription",
    "validate_transaction",
]
