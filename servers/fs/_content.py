"""File content as the fs tools handle it: bytes read from and written to an open descriptor, and UTF-8 text.

The tools work on descriptors opened beneath a root (see `servers.fs._openat`), never on paths, so the helpers here
take descriptors too. Decoding never produces lone surrogates: undecodable bytes become U+FFFD for reading, and
editing refuses files that are not UTF-8 rather than write the replacement characters back.
"""

from __future__ import annotations

import codecs
import os
from typing import BinaryIO

from mcp.server.mcpserver.exceptions import ToolError

__all__ = [
    "BINARY_SNIFF_BYTES",
    "READ_CAP_BYTES",
    "decode_lossy",
    "encode",
    "looks_binary",
    "read_all",
    "read_lines",
    "replace_content",
    "replace_text",
]

READ_CAP_BYTES = 256 * 1024
"""Most text one read returns; a model context has no room for more, and it can ask for the next range."""

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


def read_all(fd: int) -> bytes:
    """Read a whole file from an open descriptor, from its start, leaving the descriptor open.

    Args:
        fd: A readable descriptor of a regular file.

    Returns:
        The file's content.
    """
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, _COUNT_BLOCK_BYTES, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def replace_content(fd: int, data: bytes) -> None:
    """Make an open file's content exactly ``data``, writing through the descriptor that was checked.

    The new bytes are written over the old ones before the file is cut to length, so a failure part-way (a full
    disk) leaves the old tail rather than an empty file.

    Args:
        fd: A writable descriptor of a regular file.
        data: The new content.
    """
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)
    os.ftruncate(fd, len(data))


def read_lines(handle: BinaryIO, start_line: int, end_line: int | None) -> tuple[bytes, int, bool]:
    """Collect lines start_line..end_line (capped at READ_CAP_BYTES) and count every line in the file.

    Reads in bounded pieces rather than whole lines so a multi-gigabyte single-line file cannot exhaust memory.

    Args:
        handle: The file, positioned at its start.
        start_line: First line wanted (1-based).
        end_line: Last line wanted, inclusive, or None for the rest of the file.

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


def encode(text: str, what: str) -> bytes:
    """Encode text the model sent as UTF-8 for a file.

    Args:
        text: The text.
        what: The argument it came in, for the error message.

    Returns:
        The UTF-8 bytes.

    Raises:
        ToolError: If the text holds lone surrogates, which JSON can carry but no UTF-8 file can hold.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(f"{what} contains characters that cannot be encoded as UTF-8 ({exc.reason})") from exc


def decode_lossy(data: bytes) -> tuple[str, bool]:
    """Decode UTF-8, replacing bad bytes; an incomplete character at a cut end is dropped, not replaced.

    Args:
        data: Bytes read from a file, possibly cut in the middle of a character.

    Returns:
        The text (free of lone surrogates) and whether any byte had to be replaced with U+FFFD.
    """
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(data, final=False)
        return text, "\ufffd" in text


def replace_text(data: bytes, old: str, new: str, replace_all: bool, shown: str) -> tuple[str, int, int]:
    """Apply an exact-string edit to a file's content, refusing content that edit must not touch.

    Args:
        data: The file's current bytes.
        old: The text to replace.
        new: The text to put in its place.
        replace_all: Replace every occurrence; otherwise old must occur exactly once.
        shown: The file's path as the model sees it, for messages.

    Returns:
        The new text, how many times old occurs, and the line (1-based) of its first occurrence.

    Raises:
        ToolError: If the file looks binary or is not UTF-8, or old does not occur, or occurs more than once
            without replace_all.
    """
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
    return updated, count, first_line
