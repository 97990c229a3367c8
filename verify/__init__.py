"""Webhook signature schemes: verify deliveries, sign bodies, make keys. No Flask, no storage."""

from __future__ import annotations

__all__: list[str] = []
