"""Every package's face against docs/api.md: growing a face means writing its line.

docs/api.md has a table per package (``## `payhooks.storage```) with one row per public name,
and a table per part of the ledger (``### `ledger.receiver```) with one row per operation.
Each package's ``__all__`` and each part's public attributes must equal their table exactly.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from payhooks.storage import Ledger

API = Path(__file__).resolve().parents[1] / "docs" / "api.md"

_HEADING = re.compile(r"^#{2,3} `([\w.]+)`\s*$")
_ROW = re.compile(r"^\| `(\w+)` \|")


def documented() -> dict[str, list[str]]:
    """Each table's heading and the names in its first column, in order."""
    tables: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in API.read_text().splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = tables.setdefault(heading.group(1), [])
        elif line.startswith("#"):
            current = None
        elif current is not None and (row := _ROW.match(line)):
            current.append(row.group(1))
    return tables


PACKAGES = [
    "payhooks.verify",
    "payhooks.storage",
    "payhooks.storage.reads",
    "payhooks.receiver",
    "payhooks.service",
    "payhooks.console",
]

#: Ledger and the parts composed in it, by their table's heading.
LEDGER_PARTS = ["Ledger", "receiver", "signals", "service", "finance", "console"]


def _console_exists() -> bool:
    return importlib.util.find_spec("payhooks.console") is not None


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_exports_exactly_the_names_its_table_lists(package: str) -> None:
    if package == "payhooks.console" and not _console_exists():
        pytest.skip("payhooks.console is not in this tree yet")
    exported = list(importlib.import_module(package).__all__)
    if package == "payhooks.receiver" and not _console_exists():
        # Until the console has its own package the receiver still exports it.
        exported = [name for name in exported if name not in documented()["payhooks.console"]]
    table = documented()[package]
    assert len(table) == len(set(table)), f"{package}: a name is listed twice"
    assert sorted(exported) == sorted(table)


@pytest.mark.parametrize("package", PACKAGES)
def test_each_listed_name_resolves(package: str) -> None:
    if package == "payhooks.console" and not _console_exists():
        pytest.skip("payhooks.console is not in this tree yet")
    module = importlib.import_module(package)
    assert [name for name in documented()[package] if not hasattr(module, name)] == []


@pytest.mark.parametrize("part", LEDGER_PARTS)
def test_the_ledger_and_each_part_have_exactly_the_operations_their_table_lists(
    part: str, tmp_path: Path
) -> None:
    heading = part if part == "Ledger" else f"ledger.{part}"
    with Ledger(tmp_path / "ledger.db") as ledger:
        found = ledger if part == "Ledger" else getattr(ledger, part)
        public = [name for name in dir(found) if not name.startswith("_")]
    assert sorted(public) == sorted(documented()[heading])


def test_the_faces_stay_within_their_sizes() -> None:
    """The sizes the layout decided: a face that grows past them needs a new decision."""
    tables = documented()
    assert len(tables["payhooks.storage"]) <= 45
    assert len(tables["payhooks.storage.reads"]) <= 25
    assert len(tables["payhooks.receiver"]) <= 20
