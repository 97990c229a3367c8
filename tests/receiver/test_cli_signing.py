"""``payhooks keygen``, ``sign`` and ``verify``: keys, headers for curl, offline checks."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from payhooks.receiver.cli.signing import DEFAULT_SIGNING_KEY_FILE
from payhooks.verify import SCHEMES, generate_keypair, get_signer, get_verifier, key_fingerprint
from tests.support.app import TEST_SECRET
from tests.support.cli import clean_env, notification, run
from tests.support.notifications import NOTIFICATION

__all__ = ["clean_env"]

pytestmark = pytest.mark.usefixtures("clean_env")


def _env_lines(text: str) -> dict[str, str]:
    """An environment file's values as a shell reads them (quotes removed)."""
    pairs = [line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")]
    return {name: " ".join(shlex.split(value)) for name, value in pairs}


@pytest.fixture
def body(tmp_path: Path) -> Path:
    path = tmp_path / "body.json"
    path.write_bytes(notification())
    return path


PUBLIC_KEY_SCHEMES = sorted(name for name, scheme in SCHEMES.items() if scheme.key_kind != "secret")
SECRET_SCHEMES = sorted(name for name, scheme in SCHEMES.items() if scheme.key_kind == "secret")


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_keygen_prints_keys_under_the_settings_that_take_them(scheme: str, clean_env: Path) -> None:
    """For a public-key scheme, standard output is the receiver's settings and the sender's
    private key is in a file of its own (a deliberate change: it used to be one output)."""
    result = run(["keygen", "--scheme", scheme])

    assert result.exit_code == 0, result.output
    settings = _env_lines(result.stdout)
    assert settings["PAYHOOKS_SIGNATURE_SCHEME"] == scheme
    if SCHEMES[scheme].key_kind == "secret":
        assert set(settings) == {"PAYHOOKS_SIGNATURE_SCHEME", "PAYHOOKS_SECRETS"}
        signing, verifying = settings["PAYHOOKS_SECRETS"], settings["PAYHOOKS_SECRETS"]
        assert not (clean_env / DEFAULT_SIGNING_KEY_FILE).exists()
    else:
        assert set(settings) == {"PAYHOOKS_SIGNATURE_SCHEME", "PAYHOOKS_PUBLIC_KEYS"}
        sender = _env_lines((clean_env / DEFAULT_SIGNING_KEY_FILE).read_text())
        assert set(sender) == {"PAYHOOKS_SIGNATURE_SCHEME", "PAYHOOKS_SIGNING_KEY"}
        assert sender["PAYHOOKS_SIGNATURE_SCHEME"] == scheme
        signing, verifying = sender["PAYHOOKS_SIGNING_KEY"], settings["PAYHOOKS_PUBLIC_KEYS"]
    headers = get_signer(scheme, signing).sign(NOTIFICATION)
    assert get_verifier(scheme, verifying).is_valid(headers, NOTIFICATION)
    fingerprint = key_fingerprint(scheme, verifying)
    assert f"# Its fingerprint (how the console names it): {fingerprint}\n" in result.stdout


@pytest.mark.parametrize("scheme", PUBLIC_KEY_SCHEMES)
def test_keygen_never_prints_a_private_key_and_keeps_it_readable_by_its_owner_only(
    scheme: str, tmp_path: Path
) -> None:
    key_file = tmp_path / "sender" / "signing.env"
    key_file.parent.mkdir()

    result = run(["keygen", "--scheme", scheme, "--signing-key-file", str(key_file)])

    assert result.exit_code == 0, result.output
    signing_key = _env_lines(key_file.read_text())["PAYHOOKS_SIGNING_KEY"]
    assert signing_key not in result.output
    assert "PAYHOOKS_SIGNING_KEY" not in result.stdout
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert str(key_file) in result.stderr


@pytest.mark.parametrize("scheme", PUBLIC_KEY_SCHEMES)
def test_keygen_never_overwrites_a_signing_key_file_and_prints_nothing(
    scheme: str, clean_env: Path
) -> None:
    existing = clean_env / DEFAULT_SIGNING_KEY_FILE
    existing.write_text("PAYHOOKS_SIGNING_KEY=the-key-in-use\n")

    result = run(["keygen", "--scheme", scheme])

    assert result.exit_code == 1
    assert result.stdout == ""
    assert "already exists" in result.stderr
    assert existing.read_text() == "PAYHOOKS_SIGNING_KEY=the-key-in-use\n"


@pytest.mark.parametrize("scheme", SECRET_SCHEMES)
def test_keygen_signing_key_file_for_a_shared_secret_scheme_is_bad_usage(
    scheme: str, tmp_path: Path
) -> None:
    key_file = tmp_path / "signing.env"

    result = run(["keygen", "--scheme", scheme, "--signing-key-file", str(key_file)])

    assert result.exit_code == 2
    assert "--signing-key-file is for the public-key schemes" in result.stderr
    assert not key_file.exists()


def test_keygen_makes_a_new_key_each_time() -> None:
    first, second = run(["keygen"]), run(["keygen"])

    assert (
        _env_lines(first.stdout)["PAYHOOKS_SECRETS"]
        != _env_lines(second.stdout)["PAYHOOKS_SECRETS"]
    )


def test_keygen_with_an_unknown_scheme_is_bad_usage() -> None:
    result = run(["keygen", "--scheme", "md5"])

    assert result.exit_code == 2
    assert "'md5' is not one of" in result.stderr


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_signed_headers_verify_offline(scheme: str, body: Path, tmp_path: Path) -> None:
    pair = generate_keypair(scheme)
    headers = tmp_path / "headers.txt"

    signed = run(
        ["sign", str(body), "--scheme", scheme], env={"PAYHOOKS_SIGNING_KEY": pair.signing_key}
    )
    headers.write_text(signed.stdout)
    checked = run(
        [
            "verify",
            str(body),
            "--headers",
            str(headers),
            "--scheme",
            scheme,
            "--secret",
            pair.verifying_key,
        ]
    )

    assert signed.exit_code == 0, signed.output
    assert signed.stdout.startswith("Content-Type: application/json\n")
    assert pair.signing_key not in signed.output
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.startswith(f"Valid: scheme {scheme}")


def test_sign_reads_the_secret_from_payhooks_secrets(body: Path) -> None:
    secret = generate_keypair("standard-webhooks").signing_key

    result = run(["sign", str(body), "--webhook-id", "msg_1"], env={"PAYHOOKS_SECRETS": secret})

    headers = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert result.exit_code == 0, result.output
    assert headers["webhook-id"] == "msg_1"
    assert (
        get_verifier("standard-webhooks", secret).verify(headers, body.read_bytes()).webhook_id
        == "msg_1"
    )


@pytest.mark.parametrize("scheme", ["standard-webhooks", "standard-webhooks-ed25519"])
def test_sign_without_a_key_is_bad_usage_and_says_where_to_put_one(scheme: str, body: Path) -> None:
    result = run(["sign", str(body), "--scheme", scheme])

    assert result.exit_code == 2
    assert "No signing key: pass --secret or set $PAYHOOKS_SIGNING_KEY" in result.stderr
    assert "Traceback" not in result.output


def test_sign_with_a_key_of_the_wrong_kind_fails_without_echoing_it(body: Path) -> None:
    key = generate_keypair("standard-webhooks-ed25519").verifying_key  # a public key cannot sign

    result = run(["sign", str(body), "--scheme", "standard-webhooks-ed25519", "--secret", key])

    assert result.exit_code == 2
    assert "cannot be used with standard-webhooks-ed25519" in result.stderr
    assert key not in result.output


def test_sign_of_a_missing_file_is_bad_usage(tmp_path: Path) -> None:
    result = run(["sign", str(tmp_path / "nope.json"), "--secret", "whsec_AAAA"])

    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_verify_reads_headers_as_curl_dump_writes_them(body: Path, tmp_path: Path) -> None:
    secret = generate_keypair("standard-webhooks").signing_key
    signed = get_signer("standard-webhooks", secret).sign(body.read_bytes(), webhook_id="msg_7")
    dump = tmp_path / "dump.txt"
    dump.write_text(
        "HTTP/1.1 200 OK\r\n"
        + "".join(f"{name.title()}: {value}\r\n" for name, value in signed.items())
        + "\r\n"
    )

    result = run(["verify", str(body), "--headers", str(dump)], env={"PAYHOOKS_SECRETS": secret})

    assert result.exit_code == 0, result.output
    assert "webhook-id msg_7" in result.stdout


def test_verify_reads_headers_as_a_json_object(body: Path, tmp_path: Path) -> None:
    secret = generate_keypair("hmac-sha256").signing_key
    headers = tmp_path / "headers.json"
    headers.write_text(json.dumps(get_signer("hmac-sha256", secret).sign(body.read_bytes())))

    result = run(
        [
            "verify",
            str(body),
            "--headers",
            str(headers),
            "--scheme",
            "hmac-sha256",
            "--secret",
            secret,
        ]
    )

    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        (lambda headers: {**headers, "webhook-signature": "v1,AAAA"}, "invalid_signature"),
        (
            lambda headers: {k: v for k, v in headers.items() if k != "webhook-signature"},
            "missing_signature",
        ),
        (lambda headers: {**headers, "webhook-signature": "nonsense"}, "malformed_signature"),
        (None, "timestamp_out_of_tolerance"),
    ],
)
def test_verify_says_why_a_delivery_fails_with_its_code(
    body: Path, tmp_path: Path, tamper, code: str
) -> None:
    secret = generate_keypair("standard-webhooks").signing_key
    headers = tmp_path / "headers.json"
    signer = get_signer("standard-webhooks", secret)
    if tamper is None:  # signed an hour ago: the signature holds, the time does not
        signed = signer.sign(body.read_bytes(), timestamp=time.time() - 3600)
    else:
        signed = tamper(signer.sign(body.read_bytes()))
    headers.write_text(json.dumps(signed))

    result = run(["verify", str(body), "--headers", str(headers), "--secret", secret])

    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: Not valid: {code}: ")
    assert secret not in result.output


