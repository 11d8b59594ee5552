r"""The fs tools that search a tree: glob and grep.

Both walk the tree themselves instead of using `Path.glob` or `os.walk` with its defaults, so that they never
follow symlinks (a link to ``/`` inside a root must not turn a search into a scan of the whole disk, or leak files
outside the roots), prune the usual bulky directories, and stop after a fixed number of entries so one call cannot
tie up its worker thread for minutes: a sync tool cannot be cancelled once it runs.

Every directory scanned and every file searched is opened through `Roots.open`, beneath the root's descriptor with
no symlink followed, so a directory swapped for a symlink during the walk ends that branch instead of leading the
walk outside. Paths are matched and shown in the spelling of `servers.fs._names` (``\xHH`` for bytes that are
not UTF-8), the same one the model sees and sends back.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from servers.fs._content import BINARY_SNIFF_BYTES, looks_binary
from servers.fs._files import oserror_message
from servers.fs._links import HardLinks
from servers.fs._models import GlobResult, GrepMatch, GrepResult
from servers.fs._names import ESCAPES_NOTE, any_escaped, escape
from servers.fs._paths import Roots, shorten
from servers.fs._text import render_glob, render_grep, to_call_result

__all__ = ["GLOB_CAP", "GREP_MAX_FILE_BYTES", "LINE_TEXT_CAP", "SCAN_LIMIT", "SKIP_DIRS", "SearchTools", "glob_regex"]

SKIP_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__"})
"""Directories never descended into: tool state and dependencies, rarely what the model is looking for."""

SCAN_LIMIT = 200_000
"""Most directory entries one search visits before giving up and saying so."""

GLOB_CAP = 1000
"""Most paths one glob returns."""

LINE_TEXT_CAP = 400
"""Most characters of a matching line grep returns (minified files have megabyte-long lines)."""

GREP_MAX_FILE_BYTES = 16 * 1024 * 1024
"""Files larger than this are skipped by grep; they are almost always data or build output."""


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob pattern into a regular expression over POSIX relative paths.

    ``*`` and ``?`` match within one path component, ``[...]`` is a character class (``[!...]`` negated), ``**/``
    matches zero or more directories and a trailing ``**`` matches everything below.

    Args:
        pattern: The glob pattern.

    Returns:
        A compiled expression that must match the whole path.
    """
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            parts.append(".*")
            i += 2
            continue
        if char == "*":
            parts.append("[^/]*")
        elif char == "?":
            parts.append("[^/]")
        elif char == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = body.replace("\\", "\\\\").replace("^", "\\^")
            parts.append(f"[{'^/' if negate else ''}{escaped}]")
            i = close + 1
            continue
        else:
            parts.append(re.escape(char))
        i += 1
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


@dataclass(frozen=True)
class _Found:
    """One entry the walk visited."""

    path: Path
    """The entry's absolute path, as ``os`` functions take it."""
    relative: str
    """Its path relative to the walk's base, escaped as the model sees it; what patterns are matched against."""
    name: str
    """Its name, escaped."""
    is_dir: bool
    is_file: bool


class _Walker:
    """A depth-first walk in path order that does not follow symlinks, prunes `SKIP_DIRS` and has a budget."""

    def __init__(self, roots: Roots, limit: int = SCAN_LIMIT) -> None:
        self.roots = roots
        self.limit = limit
        self.scanned = 0
        self.exhausted = False

    def walk(self, base: Path) -> Iterator[_Found]:
        """Yield everything below base, in path order."""
        pending: list[Iterator[_Found]] = [self._scan(base, "")]
        while pending:
            found = next(pending[-1], None)
            if found is None:
                pending.pop()
                continue
            if (found.name in SKIP_DIRS and found.is_dir) or self.roots.is_hidden(found.path):
                continue
            if self.scanned >= self.limit:
                self.exhausted = True
                return
            self.scanned += 1
            yield found
            if found.is_dir:
                pending.append(self._scan(found.path, found.relative + "/"))

    def _scan(self, directory: Path, prefix: str) -> Iterator[_Found]:
        try:
            fd = self.roots.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            # An unreadable directory, or one swapped for a symlink since it was listed, is skipped, not searched.
            return iter(())
        try:
            # Entry types are read while the descriptor is open: a DirEntry of scandir(fd) looks itself up in it.
            with os.scandir(fd) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
                found = [
                    _Found(
                        path=directory / entry.name,
                        relative=prefix + escape(entry.name),
                        name=escape(entry.name),
                        is_dir=entry.is_dir(follow_symlinks=False),
                        is_file=entry.is_file(follow_symlinks=False),
                    )
                    for entry in entries
                ]
        except OSError:
            return iter(())
        finally:
            os.close(fd)
        return iter(found)


