"""The extension: config defaults and checks, options, several apps per process, the demo app."""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from flask import Flask
from flask.cli import ScriptInfo
from hypothesis import given
from hypothesis import strategies as st

from payhooks.receiver import PayHooks, receiver_state
from payhooks.receiver.config import (
    CONFIG_DEFAULTS,
    config_from_env,
    config_keys,
    split_key_setting,
)
from payhooks.receiver.demo import DEMO_SIGNING_KEY, create_app
from payhooks.receiver.ledgers import LedgerPool
from payhooks.storage import DEFAULT_STATUS_MAP, Ledger
from payhooks.verify import SCHEMES, generate_keypair, get_signer
from tests.support.app import TEST_SECRET, BodyFactory, SignFunction
from tests.support.live_server import LiveServer

NOTIFY = "/payhooks/notifications"


def _bare_app(tmp_path: Path, **config: Any) -> Flask:
    app = Flask("bare", instance_path=str(tmp_path / "instance"))
    app.config.update(config)
    return app


def test_init_app_registers_itself_and_keeps_no_app(tmp_path: Path) -> None:
    extension = PayHooks()
    app = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET)

    extension.init_app(app)

    assert app.extensions["payhooks"] is extension
    assert not hasattr(extension, "app")
    assert "payhooks" in app.blueprints
    assert "payhooks" in app.cli.commands


@pytest.mark.parametrize("key", [key for key in CONFIG_DEFAULTS if key != "PAYHOOKS_DATABASE"])
def test_every_config_key_gets_its_default(tmp_path: Path, key: str) -> None:
    app = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET)

    PayHooks(app)

    expected = TEST_SECRET if key == "PAYHOOKS_SECRETS" else CONFIG_DEFAULTS[key]
    assert app.config[key] == expected


def test_the_documented_defaults(tmp_path: Path) -> None:
    app = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET)

    PayHooks(app)

    assert app.config["PAYHOOKS_SIGNATURE_SCHEME"] == "standard-webhooks"
    assert app.config["PAYHOOKS_TOLERANCE_SECONDS"] == 300
    assert app.config["PAYHOOKS_MAX_BODY_BYTES"] == 65536
    assert app.config["PAYHOOKS_PAYMENT_TIME_ZONE"] == "UTC"
    assert app.config["PAYHOOKS_URL_PREFIX"] == "/payhooks"
    assert app.config["PAYHOOKS_STATUS_MAP"] == dict(DEFAULT_STATUS_MAP)


def test_the_database_defaults_to_the_instance_folder_which_is_created(tmp_path: Path) -> None:
    app = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET)

    PayHooks(app)

    assert app.config["PAYHOOKS_DATABASE"] == str(tmp_path / "instance" / "payhooks.db")
    assert (tmp_path / "instance").is_dir()


@pytest.mark.parametrize("folder", ["missing", "missing/deeper", "a-file"])
def test_a_ledger_in_a_folder_that_is_not_there_fails_at_start_naming_the_key(
    tmp_path: Path, folder: str
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    database = tmp_path / folder / "payhooks.db"
    app = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET, PAYHOOKS_DATABASE=str(database))

    with pytest.raises(ValueError, match="PAYHOOKS_DATABASE") as exc_info:
        PayHooks(app)

    assert str(database.parent) in str(exc_info.value)
    assert "payhooks" not in app.extensions
    assert not database.parent.is_dir()  # refused, not created


def test_an_app_a_flask_command_builds_needs_no_keys_and_refuses_notifications(
    tmp_path: Path,
) -> None:
    # What `flask --app shop payhooks reconcile` does: the flask command builds the app.
    command = click.Context(click.Command("payhooks"), info_name="payhooks", obj=ScriptInfo())
    with command:
        app = _bare_app(tmp_path, PAYHOOKS_DATABASE=str(tmp_path / "ledger.db"))
        PayHooks(app)

    response = app.test_client().post(NOTIFY, data=b"{}")

    assert response.status_code == 503
    assert response.json is not None
    assert response.json["error"]["code"] == "processing_error"
    with app.app_context():
        assert PayHooks().ledger.state("order-1") is None  # the ledger reads fine


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_each_scheme_refuses_to_start_without_its_keys_naming_the_key(
    tmp_path: Path, scheme: str
) -> None:
    key = {"secret": "PAYHOOKS_SECRETS", "public_key": "PAYHOOKS_PUBLIC_KEYS"}[
        SCHEMES[scheme].key_kind
    ]
    app = _bare_app(tmp_path, PAYHOOKS_SIGNATURE_SCHEME=scheme)

    with pytest.raises(ValueError, match=key):
        PayHooks(app)
    assert "payhooks" not in app.extensions


