"""The manual (README.md and docs/*.md) is run here: every example, in order, as a reader would.

How the pages are read and walked, and what the HTML comments above the blocks mean, is in
:mod:`tests.support.docs_walk`. Every walk starts in a fresh temporary folder holding a copy of
``sample_payloads/`` (the reader works in a clone). The README's app is also walked the way a
person runs it: its files written as given, served by each documented command (the development
server and gunicorn), checked out and paid over HTTP. The reference tables are checked against
the code, so a key, an error code, a state or a command cannot be added without documenting
it, wherever in the manual its table lives.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import re
import shlex
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from payhooks.receiver import signals
from payhooks.receiver.config import CONFIG_KEYS
from payhooks.receiver.script import payhooks
from payhooks.receiver.web.errors import ERROR_CODES
from payhooks.storage import DeliveryStatus, Ledger, Outcome, ReconciliationState
from payhooks.verify import SCHEMES, generate_keypair, get_signer, get_verifier
from tests.support.docs_walk import (
    DOCUMENTED_DATABASE_URL,
    DOCUMENTED_PORTS,
    README,
    ROOT,
    Block,
    Walkthrough,
    manual_text,
    page_name,
    pages,
    predecessor,
    printed_names,
    read_blocks,
    server_kind,
    walks,
)
from tests.support.live_server import eventually

FIRST_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[service]' && payhooks demo"
)
SECOND_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
    "--config-settings editable_mode=strict && ruff check . && ruff format --check . && mypy "
    "&& pytest -n auto"
)

#: The README is a first screen; the manual is in docs/.
README_MAX_LINES = 150

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in read_blocks(page)]


def open_walkthrough(folder: Path) -> Walkthrough:
    folder.mkdir()
    shutil.copytree(ROOT / "sample_payloads", folder / "sample_payloads")
    return Walkthrough(
        folder,
        secret=generate_keypair("standard-webhooks").signing_key,
        service_public_key=generate_keypair("sorted-fields-rsa").verifying_key,
    )


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Walkthrough]:
    runner = open_walkthrough(tmp_path / "reader")
    try:
        yield runner
    finally:
        runner.close()


# -- what each walk leaves behind ---------------------------------------------------------------


def _shop_shipped_the_paid_order(reader: Walkthrough) -> None:
    # The README's flask server ran ship() for the order paid from the second terminal.
    assert (reader.folder / "shipments.txt").read_text() == "order-1002\n"


def _shop_wrote_to_postgresql(reader: Walkthrough) -> None:
    # The README's shop, given PAYHOOKS_DATABASE in the environment, kept its ledger there.
    assert reader.database_url is not None
    with Ledger(reader.database_url) as ledger:
        assert ledger.state("order-1002") is ReconciliationState.PAID


def _keygen_wrote_an_environment_file(reader: Walkthrough) -> None:
    folder = reader.folder
    assert "PAYHOOKS_SIGNING_KEY='" in (folder / "payhooks-signing-key.env").read_text()
    # The rotation guide's keys.env last: the new and the old key, quoted as one value.
    (line,) = [
        line
        for line in (folder / "keys.env").read_text().splitlines()
        if line.startswith("PAYHOOKS_SECRETS=")
    ]
    assert re.fullmatch(r"PAYHOOKS_SECRETS='whsec_\S+ whsec_\S+'", line)


def _finance_has_its_reports(reader: Walkthrough) -> None:
    folder = reader.folder
    assert (folder / "reconciliation.csv").read_text().startswith("external_identifier,kind,state,")
    conn = sqlite3.connect(folder / "payhooks.db")
    try:
        states = dict(conn.execute("SELECT external_identifier, state FROM reconciliation"))
    finally:
        conn.close()
    # Registered by `expect`, paid by the replayed order.json (and moved on by the samples).
    assert states["order-1001"] not in ("pending", "unexpected")
    assert states["sub-3001"] == "pending"  # from expected.csv


AFTER_WALK = {
    "README.md": _shop_shipped_the_paid_order,
    "docs/postgresql.md": _shop_wrote_to_postgresql,
    "docs/signatures.md": _keygen_wrote_an_environment_file,
    "docs/reconciliation.md": _finance_has_its_reports,
}


# -- the walks ----------------------------------------------------------------------------------


@pytest.mark.system
@pytest.mark.parametrize(
    "walk", walks(), ids=lambda walk: "+".join(page_name(page) for page in walk)
)
def test_every_example_in_the_docs_runs(
    walk: list[Path], reader: Walkthrough, request: pytest.FixtureRequest
) -> None:
    if any(DOCUMENTED_DATABASE_URL in page.read_text(encoding="utf-8") for page in walk):
        reader.database_url = request.getfixturevalue("postgres_url")
    for page in walk:
        reader.walk(page)
        reader.stop_server()  # the reader closes the page's terminals

    for page in walk:
        check = AFTER_WALK.get(page_name(page))
        if check is not None:
            check(reader)


def _readme_server_blocks() -> list[Block]:
    return [block for block in read_blocks(README) if block.marker == "server"]


def _post(
    port: int, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.system
@pytest.mark.parametrize(
    "server_block",
    _readme_server_blocks(),
    ids=lambda block: block.text.strip().splitlines()[-1].split()[0],
)
def test_every_documented_command_serves_the_readme_app_whole(
    server_block: Block, reader: Walkthrough
) -> None:
    """Issue 13.2: the production command once served an app without the shop's routes and
    signal receivers. Each documented command must serve the app the README's shop.py builds."""
    blocks = read_blocks(README)
    for block in blocks:
        if block.marker == "file":
            assert block.argument
            (reader.folder / block.argument).write_text(block.text, encoding="utf-8")
    (keys,) = [block for block in blocks if block.marker is None and "keygen" in block.text]
    reader.shell(keys)
    environment = {
        name: " ".join(shlex.split(value))  # as the shell reads it: quotes removed
        for name, value in (
            line.split("=", 1)
            for line in (reader.folder / "keys.env").read_text().splitlines()
            if line and not line.startswith("#")
        )
    }

    server = reader.start_server(server_block)
    status, checkout = _post(server.port, "/checkout/order-2001")
    body = json.dumps(
        {
            "ll_transaction_id": "ll_txn_2001",
            "merchant_transaction_id": "order-2001",
            "payment_data": {
                "payment_status": "PS",
                "payment_amount": "199.00",
                "payment_currency_code": "CNY",
                "payment_time": "20261121120000",
            },
        }
    ).encode()
    signer = get_signer(environment["PAYHOOKS_SIGNATURE_SCHEME"], environment["PAYHOOKS_SECRETS"])
    paid_status, paid = _post(server.port, "/payhooks/notifications", body, signer.sign(body))

    assert status == 200
    assert checkout["external_identifier"] == "order-2001"
    assert checkout["return_url"].startswith(server.url("/payhooks/return/order-2001?token="))
    assert paid_status == 200
    assert (paid["status"], paid["reconciliation"]) == ("processed", "paid")
    shipments = reader.folder / "shipments.txt"
    # ship() runs once the answer is out, and appends its line after the file exists.
    assert eventually(lambda: shipments.exists() and shipments.read_text() != "")
    assert shipments.read_text() == "order-2001\n"


