"""The fs tools that work on one file or directory: read, write, edit and list.

The methods are registered as tools as they stand, so their docstrings are the tool descriptions the model reads
and their ``Annotated`` parameters become the input schema. Each returns its result model as structured content
and a readable rendering of it (see `servers.fs._text`) as text. They are synchronous: MCPServer runs sync tools
in a worker thread, which keeps the blocking file I/O off the event loop.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, BinaryIO

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from servers.fs._models import DeleteResult, EditResult, Entry, ListResult, ReadResult, WriteResult
from servers.fs._paths import Roots, shorten
from servers.fs._text import render_delete, render_edit, render_list, render_read, render_write, to_call_result

__all__ = [
    "BINARY_SNIFF_BYTES",
    "LIST_CAP",
    "READ_CAP_BYTES",
    "BeforeChange",
    "FileTools",
    "looks_binary",
    "oserror_message",
]

BeforeChange = Callable[[Path, "bytes | None"], None]
"""Called with a file's resolved path and its current content (None: it does not exist) before any tool changes
it, in the tool's worker thread. If it raises, the change is not made. Loom snapshots files this way for rewind."""

READ_CAP_BYTES = 256 * 1024
"""Most text one read returns; a model context has no room for more, and it can ask for the next range."""

LIST_CAP = 1000
"""Most entries one list returns."""

BINARY_SNIFF_BYTES = 8192
"""How much of a file is checked for NUL bytes to tell binary from text (the heuristic git and grep use)."""

_PIECE_BYTES = 64 * 1024
_COUNT_BLOCK_BYTES = 1024 * 1024


def looks_binary(head: bytes) -> bool:
    """Whether the start of a file looks binary.

    Args:
        head: The first bytes of the file (`BINARY_SNIFF_BYTES` is enough).

    Returns:
        True if the bytes contain a NUL, which text in any common encoding but UTF-16/32 never does.
    """
    return b"\x00" in head


def oserror_message(exc: OSError, shown: str) -> str:
    """Phrase an OS error about a user path as a tool error message.

    Args:
        exc: The error raised by the file system.
        shown: The path as it should appear in the message.

    Returns:
        A one-line message naming the path and the reason.
    """
    return f"{shown}: {exc.strerror or exc}"