@pytest.mark.parametrize("keys", ["", "   ", []])
def test_empty_keys_count_as_none(tmp_path: Path, keys: Any) -> None:
    with pytest.raises(ValueError, match="PAYHOOKS_SECRETS"):
        PayHooks(_bare_app(tmp_path, PAYHOOKS_SECRETS=keys))


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"PAYHOOKS_SIGNATURE_SCHEME": "rot13"}, "PAYHOOKS_SIGNATURE_SCHEME"),
        ({"PAYHOOKS_PAYMENT_TIME_ZONE": "Mars/Olympus"}, "PAYHOOKS_PAYMENT_TIME_ZONE"),
        ({"PAYHOOKS_MAX_BODY_BYTES": 0}, "PAYHOOKS_MAX_BODY_BYTES"),
        ({"PAYHOOKS_TOLERANCE_SECONDS": "300"}, "PAYHOOKS_TOLERANCE_SECONDS"),
        ({"PAYHOOKS_URL_PREFIX": "hooks"}, "PAYHOOKS_URL_PREFIX"),
        ({"PAYHOOKS_STATUS_MAP": {"PS": "great"}}, "PAYHOOKS_STATUS_MAP"),
        ({"PAYHOOKS_SECRETS": "not-a-whsec-secret!"}, "PAYHOOKS_SECRETS"),
        ({"PAYHOOKS_BUSY_TIMEOUT_MS": -1}, "PAYHOOKS_BUSY_TIMEOUT_MS must be a positive"),
        ({"PAYHOOKS_SIGNALS_LEASE_SECONDS": 0}, "PAYHOOKS_SIGNALS_LEASE_SECONDS must be an"),
        ({"PAYHOOKS_SIGNALS_LEASE_SECONDS": 86_401}, "from 1 to 86400, got 86401"),
        ({"PAYHOOKS_SIGNALS_LEASE_SECONDS": 0.5}, "PAYHOOKS_SIGNALS_LEASE_SECONDS"),
        ({"PAYHOOKS_SIGNALS_LEASE_SECONDS": True}, "PAYHOOKS_SIGNALS_LEASE_SECONDS"),
        ({"PAYHOOKS_SIGNATURE_OPTIONS": {"bogus": 1}}, "PAYHOOKS_SIGNATURE_OPTIONS"),
    ],
)
def test_bad_configuration_fails_at_start_naming_the_key(
    tmp_path: Path, config: dict[str, Any], named: str
) -> None:
    app = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET)
    app.config.update(config)

    with pytest.raises(ValueError, match=named):
        PayHooks(app)


def test_an_error_about_keys_never_shows_the_key(tmp_path: Path) -> None:
    bad = "whsec_!!definitely-not-base64!!"

    with pytest.raises(ValueError, match="PAYHOOKS_SECRETS") as exc_info:
        PayHooks(_bare_app(tmp_path, PAYHOOKS_SECRETS=bad))

    assert "definitely-not-base64" not in str(exc_info.value)


def test_several_secrets_in_a_config_list_all_verify(
    tmp_path: Path, make_body: BodyFactory
) -> None:
    old, new = generate_keypair("standard-webhooks"), generate_keypair("standard-webhooks")
    app = _bare_app(tmp_path, PAYHOOKS_SECRETS=[old.verifying_key, new.verifying_key])
    PayHooks(app)
    client = app.test_client()

    for pair, transaction in ((old, "ll-old"), (new, "ll-new")):
        body = make_body("wallet", transaction_id=transaction)
        headers = get_signer("standard-webhooks", pair.signing_key).sign(body)
        assert client.post(NOTIFY, data=body, headers=headers).status_code == 200


@pytest.mark.parametrize(
    ("signing_key", "status"),
    [
        ("correct horse battery staple, said twice", 200),
        ("correct horse battery staple,", 401),
        ("battery staple, said twice", 401),
        ("correct horse battery", 401),
    ],
)
def test_one_secret_string_in_the_config_is_one_key_spaces_and_all(
    tmp_path: Path, make_body: BodyFactory, signing_key: str, status: int
) -> None:
    app = _bare_app(
        tmp_path,
        PAYHOOKS_SIGNATURE_SCHEME="hmac-sha256",
        PAYHOOKS_SECRETS="correct horse battery staple, said twice",
    )
    PayHooks(app)
    body = make_body("wallet")
    headers = get_signer("hmac-sha256", signing_key).sign(body)

    response = app.test_client().post(NOTIFY, data=body, headers=headers)

    assert response.status_code == status
    verifier = receiver_state(app).verifier
    assert verifier is not None
    assert verifier.is_valid(headers, body) is (status == 200)


