"""What the worst unauthenticated request costs the receiver, against a typical valid delivery.

For each scheme, the receiver (the app with the extension, in-process through Flask's test
client, the ledger on a file with its default durable commits) gets:

- ``typical``: a new valid notification (a few hundred bytes, signed with the first of two
  configured keys, as during a rotation), processed and stored: what every delivery costs
  (with ``--synchronous NORMAL`` the ledger skips the sync to disk per commit, which makes
  the typical delivery cheaper and the ratios harsher);
- the hostile inputs: the worst we can build within the body cap (``PAYHOOKS_MAX_BODY_BYTES``,
  64 KiB) and the signature header cap (2,048 characters) for that scheme: as many signature
  entries as are tried (each against both keys), one-digit floats (the dearest to write the
  Java way), as many members as are parsed, nesting to the limit, one huge string. None is
  signed, so every one is refused (and kept as a rejection, as the receiver does).

Contenders alternate request by request within each round, in an order rotated from round to
round (:mod:`bench.rounds`), so drift (a warming cache, another process) touches them
alike. Per round, the per-request time of each hostile input is divided by
the typical one; the median of those ratios over the rounds is printed with their spread (the
lowest and highest). Goal: the worst hostile input within 10x of the typical delivery, for every
scheme; that figure is printed last.

Run by hand: ``python -m bench.hostile [--rounds N] [--count N]``. It prints figures and never
fails on them: timings belong to the machine (``tests/system/test_bench_smoke.py`` runs it in a
tiny size, to keep it working).
"""

from __future__ import annotations

import argparse
import base64
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from bench.rounds import Ratios, at_least, order, ratios
from payhooks.receiver import PayHooks
from payhooks.verify import SCHEMES, generate_keypair, get_signer

NOTIFY = "/payhooks/notifications"
BODY_CAP = 65536
HEADER_CAP = 2048
SCHEME_NAMES = sorted(SCHEMES)
#: The providers a sorted-fields-hmac receiver is told (its card and orchestrator forms).
PROVIDERS = ["stripe", "adyen"]
#: Entries tried per Standard Webhooks request (MAX_SIGNATURE_ENTRIES).
ENTRIES = 4

Request = tuple[bytes, dict[str, str]]


def notification(number: int) -> bytes:
    return json.dumps(
        {
            "ll_transaction_id": f"ll-{number}",
            "merchant_transaction_id": f"order-{number}",
            "payment_data": {
                "payment_status": "PS",
                "payment_amount": "25.00",
                "payment_currency_code": "CNY",
                "payment_time": "20261121120000",
                "stripe_payment_intent_id": f"pi_{number}",
                "status": "succeeded",
            },
        }
    ).encode()


def _fill(prefix: bytes, unit: bytes, suffix: bytes, cap: int = BODY_CAP) -> bytes:
    """``prefix`` + as many ``unit`` as fit + ``suffix``, within ``cap`` bytes."""
    count = (cap - len(prefix) - len(suffix)) // len(unit)
    return prefix + unit * count + suffix


def hostile_bodies() -> dict[str, bytes]:
    """The dearest bodies to read within the cap, by what they aim at."""
    members = 255  # with the one added below, the sorted-fields cap: more is refused unparsed
    floats = b"{" + b",".join(b'"%d":4.9e-324' % n for n in range(members)) + b"}"
    floats = floats[:-1] + _fill(b', "f":[', b"1e-300,", b"1]}", BODY_CAP - len(floats) + 1)
    many_keys = b"{" + b",".join(b'"%05d":"v"' % n for n in reversed(range(members))) + b"}"
    many_keys = many_keys[:-1] + _fill(b', "x":"', b"y", b'"}', BODY_CAP - len(many_keys) + 1)
    depth = 32
    nested = (
        b'{"a":' * (depth - 1)
        + _fill(b"[", b'"x",', b'"x"]', BODY_CAP - 6 * depth)
        + b"}" * (depth - 1)
    )
    return {
        "floats": floats,
        "many keys": many_keys,
        "nesting": nested,
        "huge string": _fill(b'{"a":"', b"x", b'"}'),
    }