def test_verify_of_an_old_capture_passes_with_ignore_timestamp(body: Path, tmp_path: Path) -> None:
    secret = generate_keypair("standard-webhooks").signing_key
    old = get_signer("standard-webhooks", secret).sign(
        body.read_bytes(), timestamp=time.time() - 86400
    )
    headers = tmp_path / "headers.json"
    headers.write_text(json.dumps(old))
    args = ["verify", str(body), "--headers", str(headers), "--secret", secret]

    assert run(args).exit_code == 1
    assert run([*args, "--ignore-timestamp"]).exit_code == 0


def test_verify_accepts_any_of_several_secrets_while_rotating(body: Path, tmp_path: Path) -> None:
    old, new = (generate_keypair("standard-webhooks").signing_key for _ in range(2))
    headers = tmp_path / "headers.json"
    headers.write_text(json.dumps(get_signer("standard-webhooks", old).sign(body.read_bytes())))

    by_options = run(
        ["verify", str(body), "--headers", str(headers), "--secret", new, "--secret", old]
    )
    by_env = run(
        ["verify", str(body), "--headers", str(headers)], env={"PAYHOOKS_SECRETS": f"{new} {old}"}
    )

    assert (by_options.exit_code, by_env.exit_code) == (0, 0)


def test_verify_without_a_key_is_bad_usage(body: Path, tmp_path: Path) -> None:
    headers = tmp_path / "headers.txt"
    headers.write_text("webhook-id: x\n")

    result = run(["verify", str(body), "--headers", str(headers), "--scheme", "sorted-fields-rsa"])

    assert result.exit_code == 2
    assert "No key to verify with: pass --secret or set PAYHOOKS_PUBLIC_KEYS" in result.stderr