@pytest.mark.parametrize(
    ("scheme", "weak"),
    [
        ("standard-webhooks", "whsec_AA=="),
        ("hmac-sha256", "pa55word"),
        ("sorted-fields-hmac", "s3cr3t"),
    ],
)
def test_a_secret_too_short_to_be_one_fails_init_app_naming_the_setting(
    tmp_path: Path, scheme: str, weak: str
) -> None:
    app = _bare_app(tmp_path, PAYHOOKS_SIGNATURE_SCHEME=scheme, PAYHOOKS_SECRETS=[weak])

    with pytest.raises(ValueError, match=r"^PAYHOOKS_SECRETS: keys\[0\]: .*too short") as exc_info:
        PayHooks(app)
    assert weak.removeprefix("whsec_") not in str(exc_info.value)


def test_options_are_defaults_that_the_app_config_overrides(tmp_path: Path) -> None:
    extension = PayHooks(secrets=[TEST_SECRET], url_prefix="/hooks", max_body_bytes=1000)
    plain = _bare_app(tmp_path)
    custom = _bare_app(tmp_path, PAYHOOKS_URL_PREFIX="/elsewhere")

    extension.init_app(plain)
    extension.init_app(custom)

    assert plain.config["PAYHOOKS_URL_PREFIX"] == "/hooks"
    assert plain.config["PAYHOOKS_MAX_BODY_BYTES"] == 1000
    assert custom.config["PAYHOOKS_URL_PREFIX"] == "/elsewhere"
    assert [rule.rule for rule in custom.url_map.iter_rules("payhooks.notifications")] == [
        "/elsewhere/notifications"
    ]


def test_an_unknown_option_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="secret_key"):
        PayHooks(secret_key="x")


def test_two_apps_in_one_process_keep_to_their_own_database(
    tmp_path: Path, make_body: BodyFactory, sign: SignFunction
) -> None:
    first_db, second_db = tmp_path / "first.db", tmp_path / "second.db"
    extension = PayHooks()
    first = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET, PAYHOOKS_DATABASE=str(first_db))
    second = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET, PAYHOOKS_DATABASE=str(second_db))
    extension.init_app(first)
    extension.init_app(second)
    for path in (first_db, second_db):
        with Ledger(path) as ledger:
            ledger.expect_transaction("order-1", 2500, "CNY")

    body = make_body("wallet")
    response = first.test_client().post(NOTIFY, data=body, headers=sign(body))

    assert response.get_json()["reconciliation"] == "paid"
    with Ledger(first_db) as ledger:
        assert ledger.state("order-1") == "paid"
    with Ledger(second_db) as ledger:
        assert ledger.state("order-1") == "pending"
    with first.app_context():
        assert extension.ledger.state("order-1") == "paid"
    with second.app_context():
        assert extension.ledger.state("order-1") == "pending"


