"""Imports point down: payhooks.service never imports the receiver; its client and the shared
interface rules import no Flask (a merchant's worker can create payments without a web
framework), and the interface rules import no HTTP library either."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[2] / "service"


def _imports(folder: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [(path.name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.append((path.name, node.module))
    assert found, f"no imports found under {folder}"
    return found


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        (SERVICE, ("payhooks.receiver",)),
        (SERVICE / "client", ("flask", "werkzeug", "payhooks.service.sandbox")),
        (SERVICE / "interface", ("flask", "werkzeug", "httpx", "payhooks.service.client")),
        (SERVICE / "sync", ("flask", "werkzeug", "payhooks.service.sandbox")),
    ],
)
def test_a_folder_imports_nothing_above_it(folder: Path, forbidden: tuple[str, ...]) -> None:
    wrong = [
        (module, name)
        for module, name in _imports(folder)
        if any(name == bad or name.startswith(f"{bad}.") for bad in forbidden)
    ]
    assert wrong == []


def test_the_client_loads_no_flask() -> None:
    """Imported for real, in a fresh interpreter: what a merchant's worker pays to create
    payments (the AST test above cannot see what the imported packages import in turn)."""
    code = (
        "import sys, payhooks.service.client, payhooks.service.interface; "
        "loaded = sorted(m for m in ('flask', 'werkzeug') if m in sys.modules); "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