# -- the blocks and the pages -------------------------------------------------------------------


def test_every_block_is_run_or_says_why_not() -> None:
    for block in all_blocks():
        where = block.where
        if block.marker == "not-tested":
            assert block.argument, f"{where}: not-tested needs a reason"
        elif block.marker in ("file", "add-to"):
            assert block.argument, f"{where}: {block.marker} needs a file name"
        elif block.marker == "tree":
            assert block.language == "text", f"{where}: a tree is drawn in a ```text block"
        else:
            assert block.language in ("python", "sh", "sql", "json"), (
                f"{where}: a ```{block.language} block is neither run nor marked"
            )
            assert block.marker in (None, "continued", "with-server", "server"), (
                f"{where}: {block.marker}"
            )
        if block.marker == "server":
            assert block.language == "sh", f"{where}: a server is a shell command"


@pytest.mark.parametrize(
    ("text", "needed"),
    [
        ('export PAYHOOKS_SERVICE_URL="$PAYHOOKS_SANDBOX_URL"', {"PAYHOOKS_SANDBOX_URL"}),
        (
            'curl -H "Authorization: Bearer ${PAYHOOKS_SANDBOX_TOKEN}" $HOME',
            {"PAYHOOKS_SANDBOX_TOKEN"},
        ),
        ('KEY=1 payhooks sign "$KEY"', set()),  # the block sets it itself
        ("payhooks expect order-1 2500 CNY", set()),
    ],
)
def test_a_client_block_waits_for_the_names_only_a_server_prints(
    text: str, needed: set[str]
) -> None:
    # A server listens before it prints its export lines: the walk waits for these names.
    assert printed_names(text, {"HOME": "/root"}) == needed


