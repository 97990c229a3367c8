"""``payhooks sign``, ``verify`` and ``keygen``: signatures by hand, offline.

``sign`` prints the headers for a body as ``Name: value`` lines, which is what curl's
``-H @FILE`` reads and what ``verify --headers`` reads back, so a delivery can be built, sent
and checked with nothing but curl. Keys come from ``--secret`` or the environment, never
needing to appear in the shell's history; nothing here prints a key except ``keygen``, whose
whole job is to make one, and which prints a private key nowhere: a public-key scheme's signing
key goes to a file of its own, readable by its owner only.

The signers and verifiers of ``sign``, ``verify`` and ``replay`` are built here
(:func:`signer_for`, :func:`verifier_for`), from the options, else the settings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from payhooks.receiver.cli.common import SIGNING_KEY_ENV, BadUsage, settings
from payhooks.receiver.config import KEY_CONFIG
from payhooks.verify import (
    DEFAULT_SCHEME,
    SCHEMES,
    SignatureError,
    Signer,
    Verifier,
    generate_keypair,
    get_signer,
    get_verifier,
    key_fingerprint,
)

__all__ = [
    "DEFAULT_SIGNING_KEY_FILE",
    "HeadersFileError",
    "keygen",
    "read_headers",
    "resolve_scheme",
    "scheme_option",
    "sign",
    "signer_for",
    "verifier_for",
    "verify_command",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_BODY = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise click.ClickException(f"{path} cannot be read: {err.strerror}.") from err


# The options a *signer* accepts; PAYHOOKS_SIGNATURE_OPTIONS is the verifier's, which has a
# few more (check_timestamp, time_zone, providers) that mean nothing to a sender.
_SIGNER_OPTIONS = frozenset(
    {"hash_algorithm", "header_name", "encoding", "max_body_bytes", "max_depth", "max_members"}
)


def scheme_option(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``--scheme NAME``: one of the registered signature schemes."""
    return click.option(
        "--scheme",
        type=click.Choice(sorted(SCHEMES)),
        default=None,
        help=(
            "The signature scheme. Default: the app's or $PAYHOOKS_SIGNATURE_SCHEME, "
            f"else {DEFAULT_SCHEME}."
        ),
    )(function)


def resolve_scheme(scheme: str | None) -> str:
    """``--scheme``, else the configured ``PAYHOOKS_SIGNATURE_SCHEME``, else the default."""
    return scheme or settings().scheme


def _scheme_options(scheme: str) -> dict[str, Any]:
    """The configured verifier options, when they are for this scheme (``--scheme`` may name
    another one than the settings do)."""
    configured = settings()
    return dict(configured.signature_options) if configured.scheme == scheme else {}


def signer_for(scheme: str, secret: str | None) -> Signer:
    """A signer for ``scheme`` with ``--secret``, else ``$PAYHOOKS_SIGNING_KEY``, else (HMAC
    schemes) the first of the configured ``PAYHOOKS_SECRETS``.

    :raises click.UsageError: no key anywhere (exit 2).
    :raises click.ClickException: a key the scheme cannot use; the key is never echoed.
    """
    key = secret or os.environ.get(SIGNING_KEY_ENV)
    configured = settings()
    if (
        not key
        and SCHEMES[scheme].key_kind == "secret"
        and configured.key_config == KEY_CONFIG["secret"]
    ):
        key = configured.keys[0] if configured.keys else None
    if not key:
        where = (
            f"${SIGNING_KEY_ENV} or $PAYHOOKS_SECRETS"
            if SCHEMES[scheme].key_kind == "secret"
            else f"${SIGNING_KEY_ENV} (the private key; `payhooks keygen --scheme {scheme}`)"
        )
        raise click.UsageError(f"No signing key: pass --secret or set {where}.")
    options = {
        name: value for name, value in _scheme_options(scheme).items() if name in _SIGNER_OPTIONS
    }
    try:
        return get_signer(scheme, key, **options)
    except ValueError as err:
        raise _blame(err, f"The signing key cannot be used with {scheme}") from err


