"""Alternating rounds, per-round ratios, median and spread: how every bench here compares.

The machine these benches run on is small and shared (2 CPUs, other test suites beside), so
its speed drifts by tens of percent within a minute. Timing one contender after the other lets
that drift land on one of them and pass for a difference between them. So each bench runs its
contenders in rounds, every contender once per round with the order rotated from round to
round (none is always first, when a cache is cold, or last); compares them *within* each round,
where they met the same machine; and reports the median of those per-round ratios with their
spread (the lowest and highest), which says how far to trust the median.

``bench.hostile`` interleaves even finer, request by request inside each round (in the
rotated :func:`order`), and takes its ratios from here too.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Ratios", "alternate", "at_least", "order", "ratios"]


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for a count of rounds, requests or workers: an integer of at least
    ``minimum``, else a usage error (zero rounds would leave no ratio to take a median of, and
    end in a traceback after the whole setup)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value

    return parse


def order(names: Sequence[str], round_index: int) -> list[str]:
    """``names`` rotated by ``round_index``: the order the contenders run in that round."""
    shift = round_index % len(names) if names else 0
    return [*names[shift:], *names[:shift]]


def alternate(
    names: Sequence[str], rounds: int, measure: Callable[[str, int], float]
) -> dict[str, list[float]]:
    """Call ``measure(name, round_index)`` for every contender in every round, in the rotated
    :func:`order`, and return each contender's figures by round (index ``i`` is round ``i``
    for all of them, so they can be divided round by round)."""
    figures: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        for name in order(names, round_index):
            figures[name].append(measure(name, round_index))
    return figures


@dataclass(frozen=True)
class Ratios:
    """One comparison's per-round ratios; printed as the median with its spread."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def text(self, style: str = "x") -> str:
        """``1.52x (spread 1.40x-1.61x over 7 rounds)``; ``style="%"`` for shares."""

        def show(value: float) -> str:
            return f"{value:.0%}" if style == "%" else f"{value:.2f}x"

        rounds = len(self.values)
        return (
            f"{show(self.median)} (spread {show(self.low)}-{show(self.high)} over {rounds} "
            f"round{'s' if rounds != 1 else ''})"
        )


def ratios(figures: Mapping[str, Sequence[float]], numerator: str, denominator: str) -> Ratios:
    """``figures[numerator][i] / figures[denominator][i]`` for every round ``i``."""
    return Ratios(
        tuple(
            top / bottom
            for top, bottom in zip(figures[numerator], figures[denominator], strict=True)
        )
    )
