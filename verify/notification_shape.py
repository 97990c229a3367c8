"""When a sorted-fields signature determines the body it came with, and when it does not.

The sorted-fields schemes sign a string built from the body's scalar members, not the body.
Many bodies give one string: structure is not written (an object's members are inlined with no
prefix), ``null`` and arrays of scalars are skipped, numbers and booleans look like strings,
and in the HMAC form (``keyvalue`` with no separator) nothing marks where a name ends and a
value begins. A signature over the string therefore vouches for the *string*; a body vouches
for nothing until we know it is the one body that string can mean.

**The rule.** A verified body is accepted only when it is what its signed string *reads back
as*: :func:`read_back` turns a signed string into the one notification it can mean, or None,
and the body's document must be exactly that (same members at the same places, each value a
string of the same text). :func:`read_back` is a function, so two different bodies can never
both equal what one string reads back as: under one signature, at most one body is accepted,
and any other body with the same string is refused. That is the property the tests search.

The reading, per form:

- ``rsa`` (``k=v&k=v``): the string is split on ``&``, each pair on its first ``=``; names and
  values must not be empty. The pairs up to and including ``merchant_transaction_id`` are the
  top level, every later pair is a member of ``payment_data`` (the SDK writes ``payment_data``
  in place, after ``merchant_transaction_id``, and nothing marks where it ends). So a body is
  accepted when its values are non-empty strings with no ``&``, its names have no ``=`` or
  ``&``, it has ``payment_data`` as its only object, and its top-level members all sort
  before ``merchant_transaction_id`` (extra string members inside ``payment_data`` are kept:
  their place in the string is unambiguous).
- ``hmac`` (``kvkv``): nothing separates a name from a value, so only the documented members
  can be read, by name, in the order the SDK writes them: ``ll_transaction_id``,
  ``merchant_transaction_id``, then ``payment_data``'s four base members with the members of
  one form. The provider's member name (``stripe_payment_intent_id``) cannot be read from the
  string at all (``succeeded`` + ``stripe_payment_intent_id`` reads as well as ``succeededs`` +
  ``tripe_payment_intent_id``), so the card and orchestrator forms are read only for provider
  names the receiver is given (the ``providers`` option). The string must have exactly one
  reading over every form and provider: a value that holds the name of a member after it
  makes two, and is refused.

Nothing here knows a member's format (an amount, a time): that is the receiver's parser's work,
on a body this module has shown to be the one the signature means.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from payhooks.verify.sorted_fields import SortedFieldsForm

__all__ = [
    "BASE_MEMBERS",
    "PAYMENT_DATA",
    "TOP_LEVEL_MEMBERS",
    "check_providers",
    "read_back",
    "same_document",
    "shape_problem",
]

#: The notification's top-level members, as the SDK writes them (interface section 6).
TOP_LEVEL_MEMBERS = ("ll_transaction_id", "merchant_transaction_id")
#: The one object of a notification.
PAYMENT_DATA = "payment_data"
#: ``payment_data``'s members in every form.
BASE_MEMBERS = ("payment_status", "payment_amount", "payment_currency_code", "payment_time")
#: Each provider form: the provider member's suffix and the provider's own status member.
_FORMS = (("_payment_intent_id", "status"), ("_psp_reference", "result_code"))
_PROVIDER = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*", re.ASCII)
_MAX_PROVIDER_LENGTH = 32
#: The formats the interface fixes, which the HMAC form's reading needs to tell a last value's
#: end (the same patterns as ``payhooks.receiver.payloads.fields``).
_FORMATS = {
    "payment_time": re.compile(r"[0-9]{14}", re.ASCII),
    "payment_currency_code": re.compile(r"[A-Za-z]{3}", re.ASCII),
    "payment_amount": re.compile(r"[0-9]+\.[0-9]+", re.ASCII),
}
#: Where the top level ends in the RSA form's string.
_LAST_TOP_LEVEL = "merchant_transaction_id"


def check_providers(value: object, *, argument: str = "providers") -> tuple[str, ...]:
    """Validate the provider names a ``sorted-fields-hmac`` receiver reads the card and
    orchestrator forms for (``stripe``, ``adyen``): the prefixes of the provider members.

    :raises ValueError: naming ``argument``.
    """
    names: list[object] = [value] if isinstance(value, str) else list(value or ())  # type: ignore[call-overload]
    checked: list[str] = []
    for name in names:
        if (
            not isinstance(name, str)
            or len(name) > _MAX_PROVIDER_LENGTH
            or _PROVIDER.fullmatch(name) is None
        ):
            raise ValueError(
                f"{argument}: each provider name must be 1 to {_MAX_PROVIDER_LENGTH} lower-case "
                "ASCII letters and digits, in words joined by single underscores (such as "
                "'stripe')"
            )
        if name not in checked:
            checked.append(name)
    return tuple(checked)


def read_back(
    content: str, form: SortedFieldsForm, providers: Sequence[str] = ()
) -> dict[str, Any] | None:
    """The one notification ``content`` (a signed string) can mean, or None when it can mean
    none or several."""
    if form == "rsa":
        return _read_rsa(content)
    return _read_hmac(content, tuple(providers))


def same_document(document: object, expected: object) -> bool:
    """Whether ``document`` (a parsed body) is exactly ``expected`` (a reading): the same
    names, objects where it has objects, and plain strings (not numbers) of the same text."""
    if type(expected) is dict:
        if type(document) is not dict or document.keys() != expected.keys():
            return False
        return all(same_document(document[name], value) for name, value in expected.items())
    return type(document) is str and document == expected


def shape_problem(document: dict[str, Any], form: SortedFieldsForm) -> str:
    """Why ``document`` is not what its string reads back as, in words that quote no value:
    for the error's message."""
    for path, value in _members(document, ()):
        where = ".".join(path)[:80]
        if not path[-1]:
            return "a member has an empty name"
        if value is None:
            return f"{where} is null"
        if isinstance(value, list):
            return f"{where} is an array"
        if isinstance(value, dict):
            if path != (PAYMENT_DATA,):
                return f"{where} is an object, and payment_data is the only one a notification has"
            continue
        if type(value) is not str:
            return f"{where} is a number or a boolean, not a string"
        if isinstance(value, str) and not value:
            return f"{where} is empty"
        if form == "rsa" and ("&" in value or "=" in path[-1] or "&" in path[-1]):
            return f"{where} holds a separator of the signed string ('&' or '=')"
    if not isinstance(document.get(PAYMENT_DATA), dict):
        return "payment_data is missing"
    if form == "rsa":
        return (
            "a member is out of its place: top-level members must sort before "
            "merchant_transaction_id, and ll_transaction_id and merchant_transaction_id must "
            "be at the top level"
        )
    return (
        "the signed string does not read back as exactly one notification: only the "
        "documented members of one form are read under sorted-fields-hmac, provider names "
        "only from the providers option, and a value must not hold a member's name"
    )