def verifier_for(
    scheme: str, secrets: tuple[str, ...], *, tolerance_seconds: float | None
) -> Verifier:
    """A verifier for ``scheme`` with the ``--secret`` keys, else the configured
    ``PAYHOOKS_SECRETS`` or ``PAYHOOKS_PUBLIC_KEYS`` (whichever the scheme takes).

    :raises click.UsageError: no key anywhere (exit 2).
    """
    configured = settings()
    key_config = KEY_CONFIG[SCHEMES[scheme].key_kind]
    keys = secrets or (configured.keys if configured.key_config == key_config else ())
    if not keys:
        raise click.UsageError(f"No key to verify with: pass --secret or set {key_config}.")
    try:
        return get_verifier(
            scheme, keys, tolerance_seconds=tolerance_seconds, **_scheme_options(scheme)
        )
    except ValueError as err:
        raise _blame(err, f"The key cannot be used with {scheme}") from err


def _blame(err: ValueError, key_fault: str) -> click.ClickException:
    """Name what is really at fault when building a signer or verifier fails: the key (the
    schemes' errors about keys start with ``key``/``keys[...]``), else the configured
    ``PAYHOOKS_SIGNATURE_OPTIONS``, as :func:`payhooks.receiver.settings.load_settings` does.
    Either is bad usage (exit 2): nothing was tried."""
    if str(err).startswith("key"):
        return BadUsage(f"{key_fault}: {err}.")
    return BadUsage(f"The configuration cannot be used: PAYHOOKS_SIGNATURE_OPTIONS: {err}.")


@click.command()
@click.argument("file", type=_BODY)
@click.option(
    "--secret",
    metavar="KEY",
    help=(
        f"The signing key. Default: ${SIGNING_KEY_ENV}, else (HMAC schemes) the first of "
        "$PAYHOOKS_SECRETS. Prefer the environment: a key on the command line lands in the "
        "shell's history."
    ),
)
@scheme_option
@click.option("--webhook-id", metavar="ID", help="The message id to sign (default: a fresh one).")
def sign(file: Path, secret: str | None, scheme: str | None, webhook_id: str | None) -> None:
    """Print the headers that sign FILE's bytes, one `Name: value` line each.

    Send them with curl: payhooks sign body.json > headers.txt, then
    curl -H @headers.txt --data-binary @body.json URL.
    """
    chosen = resolve_scheme(scheme)
    signer = signer_for(chosen, secret)
    try:
        headers = signer.sign(_read_bytes(file), webhook_id=webhook_id)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    click.echo("Content-Type: application/json")
    for name, value in headers.items():
        click.echo(f"{name}: {value}")


@click.command("verify")
@click.argument("file", type=_BODY)
@click.option(
    "--headers",
    "headers_file",
    required=True,
    type=_BODY,
    help="The captured headers: a JSON object, or `Name: value` lines as curl -D writes them.",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    metavar="KEY",
    help=(
        "A key to verify with; repeat it to try several (rotation). Default: "
        "$PAYHOOKS_SECRETS or $PAYHOOKS_PUBLIC_KEYS, whichever the scheme takes."
    ),
)
@scheme_option
@click.option(
    "--ignore-timestamp",
    is_flag=True,
    help="Skip the timestamp tolerance (for deliveries captured long ago).",
)
def verify_command(
    file: Path,
    headers_file: Path,
    secrets: tuple[str, ...],
    scheme: str | None,
    ignore_timestamp: bool,
) -> None:
    """Check a captured delivery's signature offline and say why it fails.

    Exit 0 when the signature holds, 1 when it does not (with the error code).
    """
    chosen = resolve_scheme(scheme)
    tolerance = None if ignore_timestamp else settings().tolerance_seconds
    verifier = verifier_for(chosen, secrets, tolerance_seconds=tolerance)
    try:
        headers = read_headers(_read_bytes(headers_file).decode("utf-8", errors="replace"))
    except HeadersFileError as err:
        raise click.ClickException(f"{headers_file}: {err.message}") from err
    try:
        verified = verifier.verify(headers, _read_bytes(file))
    except SignatureError as err:
        hint = (
            " (--ignore-timestamp checks an old capture)"
            if err.code == "timestamp_out_of_tolerance"
            else ""
        )
        raise click.ClickException(f"Not valid: {err.code}: {err.message}{hint}") from err
    details = [f"scheme {verified.scheme}"]
    if verified.webhook_id:
        details.append(f"webhook-id {verified.webhook_id}")
    if verified.timestamp is not None:
        details.append(f"signed at {verified.timestamp.isoformat()}")
    click.echo(f"Valid: {', '.join(details)}.")


