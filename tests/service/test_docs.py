"""docs/service.md is the manual of payhooks.service: its reference lists are checked against
the code here (its examples are run by tests/system/test_docs.py, which walks every page)."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

from payhooks.service.errors import ServiceError
from payhooks.service.sandbox import SandboxSettings

#: The package as a module object, to list what it exports.
service_package = importlib.import_module("payhooks.service")
DOC = Path(__file__).resolve().parents[2] / "docs" / "service.md"


def test_the_manual_has_python_examples() -> None:
    # tests/system/test_docs.py walks every page of docs/ and runs them.
    text = DOC.read_text(encoding="utf-8")
    assert len(re.findall(r"(?m)^```python$", text)) >= 3


def _error_classes() -> list[type[ServiceError]]:
    return [
        value
        for value in vars(service_package).values()
        if isinstance(value, type) and issubclass(value, ServiceError)
    ]


@pytest.mark.parametrize("error", _error_classes(), ids=lambda error: error.__name__)
def test_every_error_and_its_code_is_documented(error: type[ServiceError]) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f"`{error.__name__}`" in text
    assert f"`{error.code}`" in text


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(SandboxSettings)])
def test_every_sandbox_setting_is_documented(name: str) -> None:
    assert f"`{name}`" in DOC.read_text(encoding="utf-8")