class SearchTools:
    """Glob and grep, confined to a set of roots.

    Args:
        roots: The directories the tools may search.
        links: Which files this server created, shared with the file tools; a fresh record when None.
    """

    def __init__(self, roots: Roots, links: HardLinks | None = None) -> None:
        self._roots = roots
        self._links = HardLinks() if links is None else links

    def glob(
        self,
        pattern: Annotated[
            str, Field(description="Glob relative to path, e.g. '**/*.py' (recursive) or 'src/*.toml'.")
        ],
        path: Annotated[str, Field(description="Directory to search in, relative to the primary root.")] = ".",
    ) -> Annotated[CallToolResult, GlobResult]:
        """Find files and directories whose path (relative to `path`) matches a glob pattern.

        `*` and `?` stay within one directory level, so '*.py' only matches the top level; use '**/*.py' to search
        recursively. Results are sorted and capped at 1000. The directories .git, .venv, node_modules and
        __pycache__ are skipped and symlinks are not followed.
        """
        if not pattern:
            raise ToolError("pattern is empty; pass a glob such as '**/*.py'")
        _check_encodable(pattern)
        if pattern.startswith("/") or ".." in pattern.split("/"):
            raise ToolError(
                f"pattern {shorten(pattern)} must be relative and must not contain '..'; put the directory to "
                f"search in path instead"
            )
        base = self._search_dir(path)
        regex = glob_regex(pattern)
        walker = _Walker(self._roots)
        found = sorted(self._roots.display(item.path) for item in walker.walk(base) if regex.match(item.relative))
        notes: list[str] = []
        if len(found) > GLOB_CAP:
            notes.append(f"{len(found)} paths matched; only the first {GLOB_CAP} are listed")
        if walker.exhausted:
            notes.append(f"the scan stopped after {SCAN_LIMIT} entries, so matches may be missing")
        if notes:
            notes.append("narrow the pattern or path")
        matches = found[:GLOB_CAP]
        if any_escaped(matches):
            notes.append(ESCAPES_NOTE)
        result = GlobResult(
            pattern=pattern,
            path=self._roots.display(base),
            matches=matches,
            truncated=len(found) > GLOB_CAP or walker.exhausted,
            note="; ".join(notes) or None,
        )
        return to_call_result(result, render_glob(result))

    def grep(
        self,
        pattern: Annotated[str, Field(description="Python regular expression, matched against each line.")],
        path: Annotated[str, Field(description="File or directory to search, relative to the primary root.")] = ".",
        glob: Annotated[
            str | None,
            Field(description="Only search matching files: '*.py' matches names, 'src/**/*.py' paths below path."),
        ] = None,
        ignore_case: Annotated[bool, Field(description="Match case-insensitively.")] = False,
        max_matches: Annotated[int, Field(ge=1, le=5000, description="Stop after this many matching lines.")] = 200,
    ) -> Annotated[CallToolResult, GrepResult]:
        """Search text files for lines matching a regular expression (Python `re` syntax).

        Searches recursively when `path` is a directory, skipping binary files, files over 16 MiB, symlinks, and
        the directories .git, .venv, node_modules and __pycache__. Returns path, line number and line text per
        match (long lines are shortened), in path order.
        """
        _check_encodable(pattern)
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {shorten(pattern)}: {exc}") from exc
        base = self._roots.resolve(path)
        shown_base = self._roots.display(base)
        try:
            info = self._roots.stat(base)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown_base))) from exc
        if info is None:
            raise ToolError(f"{shown_base!r} does not exist")
        name_filter = None if glob is None else glob_regex(glob)
        filter_on_path = glob is not None and "/" in glob

        walker = _Walker(self._roots)
        candidates: Iterator[Path]
        if stat.S_ISDIR(info.st_mode):
            candidates = (
                item.path
                for item in walker.walk(base)
                if item.is_file
                and (name_filter is None or name_filter.match(item.relative if filter_on_path else item.name))
            )
        else:
            candidates = iter([base])

        matches: list[GrepMatch] = []
        linked: list[str] = []
        searched = 0
        for file in candidates:
            remaining = max_matches - len(matches)
            if remaining <= 0:
                break
            found = self._grep_file(file, regex, remaining)
            if isinstance(found, str):
                if file == base:
                    # Skipping silently is right inside a tree, but not for the one file that was asked for.
                    raise ToolError(f"cannot search {shown_base!r}: {found}")
                continue
            lines, links = found
            searched += 1
            shown = self._roots.display(file)
            matches.extend(GrepMatch(path=shown, line=number, text=text) for number, text in lines)
            if lines and links:
                linked.append(f"{shown} ({links})")

        notes: list[str] = []
        if len(matches) >= max_matches:
            notes.append(f"stopped at max_matches={max_matches}; narrow the pattern, path or glob to see the rest")
        if walker.exhausted:
            notes.append(f"the scan stopped after {SCAN_LIMIT} entries, so matches may be missing; narrow path")
        truncated = bool(notes)
        if linked:
            notes.append("files with several hard links may be files outside the workspace: " + ", ".join(linked[:10]))
        if any_escaped(match.path for match in matches):
            notes.append(ESCAPES_NOTE)
        result = GrepResult(
            pattern=pattern,
            matches=matches,
            files_searched=searched,
            truncated=truncated,
            note="; ".join(notes) or None,
        )
        return to_call_result(result, render_grep(result))

    def _search_dir(self, path: str) -> Path:
        base = self._roots.resolve(path)
        shown = self._roots.display(base)
        try:
            info = self._roots.stat(base)
        except OSError as exc:
            raise ToolError(oserror_message(exc, repr(shown))) from exc
        if info is None:
            raise ToolError(f"directory {shown!r} does not exist")
        if not stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown!r} is a file, not a directory; pass the directory to search in")
        return base

    def _grep_file(self, file: Path, regex: re.Pattern[str], limit: int) -> tuple[list[tuple[int, str]], int] | str:
        """Up to ``limit`` matching ``(line number, text)`` pairs and the file's suspect link count, or why not."""
        try:
            fd = self._roots.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as exc:
            # Files vanish and permissions vary mid-search; neither should fail a whole-tree search.
            return exc.strerror or str(exc)
        with open(fd, "rb") as handle:
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    return "it is not a regular file"
                if info.st_size > GREP_MAX_FILE_BYTES:
                    return f"it is larger than {GREP_MAX_FILE_BYTES // (1024 * 1024)} MiB"
                if looks_binary(handle.read(BINARY_SNIFF_BYTES)):
                    return "it looks binary (it contains NUL bytes)"
                handle.seek(0)
                found: list[tuple[int, str]] = []
                for number, raw in enumerate(handle, start=1):
                    # errors="replace", not surrogateescape: the line goes into JSON and must stay valid Unicode.
                    line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    if regex.search(line):
                        found.append((number, _clip(line)))
                        if len(found) >= limit:
                            break
                return found, self._links.extra_links(info)
            except OSError as exc:
                return exc.strerror or str(exc)


def _check_encodable(pattern: str) -> None:
    # The pattern is echoed in the result, and a lone surrogate there would fail storing it as JSON later.
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(f"pattern contains characters that cannot be encoded as UTF-8 ({exc.reason})") from exc


def _clip(line: str) -> str:
    if len(line) <= LINE_TEXT_CAP:
        return line
    return f"{line[:LINE_TEXT_CAP]}… [{len(line) - LINE_TEXT_CAP} more characters]"