#: Where ``keygen`` puts a public-key scheme's private signing key unless told otherwise.
DEFAULT_SIGNING_KEY_FILE = "payhooks-signing-key.env"


def _fingerprint_line(scheme: str, verifying_key: str) -> str:
    """A comment naming the new key as the console's signature evidence names it."""
    return (
        f"# Its fingerprint (how the console names it): {key_fingerprint(scheme, verifying_key)}\n"
    )


@click.command()
@click.option(
    "--scheme",
    type=click.Choice(sorted(SCHEMES)),
    default=DEFAULT_SCHEME,
    show_default=True,
    help="The signature scheme to make keys for.",
)
@click.option(
    "--signing-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=(
        "Public-key schemes: the file for the sender's private signing key, created readable "
        f"by you only and never overwritten. Default: ./{DEFAULT_SIGNING_KEY_FILE}."
    ),
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=(
        "Write the receiver's settings to this file, created readable by you only and never "
        "overwritten, instead of standard output."
    ),
)
def keygen(scheme: str, signing_key_file: Path | None, output: Path | None) -> None:
    """Make a new key for a scheme, printed as the settings that take it.

    Standard output (or --output FILE, mode 600) is an environment file for the receiver:
    NAME='value' lines, quoted so that a shell reads a value whole when a second key is added
    to it while rotating. For the HMAC schemes one shared secret serves both sides
    (PAYHOOKS_SECRETS). For the public-key schemes it has only the receiver's
    PAYHOOKS_PUBLIC_KEYS; the sender's private PAYHOOKS_SIGNING_KEY goes to its own file
    (--signing-key-file), so the receiver's settings never carry a private key.
    """
    pair = generate_keypair(scheme)
    if SCHEMES[scheme].key_kind == "secret":
        if signing_key_file is not None:
            raise click.UsageError(
                f"--signing-key-file is for the public-key schemes; {scheme} has one shared "
                "secret, printed as PAYHOOKS_SECRETS."
            )
        _emit_settings(
            output,
            f"# payhooks keygen --scheme {scheme}\n"
            f"{_setting('PAYHOOKS_SIGNATURE_SCHEME', scheme)}"
            "# The shared secret: the receiver verifies with it and the sender signs with it.\n"
            "# While rotating, list the new and the old one inside the quotes.\n"
            f"{_fingerprint_line(scheme, pair.verifying_key)}"
            f"{_setting('PAYHOOKS_SECRETS', pair.signing_key)}",
        )
        return
    path = signing_key_file or Path(DEFAULT_SIGNING_KEY_FILE)
    receiver = (
        f"# payhooks keygen --scheme {scheme}: the RECEIVER's settings (no secret here).\n"
        f"# The sender's private signing key is in {path}, not here.\n"
        f"{_setting('PAYHOOKS_SIGNATURE_SCHEME', scheme)}"
        "# The receiver's verifying key (while rotating, list the new and the old one inside\n"
        "# the quotes).\n"
        f"{_fingerprint_line(scheme, pair.verifying_key)}"
        f"{_setting('PAYHOOKS_PUBLIC_KEYS', pair.verifying_key)}"
    )
    # The output file is claimed first, so that a refused one leaves no new signing key; the
    # private key is written before any public key is shown: if it cannot be kept, no public
    # key is given out for it.
    claimed = _create_private_file(output) if output is not None else None
    try:
        _write_private_file(
            path,
            f"# payhooks keygen --scheme {scheme}: the SENDER's settings. Keep this file "
            "secret;\n# the receiver never needs it.\n"
            f"{_setting('PAYHOOKS_SIGNATURE_SCHEME', scheme)}"
            f"{_setting(SIGNING_KEY_ENV, pair.signing_key)}",
        )
    except click.ClickException:
        if claimed is not None and output is not None:
            os.close(claimed)
            output.unlink(missing_ok=True)
        raise
    _emit_settings(output, receiver, claimed)
    click.echo(
        f"Wrote the sender's signing key to {path} (readable by you only); "
        f"{'standard output' if output is None else output} has the receiver's settings.",
        err=True,
    )


