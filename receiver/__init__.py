"""The Flask side of payhooks: payload parsing, the extension and blueprint, the CLI."""

from __future__ import annotations

__all__: list[str] = []
