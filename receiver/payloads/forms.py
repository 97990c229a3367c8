"""Which of the three notification forms a ``payment_data`` object is, told by its members.

- card: one ``<processor>_payment_intent_id`` member, and ``status``;
- orchestrator: one ``<orchestrator>_psp_reference`` member, and ``result_code``;
- wallet: none of those members (the four base members; anything else unknown is kept).

A member of one form without its partner, two provider members, or members of both forms
fit no form and are refused: guessing would attach an outcome to the wrong provider. A
provider name is what precedes the suffix: lower-case ASCII letters and digits in words
joined by single underscores (``stripe``, ``adyen``, ``2c2p``, ``checkout_com``), at most 32
characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from marshmallow import ValidationError

from payhooks.receiver.payloads.errors import SCHEMA_KEY
from payhooks.storage import Flow

__all__ = [
    "CARD_SUFFIX",
    "MAX_REFERENCE_LENGTH",
    "ORCHESTRATOR_SUFFIX",
    "FormMatch",
    "detect_form",
]

CARD_SUFFIX = "_payment_intent_id"
ORCHESTRATOR_SUFFIX = "_psp_reference"
#: The longest intent id or PSP reference accepted.
MAX_REFERENCE_LENGTH = 255
_MAX_PROVIDER_LENGTH = 32
_PROVIDER = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*", re.ASCII)
#: Member names quoted in messages are cut to this length.
_QUOTED_NAME_LENGTH = 64


@dataclass(frozen=True, slots=True)
class _FormRule:
    flow: Flow
    suffix: str
    status_member: str
    provider_kind: str

    @property
    def placeholder(self) -> str:
        """The provider member as messages name it (``<processor>_payment_intent_id``)."""
        return f"<{self.provider_kind}>{self.suffix}"


_CARD = _FormRule(Flow.CARD, CARD_SUFFIX, "status", "processor")
_ORCHESTRATOR = _FormRule(Flow.ORCHESTRATOR, ORCHESTRATOR_SUFFIX, "result_code", "orchestrator")
_PROVIDER_SUFFIXES = (CARD_SUFFIX, ORCHESTRATOR_SUFFIX)
#: A member named by a suffix alone is a provider member with an empty provider name (refused
#: for that name, on the member).
_CARD_BARE = CARD_SUFFIX[1:]
_BARE_SUFFIXES = frozenset({_CARD_BARE, ORCHESTRATOR_SUFFIX[1:]})


class FormMatch(NamedTuple):
    """The form a ``payment_data`` object fits, and its provider member when it has one.

    A named tuple rather than a frozen dataclass: as immutable, and cheaper to make, once per
    notification.
    """

    flow: Flow
    #: The provider member's prefix (``stripe``); None for the wallet.
    provider: str | None = None
    #: The provider member's name (``stripe_payment_intent_id``); None for the wallet.
    member: str | None = None
    #: The provider member's value: the intent id or PSP reference.
    reference: str | None = None
    #: ``status`` or ``result_code``; None for the wallet.
    status_member: str | None = None


#: Immutable, so one instance serves every wallet body.
_WALLET = FormMatch(Flow.WALLET)


def detect_form(members: Mapping[str, Any]) -> FormMatch:
    """The form ``members`` (the raw ``payment_data``) fits.

    :raises marshmallow.ValidationError: with messages keyed by member (or ``"_schema"``).
    """
    # One pass over the names, with one C-level test for most of them, finds the provider
    # members of both forms; the rest of the work is on those (none for a wallet, one else).
    card_names: list[str] = []
    orchestrator_names: list[str] = []
    for name in members:
        if name.endswith(_PROVIDER_SUFFIXES) or name in _BARE_SUFFIXES:
            if name.endswith(CARD_SUFFIX) or name == _CARD_BARE:
                card_names.append(name)
            else:
                orchestrator_names.append(name)
    card = _form_members(card_names, members, _CARD)
    orchestrator = _form_members(orchestrator_names, members, _ORCHESTRATOR)
    if card and orchestrator:
        raise ValidationError(
            {
                SCHEMA_KEY: [
                    f"payment_data mixes the card form ({_quote(card)}) and the "
                    f"orchestrator form ({_quote(orchestrator)}); it must fit exactly one."
                ]
            }
        )
    if card:
        return _provider_form(members, card_names, _CARD)
    if orchestrator:
        return _provider_form(members, orchestrator_names, _ORCHESTRATOR)
    return _WALLET


def _form_members(names: list[str], members: Mapping[str, Any], rule: _FormRule) -> list[str]:
    """Every member of ``rule``'s form: its provider members ``names`` sorted, then its status.

    Sorts ``names`` in place, for :func:`_provider_form`.
    """
    names.sort()
    if rule.status_member in members:
        return [*names, rule.status_member]
    return names


def _provider_form(members: Mapping[str, Any], names: list[str], rule: _FormRule) -> FormMatch:
    if not names:
        raise ValidationError(
            {
                SCHEMA_KEY: [
                    f"{rule.status_member} needs one {rule.placeholder} member beside it "
                    f"(the {rule.flow} form)."
                ]
            }
        )
    if len(names) > 1:
        raise ValidationError(
            {
                SCHEMA_KEY: [
                    f"payment_data has {len(names)} {rule.provider_kind} members "
                    f"({_quote(names)}); the {rule.flow} form has exactly one."
                ]
            }
        )
    (name,) = names
    provider = name[: -len(rule.suffix)] if name.endswith(rule.suffix) else ""
    reference = members[name]
    errors: dict[str, list[str]] = {}
    if len(provider) > _MAX_PROVIDER_LENGTH or _PROVIDER.fullmatch(provider) is None:
        errors.setdefault(name, []).append(
            f"The {rule.provider_kind} name before {rule.suffix} must be 1 to "
            f"{_MAX_PROVIDER_LENGTH} lower-case ASCII letters and digits, in words joined by "
            "single underscores."
        )
    if not isinstance(reference, str):
        errors.setdefault(name, []).append("Not a valid string.")
    elif not 1 <= len(reference) <= MAX_REFERENCE_LENGTH:
        errors.setdefault(name, []).append(f"Length must be between 1 and {MAX_REFERENCE_LENGTH}.")
    if rule.status_member not in members:
        errors[rule.status_member] = [
            f"Missing data for required field (the {rule.flow} form has {rule.placeholder} and "
            f"{rule.status_member})."
        ]
    if errors:
        raise ValidationError(errors)
    assert isinstance(reference, str)
    return FormMatch(rule.flow, provider, name, reference, rule.status_member)


def _quote(names: list[str]) -> str:
    return ", ".join(
        name if len(name) <= _QUOTED_NAME_LENGTH else name[: _QUOTED_NAME_LENGTH - 3] + "..."
        for name in names
    )