class FileTools:
    """Read, write, edit and list, confined to a set of roots.

    Args:
        roots: The directories the tools may touch.
        before_change: Told about every file just before write, edit or delete changes it.
    """

    def __init__(self, roots: Roots, before_change: BeforeChange | None = None) -> None:
        self._roots = roots
        self._before_change = before_change

    def _snapshot(self, target: Path, shown: str, current: bytes | None = None) -> None:
        """Hand the file's current content to ``before_change``; refuse the change if that fails."""
        if self._before_change is None:
            return
        try:
            if current is None and target.is_file():
                current = target.read_bytes()
            self._before_change(target, current)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        except Exception as exc:  # whatever the hook raises, the file must stay as it was
            raise ToolError(f"{shown!r} was not changed: saving its current content for rewind failed: {exc}") from exc

    def read(
        self,
        path: Annotated[str, Field(description="File to read, relative to the primary root or absolute.")],
        start_line: Annotated[int, Field(ge=1, description="First line to return (1-based).")] = 1,
        end_line: Annotated[
            int | None, Field(ge=1, description="Last line to return, inclusive; omit to read to the end.")
        ] = None,
    ) -> Annotated[CallToolResult, ReadResult]:
        """Read a UTF-8 text file, optionally a range of lines.

        The first line of the reply names the file and the lines returned, e.g. 'src/app.py (lines 1-80 of 80)';
        the raw text follows with its original line endings and no line-number prefixes, so it can be copied into
        `edit` exactly. At most 256 KiB are returned per call; when the range is larger, the result is cut at a line
        boundary and the first line says which start_line to ask for next. Binary files are refused.
        """
        target = self._existing_file(path)
        if end_line is not None and end_line < start_line:
            raise ToolError(f"end_line ({end_line}) is before start_line ({start_line}); pass end_line >= start_line")
        shown = self._roots.display(target)
        try:
            with target.open("rb") as handle:
                if looks_binary(handle.read(BINARY_SNIFF_BYTES)):
                    raise ToolError(
                        f"{shown!r} looks like a binary file (it contains NUL bytes); read only returns text"
                    )
                handle.seek(0)
                chunk, total_lines, cut = _read_lines(handle, start_line, end_line)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc

        if start_line > max(total_lines, 1):
            raise ToolError(f"start_line {start_line} is past the end of {shown!r}, which has {total_lines} lines")
        text, lossy = _decode(chunk)
        last_line = start_line + chunk.count(b"\n") - 1
        if chunk and not chunk.endswith(b"\n"):
            # The final line of the file has no newline, or a single over-long line was cut.
            last_line += 1
        notes: list[str] = []
        if cut:
            notes.append(
                f"output capped at {READ_CAP_BYTES} bytes; returned lines {start_line}-{last_line} of "
                f"{total_lines}; call read again with start_line={last_line + 1} for more"
                if chunk.endswith(b"\n")
                else f"line {last_line} alone exceeds {READ_CAP_BYTES} bytes and was cut; use grep to find what "
                f"you need in it"
            )
        if lossy:
            notes.append("the file is not valid UTF-8; undecodable bytes are shown as U+FFFD")
        result = ReadResult(
            path=shown,
            start_line=start_line,
            end_line=last_line,
            total_lines=total_lines,
            text=text,
            truncated=cut,
            note="; ".join(notes) or None,
        )
        return to_call_result(result, render_read(result))

    def write(
        self,
        path: Annotated[str, Field(description="File to write, relative to the primary root or absolute.")],
        content: Annotated[str, Field(description="The complete new content of the file.")],
    ) -> Annotated[CallToolResult, WriteResult]:
        """Create or overwrite a file with the given content (UTF-8), creating missing parent directories.

        This replaces the whole file; to change part of an existing file use `edit`.
        """
        target = self._roots.resolve(path)
        shown = self._roots.display(target)
        if target.is_dir():
            raise ToolError(f"{shown!r} is a directory; pass the path of a file inside it")
        data = _encode(content, "content")
        created = not target.exists()
        self._snapshot(target, shown)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        result = WriteResult(path=shown, bytes_written=len(data), created=created)
        return to_call_result(result, render_write(result))

    def edit(
        self,
        path: Annotated[str, Field(description="File to edit, relative to the primary root or absolute.")],
        old: Annotated[str, Field(description="Exact text to replace, including whitespace and indentation.")],
        new: Annotated[str, Field(description="Text to put in its place.")],
        replace_all: Annotated[
            bool, Field(description="Replace every occurrence; otherwise old must occur exactly once.")
        ] = False,
    ) -> Annotated[CallToolResult, EditResult]:
        """Replace an exact string in a UTF-8 text file.

        `old` must match the file byte for byte (read the file first and copy the text). Unless replace_all is
        true, it must occur exactly once; add surrounding lines to make it unique.
        """
        target = self._existing_file(path)
        shown = self._roots.display(target)
        if not old:
            raise ToolError("old is empty; pass the exact text to replace (use write to create or overwrite a file)")
        if old == new:
            raise ToolError("old and new are identical, so the edit would change nothing")
        try:
            data = target.read_bytes()
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        if looks_binary(data[:BINARY_SNIFF_BYTES]):
            raise ToolError(f"{shown!r} looks like a binary file (it contains NUL bytes); edit only changes text")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Replacing undecodable bytes with U+FFFD and writing back would silently corrupt the file.
            raise ToolError(f"{shown!r} is not valid UTF-8 ({exc.reason}); edit only changes UTF-8 text") from exc

        count = text.count(old)
        if count == 0:
            hint = ""
            if "\r\n" in text and "\n" in old and "\r\n" not in old:
                hint = " The file uses CRLF (\\r\\n) line endings; include the \\r in old."
            raise ToolError(
                f"old text not found in {shown!r}; read the file and copy the exact text, including whitespace "
                f"and indentation.{hint}"
            )
        if count > 1 and not replace_all:
            raise ToolError(
                f"old text matches {count} times in {shown!r}; include more surrounding lines to make it unique, "
                f"or pass replace_all=true to replace all {count}"
            )
        first_line = text.count("\n", 0, text.index(old)) + 1
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        encoded = _encode(updated, "new")
        self._snapshot(target, shown, data)
        try:
            target.write_bytes(encoded)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        result = EditResult(
            path=shown, replacements=count if replace_all else 1, first_line=first_line, bytes_written=len(encoded)
        )
        return to_call_result(result, render_edit(result))

    def delete(
        self,
        path: Annotated[str, Field(description="File to delete, relative to the primary root or absolute.")],
    ) -> Annotated[CallToolResult, DeleteResult]:
        """Delete one file (not a directory). Loom keeps its content, so a rewind can bring it back."""
        target = self._existing_file(path)
        shown = self._roots.display(target)
        self._snapshot(target, shown)
        try:
            size = target.stat().st_size
            target.unlink()
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        result = DeleteResult(path=shown, bytes_deleted=size)
        return to_call_result(result, render_delete(result))

    def list_dir(
        self,
        path: Annotated[str, Field(description="Directory to list, relative to the primary root or absolute.")] = ".",
    ) -> Annotated[CallToolResult, ListResult]:
        """List the entries of one directory (not recursive), sorted by name, with their type and size.

        Symlinks are reported as such and not followed. Use `glob` to search recursively.
        """
        target = self._roots.resolve(path)
        shown = self._roots.display(target)
        if not target.exists():
            raise ToolError(f"directory {shown!r} does not exist")
        if not target.is_dir():
            raise ToolError(f"{shown!r} is a file, not a directory; use read to see its content")
        try:
            with os.scandir(target) as scan:
                found = sorted(scan, key=lambda entry: entry.name)
            entries = [_entry(item) for item in found[:LIST_CAP]]
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        result = ListResult(path=shown, entries=entries, total_entries=len(found), truncated=len(found) > LIST_CAP)
        return to_call_result(result, render_list(result))

    def _existing_file(self, path: str) -> Path:
        target = self._roots.resolve(path)
        if not target.exists():
            raise ToolError(f"file {shorten(self._roots.display(target))} does not exist")
        if target.is_dir():
            raise ToolError(f"{self._roots.display(target)!r} is a directory; use list or glob to see its content")
        return target