def test_verify_with_a_headers_file_that_is_not_headers_names_the_line(
    body: Path, tmp_path: Path
) -> None:
    headers = tmp_path / "headers.txt"
    headers.write_text("webhook-id: msg_1\nthis is not a header\n")

    secret = "whsec_" + "A" * 44  # 32 bytes: a secret long enough to be one
    result = run(["verify", str(body), "--headers", str(headers), "--secret", secret])

    assert result.exit_code == 1
    assert "line 2 is not a 'Name: value' header" in result.stderr


def test_verify_with_an_unreadable_headers_file_is_bad_usage(body: Path, tmp_path: Path) -> None:
    result = run(["verify", str(body), "--headers", str(tmp_path / "missing.txt"), "--secret", "x"])

    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_scheme_from_the_environment_is_checked(body: Path) -> None:
    result = run(["sign", str(body), "--secret", "s"], env={"PAYHOOKS_SIGNATURE_SCHEME": "rot13"})

    assert result.exit_code == 2
    assert "PAYHOOKS_SIGNATURE_SCHEME 'rot13' is not a known scheme" in result.stderr


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_verify_with_a_deeply_nested_json_headers_file_fails_in_one_sentence(
    body: Path, tmp_path: Path, depth: int
) -> None:
    headers = tmp_path / "headers.json"
    headers.write_text('{"a":' * depth + "1" + "}" * depth)

    result = run(["verify", str(body), "--headers", str(headers), "--secret", TEST_SECRET])

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"Error: {headers}: ")


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["verify", "{body}", "--headers", "{headers}", "--secret", "{secret}"], {}),
        (["verify", "{body}", "--headers", "{headers}"], {"PAYHOOKS_SECRETS": "{secret}"}),
        (["sign", "{body}", "--secret", "{secret}"], {"PAYHOOKS_SIGNATURE_SCHEME": "hmac-sha256"}),
    ],
    ids=["verify --secret", "verify with configured keys", "sign"],
)
def test_a_bad_signature_option_is_blamed_on_the_options_never_the_key(
    body: Path, tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    headers = tmp_path / "headers.json"
    headers.write_text('{"webhook-id": "msg_1"}')
    secret = TEST_SECRET
    values = {"body": str(body), "headers": str(headers), "secret": secret}
    options = '{"hash_algorithm": "sha1"}'

    result = run(
        [arg.format(**values) for arg in args],
        env={
            "PAYHOOKS_SIGNATURE_OPTIONS": options,
            **{name: value.format(**values) for name, value in env.items()},
        },
    )

    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        "Error: The configuration cannot be used: PAYHOOKS_SIGNATURE_OPTIONS: hash_algorithm: "
    )
    assert "PAYHOOKS_SECRETS" not in result.stderr
    assert "key cannot be used" not in result.stderr


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_a_keys_file_with_two_keys_sourced_by_bash_verifies_with_both(
    scheme: str, clean_env: Path, body: Path
) -> None:
    """The rotation guide's keys.env: keygen's file with the new key added inside the quotes,
    before the old one. Loaded the README's way, both keys verify."""
    setting = "PAYHOOKS_SECRETS" if SCHEMES[scheme].key_kind == "secret" else "PAYHOOKS_PUBLIC_KEYS"
    pairs = []
    for name in ("old", "new"):
        key_file = clean_env / f"{name}-signing.env"
        result = run(
            ["keygen", "--scheme", scheme, "--output", f"{name}.env"]
            + ([] if setting == "PAYHOOKS_SECRETS" else ["--signing-key-file", str(key_file)])
        )
        assert result.exit_code == 0, result.output
        receiver = (clean_env / f"{name}.env").read_text()
        sender = receiver if setting == "PAYHOOKS_SECRETS" else key_file.read_text()
        signing_key = _env_lines(sender).get("PAYHOOKS_SIGNING_KEY") or _env_lines(sender)[setting]
        pairs.append((receiver, _env_lines(receiver)[setting], signing_key))
    (old_file, old_key, old_signing), (_, new_key, new_signing) = pairs
    assert old_file.count(old_key) == 1
    (clean_env / "keys.env").write_text(old_file.replace(old_key, f"{new_key} {old_key}"))
    for name, signing_key in (("old", old_signing), ("new", new_signing)):
        headers = get_signer(scheme, signing_key).sign(body.read_bytes())
        (clean_env / f"{name}-headers.json").write_text(json.dumps(dict(headers)))

    payhooks = Path(sys.executable).parent / "payhooks"
    script = (
        "set -euo pipefail\n"
        "set -a; . ./keys.env; set +a\n"
        f"{payhooks} verify body.json --headers old-headers.json\n"
        f"{payhooks} verify body.json --headers new-headers.json\n"
    )
    checked = subprocess.run(
        ["bash", "-c", script], cwd=clean_env, capture_output=True, text=True, check=False
    )

    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.count("Valid") == 2, checked.stdout


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_keygen_output_writes_the_receivers_settings_readable_by_its_owner_only(
    scheme: str, clean_env: Path
) -> None:
    result = run(["keygen", "--scheme", scheme, "--output", "keys.env"])

    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    written = clean_env / "keys.env"
    assert written.stat().st_mode & 0o777 == 0o600
    assert _env_lines(written.read_text())["PAYHOOKS_SIGNATURE_SCHEME"] == scheme
    assert "keys.env" in result.stderr


def test_keygen_output_never_overwrites_a_file(clean_env: Path) -> None:
    existing = clean_env / "keys.env"
    existing.write_text("PAYHOOKS_SECRETS='the-key-in-use'\n")

    result = run(["keygen", "--output", "keys.env"])

    assert result.exit_code == 1
    assert "already exists" in result.stderr
    assert existing.read_text() == "PAYHOOKS_SECRETS='the-key-in-use'\n"