def _setting(name: str, value: str) -> str:
    """One ``NAME='value'`` line: single quotes, so that a shell (``set -a; . ./keys.env``),
    systemd's ``EnvironmentFile=`` and python-dotenv all read the value whole, spaces between
    keys included, and expand nothing in it. Keys and scheme names hold no quote."""
    if "'" in value or "\n" in value:  # pragma: no cover - generated keys are base64
        raise AssertionError(f"{name} cannot be written in single quotes")
    return f"{name}='{value}'\n"


def _emit_settings(output: Path | None, text: str, claimed: int | None = None) -> None:
    """``text`` to standard output, or to the new private file ``output`` (``claimed``: its
    descriptor, when it was created already)."""
    if output is None:
        click.echo(text, nl=False)
        return
    _fill_private_file(_create_private_file(output) if claimed is None else claimed, output, text)
    click.echo(f"Wrote the receiver's settings to {output} (readable by you only).", err=True)


def _create_private_file(path: Path) -> int:
    """Create ``path`` with mode 600 and return its descriptor; an existing file is never
    replaced (it may hold a key in use)."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise click.ClickException(
            f"{path} already exists, and keygen never overwrites a file that may hold a key "
            "in use: move it away or name a new path."
        ) from None
    except OSError as err:
        raise click.ClickException(f"{path} cannot be created: {err.strerror}.") from err


def _fill_private_file(descriptor: int, path: Path, text: str) -> None:
    """Write ``text`` to the file :func:`_create_private_file` made; nothing is left if the
    write fails."""
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as err:
        path.unlink(missing_ok=True)
        raise click.ClickException(f"{path} cannot be written: {err.strerror}.") from err


def _write_private_file(path: Path, text: str) -> None:
    _fill_private_file(_create_private_file(path), path, text)


class HeadersFileError(ValueError):
    """The text is neither a JSON object of strings nor ``Name: value`` lines; ``message``
    names the line at fault."""

    code = "invalid_headers"

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def read_headers(text: str) -> dict[str, str]:
    """The headers in ``text``, names lower-cased, in the two shapes headers get captured in:
    a JSON object (a log line, a test fixture), or ``Name: value`` lines as ``curl -D`` and
    ``payhooks sign`` write them, where status lines (``HTTP/1.1 200 OK``) and blank lines are
    skipped so that a ``curl -D`` dump is read as is.

    :raises HeadersFileError: naming the first line that is not a header.
    """
    stripped = text.lstrip("\ufeff").strip()
    if stripped.startswith("{"):
        return _from_json(stripped)
    headers: dict[str, str] = {}
    for number, raw in enumerate(stripped.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("HTTP/"):
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or " " in name.strip():
            raise HeadersFileError(
                f"line {number} is not a 'Name: value' header (nor is the file a JSON object)."
            )
        headers[name.strip().lower()] = value.strip()
    if not headers:
        raise HeadersFileError("The headers file holds no header.")
    return headers


def _from_json(text: str) -> dict[str, str]:
    try:
        document = json.loads(text)
    except ValueError as err:
        raise HeadersFileError(f"The headers file is not valid JSON: {err}.") from err
    except RecursionError as err:
        # Nesting deeper than the interpreter's stack: no headers file looks like that.
        raise HeadersFileError(
            "The headers file nests too deeply; it must be a JSON object of names to strings."
        ) from err
    if not isinstance(document, dict) or not all(
        isinstance(value, str) for value in document.values()
    ):
        raise HeadersFileError("The headers file must be a JSON object of names to string values.")
    return {str(name).lower(): value for name, value in document.items()}
