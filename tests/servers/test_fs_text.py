"""Unit tests of the fs tools' text rendering for cases awkward to set up through a client (no MCP involved)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp.types import CallToolResult, TextContent

from servers.fs._files import FileTools
from servers.fs._models import GlobResult, GrepMatch, GrepResult
from servers.fs._paths import Roots
from servers.fs._text import render_glob, render_grep


def _text(result: CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


def test_list_marks_odd_entries_and_truncation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a\nb.txt").write_text("")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "z.txt").write_text("")
    files = FileTools(Roots([tmp_path]))
    full = files.list_dir(".")
    assert full.structured_content is not None
    assert [entry["type"] for entry in full.structured_content["entries"]] == ["file", "other", "file"]
    # A newline in a name is shown escaped, so each entry still takes exactly one line.
    assert _text(full) == "'a\\nb.txt'  0 B\npipe  (not a regular file)\nz.txt  0 B"
    monkeypatch.setattr("servers.fs._files.LIST_CAP", 1)
    capped = files.list_dir(".")
    assert capped.structured_content is not None
    assert (capped.structured_content["total_entries"], capped.structured_content["truncated"]) == (3, True)
    assert _text(capped).splitlines() == [
        "'a\\nb.txt'  0 B",
        "note: 2 more entries not shown (3 in total); use glob with a pattern to narrow",
    ]


def test_an_empty_but_incomplete_glob_still_says_why() -> None:
    result = GlobResult(pattern="**/*.rs", path=".", matches=[], truncated=True, note="the scan stopped early")
    assert render_glob(result) == "no files match **/*.rs under .\nnote: the scan stopped early"


def test_grep_escapes_odd_paths_and_keeps_the_note_on_the_summary() -> None:
    result = GrepResult(
        pattern="x",
        matches=[GrepMatch(path="odd\tname.py", line=3, text="x = 1")],
        files_searched=2,
        truncated=True,
        note="the scan stopped early",
    )
    assert render_grep(result) == "'odd\\tname.py':3: x = 1\n1 match in 2 files searched; the scan stopped early"
    empty = result.model_copy(update={"matches": [], "files_searched": 0, "truncated": False, "note": None})
    assert render_grep(empty) == "no matches in 0 files searched"
