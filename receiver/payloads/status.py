"""From the service's ``payment_status`` code to a lifecycle state.

The map is configurable (``PAYHOOKS_STATUS_MAP``) because the service does not publish its
full list of codes; a code the map lacks gives ``unknown``, which the ledger stores and flags
rather than dropping. For the card and orchestrator forms the provider has its own word, and a
success needs both to agree: a ``PS`` whose processor says anything but ``succeeded`` is
``unknown``, for a person to look at, never a payment taken for granted.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from payhooks.storage import DEFAULT_STATUS_MAP, Flow, PaymentState

__all__ = ["AGREEING_PROVIDER_STATUS", "load_status_map", "resolve_state"]

#: The provider status a ``succeeded`` code needs beside it, per form (compared exactly).
AGREEING_PROVIDER_STATUS: Mapping[Flow, str] = MappingProxyType(
    {Flow.CARD: "succeeded", Flow.ORCHESTRATOR: "Authorised"}
)

_STATE_NAMES = ", ".join(state.value for state in PaymentState)

#: The maps :func:`load_status_map` made lately, by ``id``. Such a map is read-only over a dict
#: nobody else holds, so loading it again (the receiver hands its configured map to every
#: parse) can return it as it is instead of checking every code again. Holding the maps keeps
#: their ids from being reused; the bound keeps a caller that loads a fresh map on every call
#: from growing this without end.
_MADE: dict[int, Mapping[str, PaymentState]] = {}
_MADE_LIMIT = 8
_MADE_LOCK = threading.Lock()


def load_status_map(mapping: Mapping[str, Any]) -> Mapping[str, PaymentState]:
    """Validate a configured status map: non-empty string codes to lifecycle state names.

    Values may be :class:`~payhooks.storage.records.PaymentState` members or their names
    (``"succeeded"``). The map replaces the default; it is not merged with it.

    :raises ValueError: naming the offending code or state.
    """
    if mapping is DEFAULT_STATUS_MAP or _MADE.get(id(mapping)) is mapping:
        return mapping
    if not isinstance(mapping, Mapping):
        raise ValueError(  # configuration errors are ValueError, by the package's convention
            f"status_map must be a mapping of status codes to states, not {type(mapping).__name__}"
        )
    loaded: dict[str, PaymentState] = {}
    for code, state in mapping.items():
        if not isinstance(code, str) or not code:
            raise ValueError(f"status_map: the code {code!r} is not a non-empty string")
        try:
            loaded[code] = PaymentState(state)
        except ValueError as err:
            raise ValueError(
                f"status_map: the state {state!r} for code {code!r} is not one of {_STATE_NAMES}"
            ) from err
    made = MappingProxyType(loaded)
    with _MADE_LOCK:
        while len(_MADE) >= _MADE_LIMIT:
            del _MADE[next(iter(_MADE))]  # the oldest
        _MADE[id(made)] = made
    return made


def resolve_state(
    payment_status: str,
    flow: Flow,
    provider_status: str | None,
    status_map: Mapping[str, PaymentState],
) -> PaymentState:
    """The state ``payment_status`` means, checked against the provider's own status."""
    state = status_map.get(payment_status, PaymentState.UNKNOWN)
    agreeing = AGREEING_PROVIDER_STATUS.get(flow)
    if state is PaymentState.SUCCEEDED and agreeing is not None and provider_status != agreeing:
        return PaymentState.UNKNOWN
    return state
