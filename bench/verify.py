"""Verifications per second for a 1 KiB body: payhooks vs the ``standardwebhooks`` package
vs the floor.

The floor is the least any HMAC-SHA256 verifier can do: one ``hmac.digest`` over the signed
content and one ``compare_digest``, in the same kind of loop. The verifier is written plainly
rather than fast (docs/decisions/0001-signature-verification.md): the ratios are figures to
watch, not goals.

The three alternate round by round (:mod:`bench.rounds`): in each round each runs for
``--seconds`` of CPU time (the process's, so that time the scheduler gives to other processes
is charged to none of them), the order rotating; the ratios are taken within each round and
the median of them is printed with its spread, the two ratios last.

Run by hand: ``python -m bench.verify [--rounds N] [--seconds S]``. It prints figures and never
fails on them: timings belong to the machine, not to the test suite (which runs it only
briefly, in ``tests/system/test_bench_smoke.py``, to keep it working).
"""

from __future__ import annotations

import argparse
import base64
import hmac
import json
import statistics
import time
from collections.abc import Callable

from standardwebhooks.webhooks import Webhook

from bench.rounds import alternate, at_least, ratios
from payhooks.verify import generate_keypair, get_signer, get_verifier

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


def _seconds_per_call(operation: Callable[[], object], seconds: float) -> float:
    """CPU seconds per call of ``operation``, timed in batches for about ``seconds`` of it.

    The process's CPU time, not the wall clock: on a shared machine the scheduler takes the
    CPU away for whole milliseconds now and then, which the wall clock would charge to
    whichever contender was running, while the work done per call is what is compared.
    """
    batch = 500
    calls = 0
    start = time.process_time()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            operation()
        calls += batch
        now = time.process_time()
        if now >= deadline:
            return (now - start) / calls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=at_least(1), default=15, help="alternating rounds")
    parser.add_argument(
        "--seconds", type=float, default=0.2, help="CPU time per contender and round"
    )
    args = parser.parse_args(argv)

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

    contenders: dict[str, Callable[[], object]] = {
        "payhooks": payhooks,
        "standardwebhooks": reference,
        "floor": floor,
    }
    for operation in contenders.values():  # warm up
        for _ in range(1000):
            operation()
    times = alternate(
        list(contenders),
        args.rounds,
        lambda name, _: _seconds_per_call(contenders[name], args.seconds),
    )
    print(
        f"{SCHEME} verification, {len(body)} byte body; {args.rounds} alternating rounds of "
        f"{args.seconds:g} CPU s per contender"
    )
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"  {name:<17} {1 / median:>12,.0f} verifications/s  ({median * 1e6:6.2f} us each, "
            f"median of rounds; {min(values) * 1e6:.2f}-{max(values) * 1e6:.2f} us)"
        )
    # Time per call over time per call, round by round: how many times dearer the numerator.
    vs_package = ratios(times, "standardwebhooks", "payhooks")
    vs_floor = ratios(times, "payhooks", "floor")
    print(f"  payhooks speed / standardwebhooks speed: {vs_package.text()}")
    print(f"  payhooks time / floor time:              {vs_floor.text()}")


if __name__ == "__main__":
    main()
