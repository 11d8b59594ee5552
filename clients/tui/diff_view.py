"""A file change made by a tool call, as a unified diff with coloured ``+`` / ``-`` lines.

What the diff is made from is only what the event log holds: the fs server's ``edit`` carries the exact
old and new text in its arguments and the line it started on in its structured result, so its diff is exact;
``write`` carries the whole new content but not what it replaced, so a new file is shown as all ``+`` lines
and an overwritten one as its new content, said to be only that.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import Static

__all__ = ["DiffView", "FileChange", "file_change", "render_diff"]

SHORT_LINES = 8
"""Diff lines shown while the block is not expanded."""


@dataclass(frozen=True)
class FileChange:
    """What a call did (or is about to do) to one file."""

    path: str
    old: str
    """The text replaced ('' for a new file)."""
    new: str
    first_line: int = 1
    """Where the change starts in the file (1-based), for the hunk headers."""
    whole_file: bool = False
    """``new`` is the whole file."""
    old_known: bool = True
    """False when the call replaced a file whose old content the log does not hold."""


def file_change(tool: str, arguments: dict[str, Any] | str, structured: dict[str, Any] | None) -> FileChange | None:
    """The change a call to ``tool`` makes, if it is a file edit or write (any server named ``…fs``)."""
    if not isinstance(arguments, dict):
        return None
    server, _, name = tool.rpartition("__")
    if not (server == "fs" or server.endswith("fs")) or not isinstance(arguments.get("path"), str):
        return None
    path = arguments["path"]
    if name == "edit" and isinstance(arguments.get("old"), str) and isinstance(arguments.get("new"), str):
        first = structured.get("first_line") if structured else None
        return FileChange(path, arguments["old"], arguments["new"], first if isinstance(first, int) else 1)
    if name == "write" and isinstance(arguments.get("content"), str):
        created = structured.get("created") if structured else None
        return FileChange(path, "", arguments["content"], whole_file=True, old_known=created is not False)
    return None


def diff_lines(change: FileChange) -> list[str]:
    """The unified diff of ``change``, headers included, without line ends."""
    old = change.old.splitlines()
    new = change.new.splitlines()
    start = change.first_line - 1
    before = f"a/{change.path}" if change.old or not change.whole_file else "/dev/null"
    lines = list(difflib.unified_diff(old, new, before, f"b/{change.path}", n=3, lineterm=""))
    return [_renumber(line, start) for line in lines]


def _renumber(line: str, start: int) -> str:
    """Shift a hunk header by where the change starts in the file (difflib counts from the snippet)."""
    if not line.startswith("@@ ") or start == 0:
        return line
    parts = line.split(" ")
    for i in (1, 2):
        sign, rest = parts[i][0], parts[i][1:]
        first, comma, count = rest.partition(",")
        parts[i] = f"{sign}{int(first) + start}{comma}{count}"
    return " ".join(parts)


def render_diff(change: FileChange, limit: int | None = SHORT_LINES) -> Text:
    """The diff coloured (``+`` green, ``-`` red, hunks cyan), cut to ``limit`` lines with a count of the rest."""
    lines = diff_lines(change)
    shown = lines if limit is None else lines[:limit]
    out = Text()
    if not change.old_known:
        out.append(f"overwrote {change.path}; its old content is not in the log — the new content:\n", style="dim")
    for line in shown:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = "dim"
        out.append(line + "\n", style=style)
    if len(shown) < len(lines):
        out.append(f"… {len(lines) - len(shown)} more diff lines", style="dim italic")
    else:
        out.rstrip()
    return out


class DiffView(Static):
    """A file change shown as a unified diff (the whole of it, or its first lines)."""

    def __init__(self, change: FileChange, *, limit: int | None = SHORT_LINES) -> None:
        super().__init__(render_diff(change, limit))
        self.change = change
