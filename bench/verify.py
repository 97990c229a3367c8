"""Verifications per second for a 1 KiB body: payhooks vs the ``standardwebhooks`` package
vs the floor.

The floor is the least any HMAC-SHA256 verifier can do: one ``hmac.digest`` over the signed
content and one ``compare_digest``, in the same kind of loop. Goals: payhooks at least 1.5x
the package, and within 2x of the floor (at least half its rate).

Run by hand: ``python bench/verify.py [--seconds S]``. It prints figures and never fails on
them: timings belong to the machine, not to the test suite (which runs it only briefly, in
``tests/system/test_bench_smoke.py``, to keep it working).
"""

from __future__ import annotations

import argparse
import base64
import hmac
import json
import time
from collections.abc import Callable

from payhooks.verify import generate_keypair, get_signer, get_verifier
from standardwebhooks.webhooks import Webhook

SCHEME = "standard-webhooks"


def _body(size: int = 1024) -> bytes:
    """A JSON notification padded to exactly ``size`` bytes."""
    payload = {
        "ll_transaction_id": "ll-2026112100001",
        "merchant_transaction_id": "order-1",
        "payment_data": {
            "payment_status": "PS",
            "payment_amount": "25.00",
            "payment_currency_code": "CNY",
            "payment_time": "20261121120000",
            "padding": "",
        },
    }
    base = len(json.dumps(payload, separators=(",", ":")))
    payload["payment_data"]["padding"] = "x" * (size - base)  # type: ignore[index]
    body = json.dumps(payload, separators=(",", ":")).encode()
    assert len(body) == size
    return body


def _rate(operation: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``operation``, timed in batches for about ``seconds``."""
    batch = 1000
    for _ in range(batch):  # warm up
        operation()
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            operation()
        calls += batch
        now = time.perf_counter()
        if now >= deadline:
            return calls / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per contender")
    args = parser.parse_args()

    body = _body()
    pair = generate_keypair(SCHEME)
    headers = get_signer(SCHEME, pair.signing_key).sign(body)

    verifier = get_verifier(SCHEME, pair.verifying_key)
    verifier.verify(headers, body)  # must pass before it is worth timing

    package = Webhook(pair.verifying_key)
    package.verify(body, headers, json_parse=False)

    key = base64.b64decode(pair.signing_key.removeprefix("whsec_"))
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = hmac.digest(key, content, "sha256")

    def floor() -> bool:
        return hmac.compare_digest(hmac.digest(key, content, "sha256"), expected)

    def payhooks() -> object:
        return verifier.verify(headers, body)

    def reference() -> object:
        return package.verify(body, headers, json_parse=False)

    rates = {
        "payhooks": _rate(payhooks, args.seconds),
        "standardwebhooks": _rate(reference, args.seconds),
        "floor": _rate(floor, args.seconds),
    }
    print(f"{SCHEME} verification, {len(body)} byte body, {args.seconds:g} s per contender")
    for name, rate in rates.items():
        print(f"  {name:<17} {rate:>12,.0f} verifications/s  ({1e6 / rate:6.2f} us each)")
    vs_package = rates["payhooks"] / rates["standardwebhooks"]
    vs_floor = rates["floor"] / rates["payhooks"]
    print(f"  payhooks / standardwebhooks: {vs_package:.2f}x  (goal >= 1.5x)")
    print(f"  floor / payhooks:            {vs_floor:.2f}x  (goal <= 2x)")


if __name__ == "__main__":
    main()
