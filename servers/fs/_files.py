"""The fs tools that work on one file or directory: read, write, edit, delete and list.

The methods are registered as tools as they stand, so their docstrings are the tool descriptions the model reads
and their ``Annotated`` parameters become the input schema. Each returns its result model as structured content
and a readable rendering of it (see `servers.fs._text`) as text. They are synchronous: MCPServer runs sync tools
in a worker thread, which keeps the blocking file I/O off the event loop.

Every tool opens what it works on through `Roots.open` (beneath the root's descriptor, following no symlink) and
then reads, checks and writes that one descriptor: the content handed to ``before_change``, the hard-link check
(see `servers.fs._links`) and the write all concern the same file, whatever happens to its name meanwhile.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from servers.fs._content import (
    BINARY_SNIFF_BYTES,
    READ_CAP_BYTES,
    decode_lossy,
    encode,
    looks_binary,
    read_all,
    read_lines,
    replace_content,
    replace_text,
)
from servers.fs._links import HardLinks
from servers.fs._models import DeleteResult, EditResult, Entry, ListResult, ReadResult, WriteResult
from servers.fs._names import ESCAPES_NOTE, any_escaped, escape
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

LIST_CAP = 1000
"""Most entries one list returns."""

_SWAPPED = (errno.ELOOP, errno.EXDEV)
"""What opening beneath a root fails with when a symlink appeared in a path after it was checked."""

_OPEN_FLAGS = os.O_NONBLOCK | os.O_NOCTTY  # a FIFO or a terminal planted in the tree must not block or attach


def oserror_message(exc: OSError, shown: str) -> str:
    """Phrase an OS error about a user path as a tool error message.

    Args:
        exc: The error raised by the file system.
        shown: The path as it should appear in the message.

    Returns:
        A one-line message naming the path and the reason.
    """
    if exc.errno in _SWAPPED:
        return (
            f"{shown} changed while it was being opened: a symlink appeared in its path after the path was checked, "
            f"so nothing was opened through it; try again"
        )
    return f"{shown}: {exc.strerror or exc}"


class FileTools:
    """Read, write, edit, delete and list, confined to a set of roots.

    Args:
        roots: The directories the tools may touch.
        before_change: Told about every file just before write, edit or delete changes it.
        links: Which files this server created, shared with the search tools; a fresh record when None.
    """

    def __init__(self, roots: Roots, before_change: BeforeChange | None = None, links: HardLinks | None = None) -> None:
        self._roots = roots
        self._before_change = before_change
        self._links = HardLinks() if links is None else links

    def _snapshot(self, target: Path, shown: str, current: bytes | None) -> None:
        """Hand the file's current content to ``before_change``; refuse the change if that fails."""
        if self._before_change is None:
            return
        try:
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
        target = self._roots.resolve(path)
        shown = self._roots.display(target)
        fd, info = self._open_existing(target, shown, os.O_RDONLY)
        try:
            with open(fd, "rb") as handle:
                if end_line is not None and end_line < start_line:
                    raise ToolError(
                        f"end_line ({end_line}) is before start_line ({start_line}); pass end_line >= start_line"
                    )
                if looks_binary(handle.read(BINARY_SNIFF_BYTES)):
                    raise ToolError(
                        f"{shown!r} looks like a binary file (it contains NUL bytes); read only returns text"
                    )
                handle.seek(0)
                chunk, total_lines, cut = read_lines(handle, start_line, end_line)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc

        if start_line > max(total_lines, 1):
            raise ToolError(f"start_line {start_line} is past the end of {shown!r}, which has {total_lines} lines")
        text, lossy = decode_lossy(chunk)
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
        if linked := self._links.read_note(info):
            notes.append(linked)
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
        data = encode(content, "content")
        # Without a hook nothing needs the old content, so write-only permission is enough, as before.
        flags = os.O_WRONLY if self._before_change is None else os.O_RDWR
        opened = self._try_open(target, shown, flags, "pass the path of a file inside it")
        created = opened is None
        if opened is None:
            self._snapshot(target, shown, None)
            opened = self._create(target, shown)
        fd, info = opened
        try:
            if not created:
                self._links.refuse_write(info, shown)
                if self._before_change is not None:
                    self._snapshot(target, shown, read_all(fd))
            replace_content(fd, data)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        finally:
            os.close(fd)
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
        target = self._roots.resolve(path)
        shown = self._roots.display(target)
        fd, info = self._open_existing(target, shown, os.O_RDWR)
        try:
            if not old:
                raise ToolError(
                    "old is empty; pass the exact text to replace (use write to create or overwrite a file)"
                )
            if old == new:
                raise ToolError("old and new are identical, so the edit would change nothing")
            self._links.refuse_write(info, shown)
            data = read_all(fd)
            updated, count, first_line = replace_text(data, old, new, replace_all, shown)
            encoded = encode(updated, "new")
            self._snapshot(target, shown, data)
            replace_content(fd, encoded)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        finally:
            os.close(fd)
        result = EditResult(
            path=shown, replacements=count if replace_all else 1, first_line=first_line, bytes_written=len(encoded)
        )
        return to_call_result(result, render_edit(result))

    def delete(
        self,
        path: Annotated[str, Field(description="File to delete, relative to the primary root or absolute.")],
    ) -> Annotated[CallToolResult, DeleteResult]:
        """Delete one file (not a directory). Loom keeps its content, so a rewind can bring it back."""
        target = self._roots.resolve(path)
        shown = self._roots.display(target)
        if target in self._roots.all:
            raise ToolError(f"{shown!r} is a directory; use list or glob to see its content")
        # The name is removed from a verified descriptor of its directory, so only a name inside a root can go.
        try:
            parent = self._roots.open(target.parent, os.O_PATH | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError):
            raise ToolError(f"file {shorten(shown)} does not exist") from None
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        name = os.fsencode(target.name)
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{shown!r} is a directory; use list or glob to see its content")
            current = None
            if stat.S_ISREG(info.st_mode) and self._before_change is not None:
                current = _read_same_file(parent, name, info, shown)
            self._snapshot(target, shown, current)
            os.unlink(name, dir_fd=parent)
            self._links.deleted(info)
        except FileNotFoundError:
            raise ToolError(f"file {shorten(shown)} does not exist") from None
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        finally:
            os.close(parent)
        result = DeleteResult(path=shown, bytes_deleted=info.st_size)
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
        try:
            fd = self._roots.open(target, os.O_RDONLY | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError):
            if self._stat(target, shown) is None:
                raise ToolError(f"directory {shown!r} does not exist") from None
            raise ToolError(f"{shown!r} is a file, not a directory; use read to see its content") from None
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        try:
            # scandir on the descriptor: entries are looked up in the directory that was opened, not by path.
            with os.scandir(fd) as scan:
                found = sorted(scan, key=lambda entry: entry.name)
            entries = [_entry(item) for item in found[:LIST_CAP]]
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        finally:
            os.close(fd)
        result = ListResult(
            path=shown,
            entries=entries,
            total_entries=len(found),
            truncated=len(found) > LIST_CAP,
            note=ESCAPES_NOTE if any_escaped(entry.name for entry in entries) else None,
        )
        return to_call_result(result, render_list(result))

    def _stat(self, target: Path, shown: str) -> os.stat_result | None:
        try:
            return self._roots.stat(target)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc

    def _try_open(self, target: Path, shown: str, flags: int, on_dir: str) -> tuple[int, os.stat_result] | None:
        """Open a regular file and return its descriptor and status, or None if it does not exist."""
        try:
            fd = self._roots.open(target, flags | _OPEN_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            raise ToolError(f"{shown!r} is a directory; {on_dir}") from None
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a FIFO without a reader, or a socket
                raise ToolError(_not_regular(shown)) from None
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{shown!r} is a directory; {on_dir}")
            raise ToolError(_not_regular(shown))
        return fd, info

    def _open_existing(self, target: Path, shown: str, flags: int) -> tuple[int, os.stat_result]:
        opened = self._try_open(target, shown, flags, "use list or glob to see its content")
        if opened is None:
            raise ToolError(f"file {shorten(shown)} does not exist")
        return opened

    def _create(self, target: Path, shown: str) -> tuple[int, os.stat_result]:
        """Create a new file and its missing parent directories, all beneath the root without following symlinks."""
        try:
            parent = self._roots.make_dirs(target.parent)
            try:
                fd = os.open(
                    os.fsencode(target.name),
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o666,
                    dir_fd=parent,
                )
            finally:
                os.close(parent)
        except FileExistsError:
            # Something made the name between the check and now; it may be anything, even a symlink.
            raise ToolError(
                f"{shown!r} appeared while it was being created, so nothing was written; try again"
            ) from None
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        info = os.fstat(fd)
        self._links.created(info)
        return fd, info


def _entry(item: os.DirEntry[str]) -> Entry:
    name = escape(item.name)
    if item.is_symlink():
        return Entry(name=name, type="symlink", size=None)
    if item.is_dir(follow_symlinks=False):
        return Entry(name=name, type="dir", size=None)
    if item.is_file(follow_symlinks=False):
        return Entry(name=name, type="file", size=item.stat(follow_symlinks=False).st_size)
    return Entry(name=name, type="other", size=None)


def _not_regular(shown: str) -> str:
    return f"{shown!r} is not a regular file (it is a FIFO, socket or device); the fs tools only handle regular files"


def _read_same_file(parent: int, name: bytes, info: os.stat_result, shown: str) -> bytes:
    """Read the file a directory entry named when it was looked up, refusing if the name now means another one."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | _OPEN_FLAGS, dir_fd=parent)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            raise ToolError(f"{shown!r} was replaced while it was being deleted, so it was not deleted; try again")
        return read_all(fd)
    finally:
        os.close(fd)