def _members(node: dict[str, Any], path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], Any]]:
    for name, value in node.items():
        yield (*path, name), value
        if isinstance(value, dict):
            yield from _members(value, (*path, name))


# -- the RSA form ------------------------------------------------------------------------------


def _read_rsa(content: str) -> dict[str, Any] | None:
    top: dict[str, Any] = {}
    payment_data: dict[str, str] = {}
    target: dict[str, Any] = top
    for pair in content.split("&"):
        name, equals, value = pair.partition("=")
        if not (equals and name and value) or name in target:
            return None
        target[name] = value
        if target is top and name == _LAST_TOP_LEVEL:
            target = payment_data
    if target is top or TOP_LEVEL_MEMBERS[0] not in top or PAYMENT_DATA in top:
        return None
    top[PAYMENT_DATA] = payment_data
    return top


# -- the HMAC form -----------------------------------------------------------------------------


def _java_order(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


def _sequences(providers: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Every order of member names a notification's string can have: the wallet form, and
    each provider form for each provider name."""
    sequences = [(*TOP_LEVEL_MEMBERS, *sorted(BASE_MEMBERS, key=_java_order))]
    for provider in providers:
        for suffix, status in _FORMS:
            members = sorted((*BASE_MEMBERS, provider + suffix, status), key=_java_order)
            sequences.append((*TOP_LEVEL_MEMBERS, *members))
    return tuple(sequences)


def _read_hmac(content: str, providers: tuple[str, ...]) -> dict[str, Any] | None:
    found: list[tuple[tuple[str, ...], list[str]]] = []
    for names in _sequences(providers):
        for values in _segmentations(content, names, limit=2 - len(found)):
            found.append((names, values))
        if len(found) > 1:
            return None
    if len(found) != 1:
        return None
    ((names, values),) = found
    top_count = len(TOP_LEVEL_MEMBERS)
    reading: dict[str, Any] = dict(zip(names[:top_count], values[:top_count], strict=True))
    reading[PAYMENT_DATA] = dict(zip(names[top_count:], values[top_count:], strict=True))
    return reading


def _segmentations(content: str, names: tuple[str, ...], *, limit: int) -> list[list[str]]:
    """Up to ``limit`` ways to read ``content`` as ``names[0] value names[1] value ...``
    with every value non-empty, and in its format where the interface fixes one.

    Memoized on (member, position), so it stays polynomial however many times a name
    occurs in the values.
    """
    if limit < 1 or not content.startswith(names[0]):
        return []
    last = len(names) - 1
    memo: dict[tuple[int, int], list[list[str]]] = {}

    def from_member(index: int, start: int) -> list[list[str]]:
        # ``names[index]`` starts at ``start``: the ways to read the rest.
        key = (index, start)
        if key in memo:
            return memo[key]
        value_start = start + len(names[index])
        results: list[list[str]] = []
        pattern = _FORMATS.get(names[index])
        if index == last:
            value = content[value_start:]
            if value and (pattern is None or pattern.fullmatch(value)):
                results.append([value])
        else:
            following = names[index + 1]
            position = content.find(following, value_start + 1)
            while position != -1 and len(results) < limit:
                if pattern is not None and not pattern.fullmatch(content, value_start, position):
                    position = content.find(following, position + 1)
                    continue
                for rest in from_member(index + 1, position):
                    results.append([content[value_start:position], *rest])
                    if len(results) >= limit:
                        break
                position = content.find(following, position + 1)
        memo[key] = results
        return results

    return from_member(0, 0)