def test_receiver_state_names_the_app_that_lacks_the_extension(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not initialised"):
        receiver_state(_bare_app(tmp_path))


def test_a_ledger_is_kept_per_thread(app: Flask) -> None:
    state = receiver_state(app)
    seen: list[Ledger] = []
    thread = threading.Thread(target=lambda: seen.append(state.ledger))
    thread.start()
    thread.join()

    assert state.ledger is state.ledger
    assert seen[0] is not state.ledger


@given(
    keys=st.lists(
        st.text(alphabet=st.characters(categories=["L", "N", "P", "S"]), min_size=1),
        max_size=5,
    ),
    separators=st.lists(st.sampled_from([" ", "\n", "\t", "  \n"]), min_size=6, max_size=6),
)
def test_an_environment_key_setting_splits_on_any_whitespace(
    keys: list[str], separators: list[str]
) -> None:
    text = "".join(sep + key for sep, key in zip(separators, keys, strict=False))

    assert split_key_setting(text) == tuple(keys)
    assert config_from_env({"PAYHOOKS_SECRETS": text}) == {"PAYHOOKS_SECRETS": tuple(keys)}
    assert config_keys(keys) == tuple(keys)


def test_a_pem_key_in_an_environment_key_setting_stays_whole() -> None:
    pem = "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\nBgkqhkiG\n-----END PUBLIC KEY-----"

    assert split_key_setting(f"{pem}\nMIIBbare") == (pem, "MIIBbare")


@pytest.mark.parametrize(
    ("value", "keys"),
    [
        ("correct horse battery staple", ("correct horse battery staple",)),
        ("  padded  ", ("padded",)),
        (
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
            ("-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",),
        ),
        (["a b", " c "], ("a b", "c")),
        (("x", "", "  "), ("x",)),
        ("", ()),
        (None, ()),
    ],
)
def test_a_config_key_string_is_one_key_and_a_list_one_key_per_item(
    value: Any, keys: tuple[str, ...]
) -> None:
    assert config_keys(value) == keys


def test_a_config_key_list_with_a_non_string_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PAYHOOKS_SECRETS"):
        PayHooks(_bare_app(tmp_path, PAYHOOKS_SECRETS=[TEST_SECRET, b"bytes"]))


def test_config_from_env_reads_each_kind_of_value() -> None:
    config = config_from_env(
        {
            "PAYHOOKS_SECRETS": "whsec_a whsec_b",
            "PAYHOOKS_MAX_BODY_BYTES": "1024",
            "PAYHOOKS_STATUS_MAP": '{"PS": "succeeded"}',
            "PAYHOOKS_RETURN_REDIRECT": "",
            "UNRELATED": "x",
        }
    )

    assert config == {
        "PAYHOOKS_SECRETS": ("whsec_a", "whsec_b"),
        "PAYHOOKS_MAX_BODY_BYTES": 1024,
        "PAYHOOKS_STATUS_MAP": {"PS": "succeeded"},
        "PAYHOOKS_RETURN_REDIRECT": None,
    }


@pytest.mark.parametrize(
    "environ",
    [{"PAYHOOKS_MAX_BODY_BYTES": "lots"}, {"PAYHOOKS_STATUS_MAP": "[1, 2]"}],
)
def test_config_from_env_names_the_variable_it_cannot_read(environ: dict[str, str]) -> None:
    (name,) = environ

    with pytest.raises(ValueError, match=name):
        config_from_env(environ)


def test_the_demo_app_generates_a_dev_key_and_says_so_without_logging_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make_body: BodyFactory
) -> None:
    with caplog.at_level(logging.WARNING, logger="payhooks"):
        app = create_app({"PAYHOOKS_DATABASE": str(tmp_path / "demo.db")}, environ={})

    signing_key = app.config[DEMO_SIGNING_KEY]
    assert "generated a development key" in caplog.text
    assert "PAYHOOKS_SECRETS" in caplog.text
    assert signing_key not in caplog.text
    assert signing_key.removeprefix("whsec_") not in caplog.text
    assert app.secret_key
    body = make_body("wallet")
    headers = get_signer("standard-webhooks", signing_key).sign(body)
    response = app.test_client().post(NOTIFY, data=body, headers=headers)
    assert response.status_code == 200
    assert app.test_client().get("/").get_json()["notifications"].endswith(NOTIFY)


def test_the_demo_app_reads_its_keys_from_the_environment(tmp_path: Path) -> None:
    other = generate_keypair("standard-webhooks").verifying_key
    app = create_app(
        environ={
            "PAYHOOKS_SECRETS": f"{other} {TEST_SECRET}",
            "PAYHOOKS_DATABASE": str(tmp_path / "env.db"),
            "SECRET_KEY": "from-env",
        }
    )

    assert tuple(app.config["PAYHOOKS_SECRETS"]) == (other, TEST_SECRET)
    assert DEMO_SIGNING_KEY not in app.config
    assert app.secret_key == "from-env"
    assert app.config["PAYHOOKS_DATABASE"] == str(tmp_path / "env.db")


@pytest.mark.parametrize("scheme", ["standard-webhooks-ed25519", "sorted-fields-hmac"])
def test_the_demo_app_makes_a_key_for_any_scheme(tmp_path: Path, scheme: str) -> None:
    app = create_app(
        {"PAYHOOKS_DATABASE": str(tmp_path / "demo.db")},
        environ={"PAYHOOKS_SIGNATURE_SCHEME": scheme},
    )

    assert app.config[DEMO_SIGNING_KEY]


def test_a_forked_process_opens_its_own_ledger_and_leaves_the_parents_alone(app: Flask) -> None:
    state = receiver_state(app)
    parent_ledger = state.ledger
    parent_ledger.expect_transaction("order-1", 2500, "CNY")
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() in a process with threads; this child runs no threads.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            child_ledger = state.ledger
            ok = child_ledger is not parent_ledger and child_ledger.state("order-1") == "pending"
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as pipe:
        assert pipe.read() == b"1"
    assert state.ledger is parent_ledger
    assert parent_ledger.state("order-1") == "pending"


