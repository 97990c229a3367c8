"""Under one sorted-fields signature, at most one notification: the property, searched.

A sorted-fields signature covers a string built from the body, and many bodies give one
string. ``payhooks.verify.notification_shape`` accepts a verified body only when it is what the
string reads back as. These tests start from genuine signed notifications of every form, with
values drawn to be as confusable as possible (member names, separators, digits), and search
for a second body with the same signed string: re-segmentations of the string into other
names and values, pairs inlined from wrapper objects (whose names the string never shows,
empty names included), members moved in or out of ``payment_data``, and padding (``null``,
arrays, empty objects, spaces, numbers for numeric strings). Whatever is found must be refused
as ``non_canonical_body``, or be the same notification (the same outcome record, the same
dedupe key). The string is checked to be the genuine one for every candidate, so a candidate
that is refused is refused for its shape, never for a broken signature.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.receiver.payloads import PayloadError, parse_notification
from payhooks.verify import (
    KeyPair,
    NonCanonicalBodyError,
    SignatureError,
    Signer,
    Verifier,
    generate_keypair,
    get_signer,
    get_verifier,
)
from payhooks.verify.sorted_fields import parse_body, signed_string
from tests.support.notifications import PROVIDERS, notification_document

SCHEMES = ["sorted-fields-hmac", "sorted-fields-rsa"]
FORMS = ["wallet", "card", "orchestrator"]
MEMBER_NAMES = [
    "ll_transaction_id",
    "merchant_transaction_id",
    "payment_amount",
    "payment_currency_code",
    "payment_status",
    "payment_time",
    "status",
    "result_code",
    "stripe_payment_intent_id",
    "adyen_psp_reference",
    "_payment_intent_id",
    "_psp_reference",
]

SEARCH = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@cache
def keys_for(scheme: str) -> KeyPair:
    return generate_keypair(scheme)


@cache
def signer_for(scheme: str) -> Signer:
    """One signer per scheme: a signer keeps no state between signatures, and loading an RSA
    private key checks the key (about 60 ms of CPU), once per example before."""
    return get_signer(scheme, keys_for(scheme).signing_key)


def verifier_for(scheme: str) -> Verifier:
    options: dict[str, Any] = {"providers": list(PROVIDERS)} if scheme.endswith("hmac") else {}
    return get_verifier(scheme, keys_for(scheme).verifying_key, tolerance_seconds=None, **options)


def form_of(scheme: str) -> str:
    return "hmac" if scheme.endswith("hmac") else "rsa"


# -- genuine notifications ---------------------------------------------------------------------

#: Values as confusable as the interface allows: realistic ones, and text made of member names,
#: separators, digits and the letters provider names are made of.
confusable = st.one_of(
    st.sampled_from(["order-1001", "order-100", "12.34", "12.3", "ll-1", "pi_3Pq", "PSP8812"]),
    st.lists(
        st.one_of(st.sampled_from(MEMBER_NAMES), st.sampled_from(list("ab_-=&.019s"))),
        min_size=1,
        max_size=5,
    ).map("".join),
)


@st.composite
def genuine_notifications(draw: st.DrawFn) -> dict[str, Any]:
    form = draw(st.sampled_from(FORMS))
    document = notification_document(form)
    for name in ("ll_transaction_id", "merchant_transaction_id"):
        if draw(st.booleans()):
            document[name] = draw(confusable)
    payment_data = document["payment_data"]
    if draw(st.booleans()):
        payment_data["payment_amount"] = draw(st.sampled_from(["12.34", "1.0", "25.00", "0.5"]))
    for name in ("payment_status", "status", "result_code", "stripe_payment_intent_id"):
        if name in payment_data and draw(st.booleans()):
            payment_data[name] = draw(confusable)
    return document


# -- second bodies with the same string ---------------------------------------------------------


def pairs_of(document: dict[str, Any]) -> list[tuple[str, str]]:
    """The (name, value) pairs the walk writes, in order, for a document of strings."""
    pairs: list[tuple[str, str]] = []
    for name in sorted(document, key=lambda key: key.encode("utf-16-be", "surrogatepass")):
        value = document[name]
        if isinstance(value, dict):
            pairs.extend(pairs_of(value))
        else:
            pairs.append((name, value))
    return pairs


def resegmentations(content: str, form: str, cuts: list[int]) -> Iterator[list[tuple[str, str]]]:
    """The string cut into other (name, value) pairs at positions chosen from ``cuts``."""
    if form == "hmac":
        points = sorted({cut % (len(content) + 1) for cut in cuts} | {0, len(content)})
        pieces = [content[a:b] for a, b in itertools.pairwise(points)]
        if len(pieces) % 2:
            pieces.append("")
        yield list(zip(pieces[::2], pieces[1::2], strict=True))
        return
    # RSA: join the pairs at some '&' only, and split each at any '='.
    ampersands = [i for i, char in enumerate(content) if char == "&"]
    chosen = sorted({ampersands[cut % len(ampersands)] for cut in cuts} if ampersands else set())
    bounds = [-1, *chosen, len(content)]
    segments = [content[a + 1 : b] for a, b in itertools.pairwise(bounds)]
    pairs: list[tuple[str, str]] = []
    for index, segment in enumerate(segments):
        equals = [i for i, char in enumerate(segment) if char == "="]
        if not equals:
            return
        at = equals[(cuts[index % len(cuts)] if cuts else 0) % len(equals)]
        pairs.append((segment[:at], segment[at + 1 :]))
    yield pairs


def wrapped(pairs: list[tuple[str, str]], prefix: str) -> dict[str, Any]:
    """Each pair in a wrapper object whose name sorts it into place (the string never shows
    wrapper names)."""
    return {f"{prefix}{index:04d}": {name: value} for index, (name, value) in enumerate(pairs)}


def documented_places(pairs: list[tuple[str, str]]) -> dict[str, Any] | None:
    """The pairs at the notification's places: its top-level names at the top, the rest in
    ``payment_data``."""
    top: dict[str, Any] = {}
    payment_data: dict[str, Any] = {}
    for name, value in pairs:
        target = top if name in ("ll_transaction_id", "merchant_transaction_id") else payment_data
        if name in target:
            return None
        target[name] = value
    top["payment_data"] = payment_data
    return top


def candidates(
    document: dict[str, Any], content: str, form: str, cuts: list[int]
) -> Iterator[dict[str, Any] | str]:
    """Bodies (documents, or JSON text for layouts) that may share ``document``'s string."""
    pairs = pairs_of(document)
    # Padding and layout: the same document written otherwise, and members the string skips.
    yield json.dumps(document, indent=2)
    yield json.dumps(document, separators=(",", ":"), sort_keys=True)
    extras: tuple[object, ...] = (None, [], ["x", 1], {}, [{}])
    for extra in extras:
        yield {**document, "zzz": extra}
        yield {**document, "payment_data": {**document["payment_data"], "pad": extra}}
    # Inlined objects: the very pairs, each from a wrapper; an empty name carrying a value.
    yield wrapped(pairs, "w")
    yield {**wrapped(pairs[:2], "a"), "payment_data": dict(pairs[2:])}
    yield {"": dict(pairs)}
    # Moved members: each payment_data member to the top level, and back.
    for name in list(document["payment_data"]):
        moved = {**document, "payment_data": dict(document["payment_data"])}
        moved[name] = moved["payment_data"].pop(name)
        yield moved
    for name in ("ll_transaction_id", "merchant_transaction_id"):
        moved = {key: value for key, value in document.items() if key != name}
        moved["payment_data"] = {**document["payment_data"], name: document[name]}
        yield moved
    # Numbers for numeric strings (the string writes them alike when Java does).
    for _, value in pairs:
        if value.replace(".", "", 1).isdigit() and not value.startswith("0"):
            yield json.dumps(document).replace(json.dumps(value), value, 1)
    # Re-segmentations of the string, placed as documented, wrapped, or with empty names.
    for other in resegmentations(content, form, cuts):
        placed = documented_places(other)
        if placed is not None:
            yield placed
        yield wrapped(other, "w")
        yield wrapped(
            [("", name + ("=" if form == "rsa" else "") + value) for name, value in other], "e"
        )


