"""Servers and models as rows of text a person reads: shared by ``loom servers`` / ``loom models`` and the TUI.

Everything shown here came from an MCP server (its name in a config, its error, its stderr) or from the face, so
each cell is made safe for a terminal first: control and format characters dropped, whitespace collapsed. A
hostile server's stderr must never move the cursor or retitle the window.
"""

from __future__ import annotations

import unicodedata
from typing import Literal

from orchestrator.events import ServerLog, ServerStateChanged
from orchestrator.protocol_servers import ModelInfo, ModelList, ServerInfo, ServerList

__all__ = [
    "ERROR_CELL",
    "FULL_ERROR",
    "MODEL_HEADINGS",
    "SERVER_HEADINGS",
    "listing_note",
    "model_cells",
    "model_rules",
    "plain",
    "server_cells",
    "server_event_line",
    "table",
]

SERVER_HEADINGS = ("NAME", "STATE", "TOOLS", "RESTARTS", "LATENCY", "LAST ERROR")
MODEL_HEADINGS = ("MODEL", "WINDOW", "COMPACTS AT", "LISTED AS", "PROBLEM")
ERROR_CELL = 100
"""A last error longer than this is cut in a table; ``--json`` (and the TUI's detail line) has all of it."""
FULL_ERROR = 1000
"""Where even a failed server's whole error is cut (a stderr tail is at most 600 characters of it)."""


def plain(text: str, limit: int | None = None) -> str:
    """``text`` as one line safe for a terminal, cut to ``limit`` characters (with an ellipsis) if given."""
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char in "\t\n\r\v\f" or category in ("Zs", "Zl", "Zp"):
            kept.append(" ")
        elif not category.startswith("C"):  # control, format, surrogate, private use, unassigned
            kept.append(char)
    flat = " ".join("".join(kept).split())
    if limit is not None and len(flat) > limit:
        return flat[: limit - 1].rstrip() + "…"
    return flat


def server_cells(server: ServerInfo, error_limit: int | None = ERROR_CELL) -> tuple[str, ...]:
    """One server's row under :data:`SERVER_HEADINGS`."""
    latency = "-" if server.latency_ms is None else f"{server.latency_ms:.0f}ms"
    name = plain(server.name) + (" (built-in)" if server.built_in else "")
    state = plain(server.state) + ("" if server.transport == "in-process" else f" ({plain(server.transport)})")
    return (
        name,
        state,
        str(server.tools),
        str(server.restarts),
        latency,
        plain(server.last_error, error_limit) or "-",
    )


def listing_note(listing: ServerList) -> str:
    """One line saying whose states these are: a session's, live, or the configured servers probed afresh."""
    if listing.source == "session":
        return f"live state of session {plain(listing.session_id or '')}'s servers"
    return plain(listing.note) or "the configured servers, probed afresh"


def model_cells(model: ModelInfo) -> tuple[str, ...]:
    """One model's row under :data:`MODEL_HEADINGS` (the default marked with ``*``)."""
    mark = "* " if model.default else "  "
    return (
        mark + plain(model.name),
        f"{model.context_window:,}",
        f"{model.compact_threshold:.0%}",
        ", ".join(plain(s) for s in model.sources) or "-",
        plain(model.problem, ERROR_CELL) or "-",
    )


def model_rules(models: ModelList) -> list[str]:
    """The patterns other models' windows come from, one line each."""
    lines = []
    for rule in models.rules:
        window = f"{rule.context_window:,} tokens" if rule.context_window else "the default window"
        at = f", compacts at {rule.compact_threshold:.0%}" if rule.compact_threshold is not None else ""
        lines.append(f"{plain(rule.pattern)}: {window}{at} ({rule.source})")
    return lines


def table(headings: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Rows under their headings, each column as wide as its widest cell; the last column is not padded."""
    widths = [max(len(cell) for cell in column) for column in zip(headings, *rows, strict=True)]
    lines = []
    for cells in [headings, *rows]:
        padded = [cell.ljust(width) for cell, width in zip(cells[:-1], widths, strict=False)]
        lines.append("  ".join([*padded, cells[-1]]).rstrip())
    return "\n".join(lines) + "\n"


Level = Literal["info", "warning", "error"]
EVENT_TEXT = 500
"""Where a server's reason or log message is cut in a client's line."""
_ERROR_LEVELS = frozenset({"error", "critical", "alert", "emergency"})


def server_event_line(event: ServerStateChanged | ServerLog) -> tuple[str, Level] | None:
    """The line a client shows for a server's state change or log message, with its level; None: nothing to show.

    Not shown: ``starting``, and ``ready`` on a first start (every session's servers do that as it opens); nor
    ``failed``, since each failure is also stored as the ``server_failed`` event every client already shows (older
    clients read only that one), and one failure must not be told twice.
    """
    name = plain(event.server, 100)
    if isinstance(event, ServerLog):
        level: Level = "error" if event.level in _ERROR_LEVELS else "warning"
        logger = f" [{plain(event.logger, 60)}]" if event.logger else ""
        return f"server {name}{logger}: {plain(event.message, EVENT_TEXT)}", level  # the level says its kind
    reason = plain(event.reason, EVENT_TEXT)
    if event.state == "ready" and event.restarts:
        tools = f", {event.tools} tool{'s' if event.tools != 1 else ''}" if event.tools is not None else ""
        return f"server {name} is back (restart {event.restarts}{tools})", "info"
    if event.state == "degraded":
        return f"server {name} is degraded (it answers slowly or with errors): {reason or 'no reason given'}", "warning"
    if event.state == "stopped":
        return f"server {name} stopped" + (f": {reason}" if reason else ""), "info"
    return None