def test_not_tested_blocks_stay_few() -> None:
    skipped = [block.where for block in all_blocks() if block.marker == "not-tested"]

    assert len(skipped) <= 4, skipped


def test_every_page_that_builds_on_another_names_a_page() -> None:
    every = {page.resolve() for page in pages()}

    wrong = [
        page_name(page)
        for page in pages()
        if predecessor(page) is not None and predecessor(page) not in every
    ]

    assert wrong == []


def test_the_first_screen_keeps_its_two_commands_first() -> None:
    first, second = read_blocks(README)[:2]

    assert first.text.strip() == FIRST_COMMAND
    assert second.text.strip() == SECOND_COMMAND
    assert second.line < 25


def test_the_readme_stays_a_first_screen() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()

    assert len(lines) <= README_MAX_LINES


def test_the_readme_links_every_page_of_the_manual() -> None:
    text = README.read_text(encoding="utf-8")

    missing = [page_name(page) for page in pages()[1:] if f"]({page_name(page)})" not in text]

    assert missing == []


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``."""
    found: set[str] = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        anchor, count = slug, 1
        while anchor in found:
            anchor, count = f"{slug}-{count}", count + 1
        found.add(anchor)
    return found


def _prose(page: Path) -> str:
    """``page`` without its fenced blocks."""
    return re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))


def test_every_link_between_pages_resolves() -> None:
    broken = []
    for page in pages():
        for target in _LINK.findall(_prose(page)):
            if re.match(r"[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page_name(page)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{page_name(page)}: {target} (no such heading)")

    assert broken == []


#: Pages for someone working in a clone, where ``sample_payloads/`` is at hand.
CLONE_PAGES = {"docs/development.md", "docs/ARCHITECTURE.md"}


def test_pages_for_users_say_where_sample_payloads_come_from() -> None:
    # The folder is in the source, not in the wheel a user installs.
    unsaid = [
        page_name(page)
        for page in pages()
        if page_name(page) not in CLONE_PAGES
        and "sample_payloads/" in (text := page.read_text(encoding="utf-8"))
        and "not in the installed package" not in text
    ]

    assert unsaid == []


def test_the_quickstart_installs_pytest_before_its_test_step_runs_it() -> None:
    (block,) = [
        block
        for block in read_blocks(ROOT / "docs" / "quickstart.md")
        if block.language == "sh" and "pytest" in block.text
    ]
    lines = block.text.splitlines()
    installs = [n for n, line in enumerate(lines) if re.search(r"pip install .*\bpytest\b", line)]
    runs = [n for n, line in enumerate(lines) if re.search(r"-m pytest|^pytest", line)]

    assert installs, block.text
    assert runs, block.text
    assert installs[0] < runs[0], block.text


def test_source_paths_named_in_the_docs_exist() -> None:
    named = {
        path
        for page in pages()
        for path in re.findall(
            r"`((?:receiver|verify|storage|bench|docs|sample_payloads)/[\w./-]*)`", _prose(page)
        )
    }

    assert sorted(path for path in named if not (ROOT / path).exists()) == []


def _tree_paths(block: Block) -> list[str]:
    """The paths a ``<!-- tree -->`` block draws: one entry a line, two spaces a level."""
    paths: list[str] = []
    parents: list[str] = []
    for line in block.text.splitlines():
        entry = re.match(r"( *)(\S+)", line)
        if entry is None:
            continue
        depth = len(entry.group(1)) // 2
        parents = [*parents[:depth], entry.group(2).rstrip("/")]
        paths.append("/".join(parents))
    return paths


def test_the_code_map_draws_every_package_and_nothing_else() -> None:
    trees = [block for block in all_blocks() if block.marker == "tree"]
    drawn = {path for block in trees for path in _tree_paths(block)}
    packages = {
        init.parent.relative_to(ROOT).as_posix()
        for folder in ("console", "receiver", "verify", "storage")
        for init in (ROOT / folder).rglob("__init__.py")
    }
    test_folders = {
        folder.relative_to(ROOT).as_posix()
        for folder in (ROOT / "tests").iterdir()
        if folder.is_dir() and (folder / "__init__.py").exists()
    }

    assert trees
    assert sorted(path for path in drawn if not (ROOT / path).exists()) == []
    assert sorted((packages | test_folders) - drawn) == []


# -- the reference tables -----------------------------------------------------------------------


def test_each_kind_of_server_has_its_own_port_in_the_docs() -> None:
    """The README's shop, ``payhooks serve`` and the sandbox can run side by side as the docs
    write them: every server block names its kind's port, and no two kinds share one."""
    ports: dict[str, set[str]] = {}
    for block in all_blocks():
        if block.marker == "server":
            named = re.findall(r"(?:--port |--bind [0-9.]+:)([0-9]+)", block.text)
            ports.setdefault(server_kind(block.text), set()).update(named)
    assert ports.keys() == DOCUMENTED_PORTS.keys()
    assert ports == {kind: {str(port)} for kind, port in DOCUMENTED_PORTS.items()}


