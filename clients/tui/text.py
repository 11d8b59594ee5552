"""Short forms of what the conversation shows: a tool call's arguments, its result, the watermark gauge."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

__all__ = ["elapsed", "gauge", "one_line", "short_arguments", "short_result", "token_count"]

ARGUMENTS_CHARS = 60
RESULT_LINES = 3
RESULT_CHARS = 240


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)] + "…"


def short_arguments(arguments: dict[str, Any] | str, limit: int = ARGUMENTS_CHARS) -> str:
    """A call's arguments as ``key=value`` pairs on one line (a JSON text still streaming is shown as it is)."""
    if isinstance(arguments, str):
        return one_line(arguments, limit)
    parts = []
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={one_line(shown, 40)}")
    return one_line(" ".join(parts), limit)


def short_result(content: str) -> str:
    """The first lines of a tool result, cut, with a count of what was left out."""
    lines = content.strip().splitlines()
    head = [one_line(line, RESULT_CHARS // RESULT_LINES) for line in lines[:RESULT_LINES]]
    if len(lines) > RESULT_LINES:
        head.append(f"… {len(lines) - RESULT_LINES} more lines")
    return "\n".join(head)


def gauge(ratio: float | None, threshold: float, width: int = 10) -> Text:
    """The context watermark as a bar: green, yellow past half the threshold, red past the threshold."""
    if ratio is None:
        return Text("ctx " + "·" * width + "  -- ", style="dim")
    filled = min(width, round(ratio * width))
    style = "red" if ratio >= threshold else "yellow" if ratio >= threshold / 2 else "green"
    bar = Text("ctx ")
    bar.append("█" * filled, style=style)
    bar.append("·" * (width - filled), style="dim")
    bar.append(f" {ratio:4.0%}", style=style)
    return bar


def elapsed(seconds: float) -> str:
    """A duration as a clock: ``0:07``, ``12:34``, ``1:02:03``."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def token_count(tokens: int) -> str:
    """A token count in few characters: ``950``, ``12.3k``, ``4.1M``."""
    if tokens < 1000:
        return str(tokens)
    if tokens < 1_000_000:
        return f"{tokens / 1000:.1f}k".replace(".0k", "k") if tokens < 100_000 else f"{tokens // 1000}k"
    return f"{tokens / 1_000_000:.1f}M"
