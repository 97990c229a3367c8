"""Webhook signature schemes: verify deliveries, sign bodies, make keys. No Flask, no storage."""

from __future__ import annotations

from payhooks.verify.base import KeyPair, Signer, VerifiedDelivery, Verifier
from payhooks.verify.errors import (
    InvalidSignatureError,
    MalformedSignatureError,
    MissingSignatureError,
    NonCanonicalBodyError,
    SignatureError,
    TimestampOutOfToleranceError,
)
from payhooks.verify.fingerprints import key_fingerprint
from payhooks.verify.java_double import java_double_to_string
from payhooks.verify.registry import (
    DEFAULT_SCHEME,
    SCHEMES,
    SchemeInfo,
    generate_keypair,
    get_signer,
    get_verifier,
)
from payhooks.verify.sorted_fields import sorted_fields_string
from payhooks.verify.timestamps import DEFAULT_TOLERANCE_SECONDS
from payhooks.verify.timezones import MAX_OFFSET_HOURS, zone_from_header, zone_from_text

__all__ = [
    "DEFAULT_SCHEME",
    "DEFAULT_TOLERANCE_SECONDS",
    "MAX_OFFSET_HOURS",
    "SCHEMES",
    "InvalidSignatureError",
    "KeyPair",
    "MalformedSignatureError",
    "MissingSignatureError",
    "NonCanonicalBodyError",
    "SchemeInfo",
    "SignatureError",
    "Signer",
    "TimestampOutOfToleranceError",
    "VerifiedDelivery",
    "Verifier",
    "generate_keypair",
    "get_signer",
    "get_verifier",
    "java_double_to_string",
    "key_fingerprint",
    "sorted_fields_string",
    "zone_from_header",
    "zone_from_text",
]