def body_of(candidate: dict[str, Any] | str) -> bytes:
    return (candidate if isinstance(candidate, str) else json.dumps(candidate)).encode()


def outcome_or_error(body: bytes) -> object:
    try:
        return parse_notification(body)
    except PayloadError as err:
        return err.code


@pytest.mark.parametrize("scheme", SCHEMES)
@SEARCH
@given(document=genuine_notifications(), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_no_second_body_under_a_genuine_signature_is_accepted_as_another_notification(
    scheme: str, document: dict[str, Any], cuts: list[int]
) -> None:
    form = form_of(scheme)
    genuine = json.dumps(document).encode()
    headers = signer_for(scheme).sign(genuine)
    content = signed_string(parse_body(genuine), form)  # type: ignore[arg-type]
    verifier = verifier_for(scheme)
    try:
        first = verifier.verify(headers, genuine)
    except NonCanonicalBodyError:
        first = None

    accepted: dict[str, Any] = {}
    if first is not None:
        accepted[json.dumps(document, sort_keys=True)] = outcome_or_error(genuine)
    for candidate in candidates(document, content, form, cuts):
        body = body_of(candidate)
        try:
            if signed_string(parse_body(body), form) != content:  # type: ignore[arg-type]
                continue  # not the genuine string: no attack
        except ValueError:
            continue
        try:
            verified = verifier.verify(headers, body)
        except NonCanonicalBodyError:
            continue
        except SignatureError as err:  # pragma: no cover - the string is the genuine one
            pytest.fail(f"a body with the genuine string was refused as {err.code}")
        # Accepted: the very notification, with the dedupe key of the genuine one.
        assert first is not None, f"accepted {body!r} where the genuine body was refused"
        assert verified.signed_digest == first.signed_digest
        assert json.loads(body) == document or json.loads(body) == json.loads(genuine)
        assert outcome_or_error(body) == accepted[json.dumps(document, sort_keys=True)]


# -- the reviewed attacks, by hand ---------------------------------------------------------------


def test_the_reviewed_resegmentation_of_the_hmac_form_is_refused() -> None:
    # From a genuine notification for order-1001 (12.34), a new ll_transaction_id, a shorter
    # merchant_transaction_id and amount, the cut-off characters moved into members with an
    # empty name inside wrappers placed by their names: the same `kvkv` string.
    genuine = notification_document(payment_amount="12.34")
    genuine["merchant_transaction_id"] = "order-1001"
    body = json.dumps(genuine).encode()
    headers = signer_for("sorted-fields-hmac").sign(body)
    forged = {
        "ll_transaction_id": "ll-",
        "lm": {"": "1"},
        "merchant_transaction_id": "order-100",
        "n": {"": "1"},
        "payment_data": {
            **genuine["payment_data"],
            "payment_amount": "12.3",
            "payment_b": {"": "4"},
        },
    }
    forged_body = json.dumps(forged).encode()
    assert signed_string(parse_body(forged_body), "hmac") == signed_string(parse_body(body), "hmac")

    verifier = verifier_for("sorted-fields-hmac")
    assert verifier.is_valid(headers, body)
    with pytest.raises(NonCanonicalBodyError) as exc_info:
        verifier.verify(headers, forged_body)
    assert exc_info.value.code == "non_canonical_body"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_provider_members_moved_out_of_payment_data_are_refused(scheme: str) -> None:
    # A card notification whose processor disagrees: moved out, it would read as a wallet.
    genuine = notification_document("card", status="requires_payment_method")
    body = json.dumps(genuine).encode()
    headers = signer_for(scheme).sign(body)
    moved = dict(genuine)
    moved["payment_data"] = dict(genuine["payment_data"])
    for name in ("stripe_payment_intent_id", "status"):
        moved[name] = moved["payment_data"].pop(name)
    moved_body = json.dumps(moved).encode()
    form = form_of(scheme)
    assert signed_string(parse_body(moved_body), form) == signed_string(parse_body(body), form)  # type: ignore[arg-type]

    verifier = verifier_for(scheme)
    assert verifier.is_valid(headers, body)
    with pytest.raises(NonCanonicalBodyError):
        verifier.verify(headers, moved_body)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize(
    "padding",
    [
        pytest.param(lambda text: text.replace(", ", ",   \n "), id="whitespace"),
        pytest.param(lambda text: text[:-1] + ', "note": null}', id="null-member"),
        pytest.param(lambda text: text[:-1] + ', "note": [1, 2]}', id="array-of-scalars"),
        pytest.param(lambda text: text[:-1] + ', "note": {}}', id="empty-object"),
    ],
)
def test_a_padded_body_is_the_genuine_one_or_refused(scheme: str, padding: Any) -> None:
    genuine = json.dumps(notification_document("card")).encode()
    padded = padding(genuine.decode()).encode()
    headers = signer_for(scheme).sign(genuine)
    verifier = verifier_for(scheme)

    first = verifier.verify(headers, genuine)
    if json.loads(padded) == json.loads(genuine):
        assert verifier.verify(headers, padded).signed_digest == first.signed_digest
    else:
        with pytest.raises(NonCanonicalBodyError):
            verifier.verify(headers, padded)


def test_hmac_reads_the_provider_forms_only_for_configured_providers() -> None:
    body = json.dumps(notification_document("card")).encode()
    headers = signer_for("sorted-fields-hmac").sign(body)
    told = get_verifier("sorted-fields-hmac", keys_for("sorted-fields-hmac").verifying_key)

    with pytest.raises(NonCanonicalBodyError) as exc_info:
        told.verify(headers, body)
    assert "providers" in exc_info.value.message
    assert verifier_for("sorted-fields-hmac").is_valid(headers, body)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("form", FORMS)
def test_every_documented_form_is_accepted_with_the_digest_of_its_string(
    scheme: str, form: str
) -> None:
    import hashlib

    body = json.dumps(notification_document(form)).encode()
    headers = signer_for(scheme).sign(body)

    verified = verifier_for(scheme).verify(headers, body)

    content = signed_string(parse_body(body), form_of(scheme))  # type: ignore[arg-type]
    assert verified.signed_digest == hashlib.sha256(content.encode()).hexdigest()


def test_rsa_keeps_extra_string_members_where_their_place_is_unambiguous() -> None:
    document = notification_document("card", payment_method="card")
    document["event"] = "payment.succeeded"  # sorts before merchant_transaction_id
    body = json.dumps(document).encode()
    headers = signer_for("sorted-fields-rsa").sign(body)
    verifier = verifier_for("sorted-fields-rsa")

    assert verifier.is_valid(headers, body)
    after = {**document, "zone": "x"}  # sorts after payment_data: could be inside it
    after_body = json.dumps(after).encode()
    after_headers = signer_for("sorted-fields-rsa").sign(after_body)
    with pytest.raises(NonCanonicalBodyError):
        verifier.verify(after_headers, after_body)


@pytest.mark.parametrize("providers", [["Stripe"], ["stripe_"], [""], [1], ["x" * 33]])
def test_a_provider_name_that_no_provider_member_could_carry_is_refused_at_construction(
    providers: list[Any],
) -> None:
    with pytest.raises(ValueError, match=r"^providers: "):
        get_verifier(
            "sorted-fields-hmac", keys_for("sorted-fields-hmac").verifying_key, providers=providers
        )


def test_providers_is_an_option_of_the_hmac_form_only() -> None:
    with pytest.raises(ValueError, match="providers: not an option of the sorted-fields-rsa"):
        get_verifier(
            "sorted-fields-rsa", keys_for("sorted-fields-rsa").verifying_key, providers=["stripe"]
        )
