"""Structured results of the fs tools.

Each model is also the tool's ``outputSchema``, so field descriptions are written for the model reading them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["EditResult", "Entry", "GlobResult", "GrepMatch", "GrepResult", "ListResult", "ReadResult", "WriteResult"]


class ReadResult(BaseModel):
    """A range of lines from a text file."""

    path: str = Field(description="The file, relative to the primary root when inside it.")
    start_line: int = Field(description="First line returned (1-based).")
    end_line: int = Field(description="Last line returned, inclusive; start_line - 1 when nothing was returned.")
    total_lines: int = Field(description="Number of lines in the whole file.")
    text: str = Field(description="The lines, with their original line endings.")
    truncated: bool = Field(description="True when the requested range did not fit in the size cap.")
    note: str | None = Field(default=None, description="Why the text is shorter than asked, and how to continue.")


class WriteResult(BaseModel):
    """The outcome of writing a whole file."""

    path: str = Field(description="The file written.")
    bytes_written: int = Field(description="Size of the file now, in bytes (UTF-8).")
    created: bool = Field(description="True if the file did not exist before.")


class DeleteResult(BaseModel):
    """The outcome of deleting a file."""

    path: str = Field(description="The file deleted.")
    bytes_deleted: int = Field(description="Its size before it was deleted.")


class EditResult(BaseModel):
    """The outcome of an exact string replacement."""

    path: str = Field(description="The file edited.")
    replacements: int = Field(description="How many occurrences were replaced.")
    first_line: int = Field(description="Line on which the first replacement starts (1-based).")
    bytes_written: int = Field(description="Size of the file now, in bytes (UTF-8).")


class Entry(BaseModel):
    """One directory entry."""

    name: str = Field(description="File name within the directory (bytes that are not UTF-8 shown as \\xHH).")
    type: Literal["file", "dir", "symlink", "other"] = Field(description="Entry type; symlinks are not followed.")
    size: int | None = Field(description="Size in bytes for files, null otherwise.")


class ListResult(BaseModel):
    """The entries of one directory, sorted by name."""

    path: str = Field(description="The directory listed.")
    entries: list[Entry] = Field(description="Entries sorted by name.")
    total_entries: int = Field(description="Number of entries in the directory, including any left out.")
    truncated: bool = Field(description="True when entries were left out to respect the cap.")
    note: str | None = Field(default=None, description="How to read names shown with escapes, if any are.")


class GlobResult(BaseModel):
    """Paths matching a glob pattern."""

    pattern: str = Field(description="The pattern, relative to the searched directory.")
    path: str = Field(description="The directory searched.")
    matches: list[str] = Field(description="Matching paths, sorted, relative to the primary root when inside it.")
    truncated: bool = Field(description="True when matches were left out or the scan stopped early.")
    note: str | None = Field(default=None, description="Why the result is incomplete, and how to narrow it.")


class GrepMatch(BaseModel):
    """One matching line."""

    path: str = Field(description="The file, relative to the primary root when inside it.")
    line: int = Field(description="Line number (1-based).")
    text: str = Field(description="The line without its line ending, shortened if very long.")


class GrepResult(BaseModel):
    """Lines matching a regular expression."""

    pattern: str = Field(description="The regular expression searched for.")
    matches: list[GrepMatch] = Field(description="Matches in path order, then line order.")
    files_searched: int = Field(description="Text files searched.")
    truncated: bool = Field(description="True when the search stopped at max_matches or the scan limit.")
    note: str | None = Field(default=None, description="Why the result is incomplete, and how to narrow it.")