def _entry(item: os.DirEntry[str]) -> Entry:
    if item.is_symlink():
        return Entry(name=item.name, type="symlink", size=None)
    if item.is_dir(follow_symlinks=False):
        return Entry(name=item.name, type="dir", size=None)
    if item.is_file(follow_symlinks=False):
        return Entry(name=item.name, type="file", size=item.stat(follow_symlinks=False).st_size)
    return Entry(name=item.name, type="other", size=None)


def _read_lines(handle: BinaryIO, start_line: int, end_line: int | None) -> tuple[bytes, int, bool]:
    """Collect lines start_line..end_line (capped at READ_CAP_BYTES) and count every line in the file.

    Reads in bounded pieces rather than whole lines so a multi-gigabyte single-line file cannot exhaust memory.

    Returns:
        The collected bytes, the file's total line count, and whether the range was cut by the cap.
    """
    collected = bytearray()
    cut = False
    line = 1
    ended_with_newline = True
    while not cut and (piece := handle.readline(_PIECE_BYTES)):
        if line >= start_line and (end_line is None or line <= end_line):
            collected += piece
            if len(collected) > READ_CAP_BYTES:
                cut = True
        ended_with_newline = piece.endswith(b"\n")
        if ended_with_newline:
            line += 1
    if cut:
        del collected[READ_CAP_BYTES:]
        boundary = collected.rfind(b"\n")
        if boundary >= 0:
            # Prefer whole lines, so the model can continue exactly at the next start_line.
            del collected[boundary + 1 :]
        # The rest of the file only needs counting, which block reads do far faster than readline.
        while block := handle.read(_COUNT_BLOCK_BYTES):
            line += block.count(b"\n")
            ended_with_newline = block.endswith(b"\n")
    total_lines = line - 1 if ended_with_newline else line
    return bytes(collected), total_lines, cut


def _encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Only lone surrogates get here; JSON can carry them, but no UTF-8 file can hold them.
        raise ToolError(f"{what} contains characters that cannot be encoded as UTF-8 ({exc.reason})") from exc


def _decode(data: bytes) -> tuple[str, bool]:
    """Decode UTF-8, replacing bad bytes; an incomplete character at a cut end is dropped, not replaced."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(data, final=False)
        return text, "\ufffd" in text