def _open_files(path: Path) -> int:
    """How many file descriptors of this process are open on the database ``path`` (and its
    ``-wal`` and ``-shm`` files), read from Linux's ``/proc``.

    SQLite keeps a closed connection's descriptor open while another connection of the same
    process still holds a lock on the file (closing it would drop that lock), so the count
    only falls to zero once no connection to the file is left.
    """
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if os.readlink(fd).startswith(str(path)):
                count += 1
        except OSError:  # closed since the listing
            continue
    return count


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="counts open files through /proc"
)


@pytest.mark.sqlite_only  # reads or locks the SQLite file itself
@needs_proc
def test_each_threads_ledger_is_closed_when_the_thread_ends(app: Flask, database: Path) -> None:
    state = receiver_state(app)
    opened: list[Ledger] = []  # held here, so only an explicit close can release them
    answers: list[object] = []

    def work() -> None:
        ledger = state.ledger
        opened.append(ledger)
        answers.append(ledger.state("order-1"))
        assert _open_files(database) > 0

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert answers == [None] * 8
    assert len({id(ledger) for ledger in opened}) == 8
    assert _open_files(database) == 0


@pytest.mark.sqlite_only  # reads the SQLite file's open descriptors
@needs_proc
def test_a_pool_collected_on_another_thread_still_closes_each_threads_ledger(
    database: Path,
) -> None:
    # A garbage collection runs on whichever thread triggers it: here the pool goes on the
    # main thread while the thread that opened its ledger is still alive, so the ledger must
    # be closable from another thread (Python 3.13 warns of a connection freed unclosed).
    pools = [LedgerPool(database, busy_timeout_ms=1000)]
    opened, done = threading.Event(), threading.Event()

    def work() -> None:
        pools[0].get().state("order-1")
        opened.set()
        done.wait(10)

    thread = threading.Thread(target=work)
    thread.start()
    opened.wait(10)
    try:
        assert _open_files(database) > 0
        pools.clear()
        gc.collect()
        assert _open_files(database) == 0
    finally:
        done.set()
        thread.join()


@needs_proc
def test_a_thread_per_connection_server_leaves_no_connection_open(
    app: Flask,
    database: Path,
    serve: Callable[[Flask], LiveServer],
    make_body: BodyFactory,
    sign: SignFunction,
) -> None:
    server = serve(app)
    bodies = [make_body("wallet", transaction_id=f"ll-{n}") for n in range(6)]

    statuses = [server.post(NOTIFY, body, sign(body)).status for body in bodies]
    # A request thread may still be winding down after its answer was sent: its ledger
    # closes as it ends. Wait for that (the deadline only bounds a failing run).
    deadline = time.monotonic() + 10
    while _open_files(database) and time.monotonic() < deadline:
        time.sleep(0.01)

    assert statuses == [200] * 6
    assert _open_files(database) == 0


def test_closing_the_pool_for_a_thread_closes_its_ledger_and_the_next_get_reopens(
    app: Flask,
) -> None:
    state = receiver_state(app)
    first = state.ledger

    state.ledgers.close()
    second = state.ledger

    assert second is not first
    assert second.state("order-1") is None


@pytest.mark.parametrize(
    "options",
    [{"bogus": 1}, {"hash_algorithm": "sha1"}, {"encoding": "rot13"}],
    ids=repr,
)
def test_a_bad_signature_option_is_blamed_on_the_options_not_the_secrets(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    app = _bare_app(tmp_path, PAYHOOKS_SECRETS=TEST_SECRET, PAYHOOKS_SIGNATURE_OPTIONS=options)

    with pytest.raises(ValueError, match=r"^PAYHOOKS_SIGNATURE_OPTIONS: ") as exc_info:
        PayHooks(app)

    assert "PAYHOOKS_SECRETS" not in str(exc_info.value)


@pytest.mark.parametrize("second", ["same object", "another object"])
def test_a_second_init_app_on_one_app_fails_clearly_and_changes_nothing(
    app: Flask, second: str
) -> None:
    first = app.extensions["payhooks"]
    rules_before = sorted(str(rule) for rule in app.url_map.iter_rules())
    extension = first if second == "same object" else PayHooks()

    with pytest.raises(RuntimeError, match="already initialised on app 'payhooks_test'"):
        extension.init_app(app)

    assert app.extensions["payhooks"] is first
    assert sorted(str(rule) for rule in app.url_map.iter_rules()) == rules_before
    assert app.test_client().post("/payhooks/notifications").status_code == 401
