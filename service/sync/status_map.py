"""The service's transaction status strings, and the payhooks state each one means.

The interface shows only ``processing`` (section 3): the other strings of
``GET /v4/transactions`` are an assumption, so the map is the merchant's to change
(``PAYHOOKS_SYNC_STATUS_MAP``). A string the map does not know becomes ``unknown``: it is stored
and reported as ``unknown_status``, never dropped and never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from payhooks.storage import PaymentState

__all__ = ["DEFAULT_SYNC_STATUS_MAP", "check_status_map", "state_for"]

#: What the sandbox lists (docs/service.md's assumptions) and the names the notification
#: states suggest. Keys are compared exactly.
DEFAULT_SYNC_STATUS_MAP: Mapping[str, PaymentState] = MappingProxyType(
    {
        "processing": PaymentState.PENDING,
        "succeeded": PaymentState.SUCCEEDED,
        "failed": PaymentState.FAILED,
        "cancelled": PaymentState.CANCELLED,
        "refund_pending": PaymentState.REFUND_PENDING,
        "partially_refunded": PaymentState.PARTIALLY_REFUNDED,
        "refunded": PaymentState.REFUNDED,
        "charged_back": PaymentState.CHARGED_BACK,
    }
)


def check_status_map(
    status_map: Mapping[str, PaymentState | str], *, name: str = "status_map"
) -> Mapping[str, PaymentState]:
    """``status_map`` checked (non-empty string keys, known states other than ``unknown``),
    frozen. :raises ValueError: naming ``name`` and the bad entry."""
    if not isinstance(status_map, Mapping) or not status_map:
        raise ValueError(f"{name} must be a non-empty mapping of status strings to states")
    checked: dict[str, PaymentState] = {}
    known = ", ".join(s.value for s in PaymentState if s is not PaymentState.UNKNOWN)
    for status, state in status_map.items():
        if not isinstance(status, str) or not status:
            raise ValueError(f"{name}: every status string must be a non-empty string")
        try:
            mapped = PaymentState(state)
        except ValueError:
            mapped = PaymentState.UNKNOWN
        if mapped is PaymentState.UNKNOWN:
            raise ValueError(f"{name}: {status!r} must map to one of {known}, not {state!r}")
        checked[status] = mapped
    return MappingProxyType(checked)


def state_for(status_map: Mapping[str, PaymentState], status: str) -> PaymentState:
    """The state ``status`` means, or ``unknown``."""
    return status_map.get(status, PaymentState.UNKNOWN)