@pytest.mark.parametrize("page", ["docs/configuration.md", "docs/signatures.md"])
def test_every_signature_option_is_listed_where_options_are_explained(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    options: set[str] = set()
    for scheme in SCHEMES:
        # The registry names a scheme's options in the refusal of one it does not take.
        with pytest.raises(ValueError, match=r"its options: ") as exc_info:
            get_verifier(scheme, generate_keypair(scheme).verifying_key, no_such_option=1)
        listed = str(exc_info.value).split("its options: ", 1)[1].rstrip(")")
        options.update(name for name in listed.split(", ") if name != "none")
    assert "providers" in options
    assert sorted(option for option in options if f"`{option}`" not in text) == []


def test_the_configuration_reference_lists_every_key() -> None:
    text = manual_text()

    missing = [key for key in CONFIG_KEYS if f"| `{key}` |" not in text]

    assert missing == []
    assert "`PAYHOOKS_SIGNING_KEY`" in text


def test_the_error_table_matches_the_receiver() -> None:
    text = manual_text()

    wrong = [
        (code, status)
        for code, status in ERROR_CODES.items()
        if f"| `{code}` | {status} |" not in text
    ]

    assert wrong == []


def test_the_outcome_table_lists_every_field() -> None:
    text = manual_text()

    assert [f.name for f in dataclasses.fields(Outcome) if f"| `{f.name}` |" not in text] == []


def test_the_states_table_lists_every_reconciliation_state() -> None:
    text = manual_text()

    assert [
        state.value for state in ReconciliationState if f"| `{state.value}` |" not in text
    ] == []


def test_the_cli_reference_documents_every_command() -> None:
    text = manual_text()

    assert [
        name
        for name in payhooks.commands
        if not re.search(rf"(?m)^#+ `payhooks {re.escape(name)}`$", text)
    ] == []


def test_the_cli_reference_has_the_exit_codes() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")

    assert [code for code in (0, 1, 2) if f"| `{code}` |" not in text] == []


def test_the_signal_table_lists_every_signal() -> None:
    text = manual_text()

    assert [name for name in signals.__all__ if f"| `{name}` |" not in text] == []


def test_the_delivery_status_table_lists_every_status() -> None:
    text = manual_text()
    heading = re.search(r"(?m)^(#+) Delivery statuses$", text)
    assert heading is not None
    rest = text[heading.end() :]
    following = re.search(rf"(?m)^#{{1,{len(heading.group(1))}}} ", rest)
    section = rest[: following.start()] if following else rest

    missing = [status.value for status in DeliveryStatus if f"| `{status}` |" not in section]

    assert missing == []
