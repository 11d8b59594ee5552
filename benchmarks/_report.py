"""Figures, their targets, and the table the benchmark prints.

Every benchmark reports a RATIO of two things measured in the same run: on a shared, noisy machine
absolute times drift by tens of percent between runs, while a ratio of interleaved measurements
mostly does not.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Figure:
    """One benchmark's result."""

    key: str
    """Short stable name (used in the JSON output)."""
    title: str
    measured: str
    """What was compared, in words and absolute numbers, for the table."""
    ratio: float
    target: float | None
    """The ratio must not exceed this; None for figures reported for information only."""
    ratio_range: tuple[float, float] | None = None
    """Lowest and highest ratio over the repetitions, when there were several."""
    notes: list[str] = field(default_factory=list[str])
    data: dict[str, Any] = field(default_factory=dict[str, Any])
    """Raw numbers for ``--json``."""
    miss_reason: str | None = None
    """Set when the benchmark could not produce its figure as asked (a time cap reached, runs not finished):
    the figure is a MISS whatever its ratio, and the reason is printed with its notes."""

    @property
    def status(self) -> str:
        """``PASS``, ``MISS`` or ``info``."""
        if self.miss_reason is not None:
            return "MISS"
        if self.target is None:
            return "info"
        return "PASS" if self.ratio <= self.target else "MISS"

    def as_json(self) -> dict[str, Any]:
        """The figure as plain JSON data."""
        return {
            "key": self.key,
            "title": self.title,
            "measured": self.measured,
            "ratio": round(self.ratio, 4),
            "ratio_range": [round(r, 4) for r in self.ratio_range] if self.ratio_range else None,
            "target": self.target,
            "status": self.status,
            "notes": self.notes,
            "miss_reason": self.miss_reason,
            "data": self.data,
        }


def median(values: Sequence[float]) -> float:
    """The median; raises on an empty sequence, which would be a bug in a benchmark."""
    if not values:
        raise ValueError("median of no values")
    return statistics.median(values)


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> tuple[float, tuple[float, float]]:
    """The median of the per-repetition ratios, and their min and max.

    Each repetition measures both sides back to back, so a burst of load on the machine tends to hit
    both; the median then discards the repetitions where it did not.
    """
    ratios = [n / d for n, d in zip(numerators, denominators, strict=True)]
    return median(ratios), (min(ratios), max(ratios))


def fmt_time(seconds: float) -> str:
    """A duration with a unit that keeps three significant figures readable."""
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e9:.0f} ns"


def fmt_ratio(ratio: float) -> str:
    """``3.21×``; large ratios without decimals."""
    if math.isinf(ratio):
        return "∞"
    return f"{ratio:,.0f}×" if ratio >= 100 else f"{ratio:.2f}×"


def render(figures: Sequence[Figure]) -> str:
    """The figures as a plain-text table, followed by their notes."""
    rows = [("#", "benchmark", "measured", "ratio", "range", "target", "result")]
    for n, fig in enumerate(figures, 1):
        spread = f"{fmt_ratio(fig.ratio_range[0])}–{fmt_ratio(fig.ratio_range[1])}" if fig.ratio_range else ""
        target = f"≤ {fig.target:g}×" if fig.target is not None else "-"
        rows.append((str(n), fig.title, fig.measured, fmt_ratio(fig.ratio), spread, target, fig.status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for n, fig in enumerate(figures, 1):
        lines.extend(f"[{n}] {note}" for note in fig.notes)
        if fig.miss_reason is not None:
            lines.append(f"[{n}] MISS: {fig.miss_reason}")
    return "\n".join(lines)