def hostile_requests(scheme: str, typical: Request) -> dict[str, Request]:
    """Every hostile request for ``scheme``: each body under the largest signature header
    the scheme still reads."""
    _, headers = typical
    forged = dict(headers)
    if scheme.startswith("standard-webhooks"):
        version, size = ("v1a", 64) if scheme.endswith("ed25519") else ("v1", 32)
        entries = [
            f"{version}," + base64.b64encode(bytes([n]) * size).decode() for n in range(ENTRIES)
        ]
        filler = " ".join(["v9,A"] * ((HEADER_CAP - len(" ".join(entries))) // 5))
        forged["webhook-signature"] = " ".join([*entries, filler])[:HEADER_CAP].rstrip()
    elif scheme == "sorted-fields-rsa":
        forged["signature"] = base64.b64encode(bytes(256)).decode()  # an RSA-2048 length
    elif scheme == "sorted-fields-hmac":
        forged["signature"] = "00" * 32
    else:
        forged["X-Signature"] = "00" * 32
    return {name: (body, forged) for name, body in hostile_bodies().items()}


def make_client(
    scheme: str, folder: Path, synchronous: str = "FULL"
) -> tuple[FlaskClient, Callable[[bytes], dict[str, str]]]:
    """The receiver for ``scheme`` with two keys (a rotation), and a signer for the first."""
    pairs = [generate_keypair(scheme), generate_keypair(scheme)]
    key_config = (
        "PAYHOOKS_SECRETS" if SCHEMES[scheme].key_kind == "secret" else "PAYHOOKS_PUBLIC_KEYS"
    )
    options: dict[str, Any] = {"providers": PROVIDERS} if scheme == "sorted-fields-hmac" else {}
    app = Flask(f"hostile-{scheme}", instance_path=str(folder))
    app.config.update(
        PAYHOOKS_SIGNATURE_SCHEME=scheme,
        PAYHOOKS_DATABASE=str(folder / f"{scheme}.db"),
        PAYHOOKS_SIGNATURE_OPTIONS=options,
        PAYHOOKS_SQLITE_SYNCHRONOUS=synchronous,
        **{key_config: [pair.verifying_key for pair in pairs]},
    )
    PayHooks(app)
    signer = get_signer(scheme, pairs[0].signing_key)
    return app.test_client(), signer.sign


def measure(
    scheme: str, rounds: int, count: int, folder: Path, synchronous: str = "FULL"
) -> dict[str, Ratios]:
    """Per round, each hostile input's per-request time over the typical one's."""
    client, sign = make_client(scheme, folder, synchronous)
    numbers = iter(range(1, 10**9))

    def typical() -> Request:
        body = notification(next(numbers))
        return body, sign(body)

    hostile = hostile_requests(scheme, typical())
    for body, headers in hostile.values():  # each must be refused, never stored
        status = client.post(NOTIFY, data=body, headers=headers).status_code
        assert status in (401, 413), (scheme, status)
    assert client.post(NOTIFY, data=(r := typical())[0], headers=r[1]).status_code == 200
    spent: dict[str, list[float]] = {name: [] for name in ["typical", *hostile]}
    for round_index in range(rounds):
        took = dict.fromkeys(spent, 0.0)
        contenders = order(list(spent), round_index)
        for _ in range(count):
            for name in contenders:
                body, headers = typical() if name == "typical" else hostile[name]
                start = time.perf_counter()
                client.post(NOTIFY, data=body, headers=headers)
                took[name] += time.perf_counter() - start
        for name, seconds in took.items():
            spent[name].append(seconds)
    return {name: ratios(spent, name, "typical") for name in hostile}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=at_least(1), default=7, help="rounds (ratios are per round)"
    )
    parser.add_argument(
        "--count", type=at_least(1), default=40, help="requests per contender per round"
    )
    parser.add_argument(
        "--synchronous",
        default="FULL",
        choices=["FULL", "NORMAL"],
        help="the ledger's PAYHOOKS_SQLITE_SYNCHRONOUS: NORMAL makes the typical delivery "
        "cheaper (no sync to disk per commit), so the ratios larger",
    )
    args = parser.parse_args()

    worst: dict[str, tuple[str, Ratios]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for scheme in SCHEME_NAMES:
            measured = measure(scheme, args.rounds, args.count, Path(folder), args.synchronous)
            print(
                f"{scheme} ({args.rounds} rounds x {args.count} requests per contender, "
                f"ledger synchronous={args.synchronous})"
            )
            for name, ratio in measured.items():
                print(f"  {name:<12} {ratio.text()} of typical")
                if scheme not in worst or ratio.median > worst[scheme][1].median:
                    worst[scheme] = (name, ratio)
    print("worst hostile request / typical valid delivery, per scheme (goal <= 10x):")
    for scheme, (name, ratio) in worst.items():
        print(f"  {scheme:<26} {ratio.text()}  ({name})")


if __name__ == "__main__":
    main()
