"""The text the model reads from each fs tool, next to the structured result.

Without this, the MCP SDK fills the text content with an indented JSON dump of the structured result: escaped
newlines in file text, a dozen lines of braces per directory entry, and several times the tokens. Each tool instead
returns `to_call_result`, whose text is rendered here and whose ``structured_content`` is the model unchanged, so
the ``outputSchema`` and what a program reads stay as they were.
"""

from __future__ import annotations

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from servers.fs._models import (
    DeleteResult,
    EditResult,
    Entry,
    GlobResult,
    GrepResult,
    ListResult,
    ReadResult,
    WriteResult,
)

__all__ = [
    "render_edit",
    "render_glob",
    "render_grep",
    "render_list",
    "render_read",
    "render_write",
    "to_call_result",
]


def to_call_result(result: BaseModel, text: str) -> CallToolResult:
    """Pair a structured result with the text rendered for it.

    Args:
        result: The tool's result model; the SDK validates it against the tool's ``outputSchema``.
        text: What the model reads.

    Returns:
        A result whose single text block is ``text`` and whose structured content is ``result`` as JSON.
    """
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=result.model_dump(mode="json")
    )


def render_read(result: ReadResult) -> str:
    """Render a read as a header line followed by the file's text exactly as it is.

    Args:
        result: The read result.

    Returns:
        ``path (lines A-B of N)``, any note after a semicolon, then the raw text on the following lines.
    """
    if result.total_lines == 0:
        header = f"{_path(result.path)} (empty file)"
    elif result.end_line == result.start_line:
        header = f"{_path(result.path)} (line {result.start_line} of {result.total_lines})"
    else:
        header = f"{_path(result.path)} (lines {result.start_line}-{result.end_line} of {result.total_lines})"
    if result.note:
        header = f"{header}; {result.note}"
    # No line-number prefixes: the text must stay copyable into edit byte for byte.
    return f"{header}\n{result.text}" if result.text else header


def render_delete(result: DeleteResult) -> str:
    """Render a delete as one line: ``deleted path (N bytes)``."""
    return f"deleted {result.path} ({result.bytes_deleted} bytes)"


def render_write(result: WriteResult) -> str:
    """Render a write as one line.

    Args:
        result: The write result.

    Returns:
        ``wrote N bytes to path (created)`` or ``(overwritten)``.
    """
    outcome = "created" if result.created else "overwritten"
    return f"wrote {_count(result.bytes_written, 'byte')} to {_path(result.path)} ({outcome})"


def render_edit(result: EditResult) -> str:
    """Render an edit as one line.

    Args:
        result: The edit result.

    Returns:
        ``replaced N occurrence(s) in path (first at line L)``.
    """
    replaced = _count(result.replacements, "occurrence")
    return f"replaced {replaced} in {_path(result.path)} (first at line {result.first_line})"


def render_list(result: ListResult) -> str:
    """Render a directory listing with one entry per line.

    Args:
        result: The listing.

    Returns:
        Directories with a trailing ``/``, files with their size, symlinks marked, then note lines if truncated or
        if names are shown escaped.
    """
    if not result.entries and not result.truncated:
        return f"{_path(result.path)} is empty"
    lines = [_entry(entry) for entry in result.entries]
    if result.truncated:
        left_out = result.total_entries - len(result.entries)
        lines.append(
            f"note: {_count(left_out, 'more entry', 'more entries')} not shown ({result.total_entries} in total); "
            f"use glob with a pattern to narrow"
        )
    if result.note:
        lines.append(f"note: {result.note}")
    return "\n".join(lines)


def render_glob(result: GlobResult) -> str:
    """Render glob matches with one path per line.

    Args:
        result: The glob result.

    Returns:
        The paths, then a note line when incomplete; ``no files match PATTERN under PATH`` when there are none.
    """
    lines = [_path(match) for match in result.matches] or [
        f"no files match {result.pattern} under {_path(result.path)}"
    ]
    if result.note:
        lines.append(f"note: {result.note}")
    return "\n".join(lines)


def render_grep(result: GrepResult) -> str:
    """Render grep matches as ``path:line: text`` lines and a summary.

    Args:
        result: The grep result.

    Returns:
        One line per match, then ``N matches in M files searched`` with any note; ``no matches ...`` when none.
    """
    lines = [f"{_path(match.path)}:{match.line}: {match.text}" for match in result.matches]
    searched = _count(result.files_searched, "file")
    found = _count(len(result.matches), "match", "matches") if result.matches else "no matches"
    summary = f"{found} in {searched} searched"
    if result.note:
        summary = f"{summary}; {result.note}"
    lines.append(summary)
    return "\n".join(lines)


def _entry(entry: Entry) -> str:
    name = _path(entry.name)
    if entry.type == "dir":
        return f"{name}/"
    if entry.type == "file":
        return f"{name}  {entry.size} B"
    if entry.type == "symlink":
        return f"{name} -> symlink"
    return f"{name}  (not a regular file)"


def _path(path: str) -> str:
    # A newline or other control character in a file name would break the one-item-per-line layout.
    return path if path.isprintable() else repr(path)


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"
