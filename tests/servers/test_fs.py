"""The fs server driven through a real MCP client, in-process in both protocol eras and over stdio."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from pydantic import BaseModel

import servers.fs
from servers.fs import build_server
from servers.fs._models import EditResult, GlobResult, GrepResult, ListResult, ReadResult, WriteResult
from tests.servers._support import IN_PROCESS_MODES, call_error, call_ok, call_ok_text, connect, names_in

pytestmark = pytest.mark.anyio


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the root that no call may touch."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return outside


@pytest.fixture(params=IN_PROCESS_MODES)
async def client(request: pytest.FixtureRequest, root: Path) -> AsyncIterator[Client]:
    async with connect(request.param, build_server([root]), "servers.fs", []) as client:
        yield client


async def test_list_tools_reports_honest_annotations(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"read", "write", "edit", "delete", "list", "glob", "grep"}
    for name in ("read", "list", "glob", "grep"):
        hints = tools[name].annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.idempotent_hint, hints.open_world_hint) == (True, True, False), name
    write, edit = tools["write"].annotations, tools["edit"].annotations
    assert write is not None and edit is not None
    assert (write.read_only_hint, write.destructive_hint, write.idempotent_hint) == (False, True, True)
    assert (edit.read_only_hint, edit.destructive_hint, edit.idempotent_hint) == (False, True, False)
    models: dict[str, type[BaseModel]] = {
        "read": ReadResult,
        "write": WriteResult,
        "edit": EditResult,
        "list": ListResult,
        "glob": GlobResult,
        "grep": GrepResult,
    }
    # The text is rendered by hand, but the schema a program validates against stays the result model's.
    for name, model in models.items():
        assert tools[name].output_schema == model.model_json_schema(), name
    assert tools["read"].description is not None and tools["read"].description.startswith("Read a UTF-8 text file")


async def test_read_returns_a_line_range_with_its_bounds(client: Client, root: Path) -> None:
    (root / "f.txt").write_text("one\ntwo\r\nthree\nfour")
    whole, text = await call_ok_text(client, "read", {"path": "f.txt"})
    assert text == "f.txt (lines 1-4 of 4)\none\ntwo\r\nthree\nfour"
    assert whole == {
        "path": "f.txt",
        "start_line": 1,
        "end_line": 4,
        "total_lines": 4,
        "text": "one\ntwo\r\nthree\nfour",
        "truncated": False,
        "note": None,
    }
    middle, text = await call_ok_text(client, "read", {"path": str(root / "f.txt"), "start_line": 2, "end_line": 3})
    assert (middle["path"], middle["text"], middle["end_line"]) == ("f.txt", "two\r\nthree\n", 3)
    assert text == "f.txt (lines 2-3 of 4)\ntwo\r\nthree\n"
    clamped, text = await call_ok_text(client, "read", {"path": "f.txt", "start_line": 4, "end_line": 99})
    assert (clamped["text"], clamped["end_line"]) == ("four", 4)
    assert text == "f.txt (line 4 of 4)\nfour"


async def test_read_text_puts_notes_on_the_header_line(client: Client, root: Path) -> None:
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    result, text = await call_ok_text(client, "read", {"path": "latin1.txt"})
    assert result["note"] == "the file is not valid UTF-8; undecodable bytes are shown as U+FFFD"
    assert text == f"latin1.txt (line 1 of 1); {result['note']}\ncaf\ufffd\n"


async def test_read_refuses_bad_ranges_missing_files_directories_and_binary(client: Client, root: Path) -> None:
    (root / "f.txt").write_text("a\nb\n")
    (root / "blob.bin").write_bytes(b"\x89PNG\x00\x01")
    assert "start_line 5 is past the end of 'f.txt', which has 2 lines" in await call_error(
        client, "read", {"path": "f.txt", "start_line": 5}
    )
    assert "end_line (1) is before start_line (2)" in await call_error(
        client, "read", {"path": "f.txt", "start_line": 2, "end_line": 1}
    )
    assert "file 'nope.txt' does not exist" in await call_error(client, "read", {"path": "nope.txt"})
    assert "is a directory" in await call_error(client, "read", {"path": "."})
    assert "looks like a binary file" in await call_error(client, "read", {"path": "blob.bin"})
    empty = root / "empty.txt"
    empty.write_text("")
    empty_result, text = await call_ok_text(client, "read", {"path": "empty.txt"})
    assert text == "empty.txt (empty file)"
    assert empty_result == {
        "path": "empty.txt",
        "start_line": 1,
        "end_line": 0,
        "total_lines": 0,
        "text": "",
        "truncated": False,
        "note": None,
    }


async def test_read_caps_its_output_at_a_line_boundary_and_says_where_to_continue(client: Client, root: Path) -> None:
    line = "x" * 99 + "\n"
    (root / "big.txt").write_text(line * 3000)
    first, text = await call_ok_text(client, "read", {"path": "big.txt"})
    header, _, body = text.partition("\n")
    assert header == (
        "big.txt (lines 1-2621 of 3000); output capped at 262144 bytes; returned lines 1-2621 of 3000; "
        "call read again with start_line=2622 for more"
    )
    assert body == line * 2621
    assert first["truncated"] is True
    assert first["total_lines"] == 3000
    assert first["end_line"] == 2621  # 256 KiB / 100-byte lines, whole lines only
    assert first["text"] == line * 2621
    assert f"start_line={first['end_line'] + 1}" in first["note"]
    rest = await call_ok(client, "read", {"path": "big.txt", "start_line": first["end_line"] + 1})
    assert (rest["truncated"], rest["end_line"], rest["text"]) == (False, 3000, line * (3000 - 2621))

    (root / "minified.js").write_text("y" * 300_000 + "\nsecond\n")
    cut, text = await call_ok_text(client, "read", {"path": "minified.js"})
    assert (cut["truncated"], cut["end_line"], cut["total_lines"]) == (True, 1, 2)
    assert len(cut["text"]) == 256 * 1024
    assert "line 1 alone exceeds" in cut["note"]
    assert text == f"minified.js (line 1 of 2); {cut['note']}\n{cut['text']}"


async def test_write_creates_parents_and_reports_whether_it_created(client: Client, root: Path) -> None:
    created, text = await call_ok_text(client, "write", {"path": "a/b/c.txt", "content": "héllo\n"})
    assert created == {"path": "a/b/c.txt", "bytes_written": 7, "created": True}
    assert text == "wrote 7 bytes to a/b/c.txt (created)"
    assert (root / "a" / "b" / "c.txt").read_text() == "héllo\n"
    again, text = await call_ok_text(client, "write", {"path": "a/b/c.txt", "content": "bye"})
    assert (again["created"], again["bytes_written"]) == (False, 3)
    assert text == "wrote 3 bytes to a/b/c.txt (overwritten)"
    assert (await call_ok_text(client, "write", {"path": "one.txt", "content": "x"}))[1] == (
        "wrote 1 byte to one.txt (created)"
    )
    assert (root / "a" / "b" / "c.txt").read_text() == "bye"
    assert "is a directory" in await call_error(client, "write", {"path": "a", "content": "x"})


def _unchanged(path: Path, content: str) -> bool:
    return path.read_text() == content


def _exists(path: Path) -> bool:
    return path.exists()


def _arguments(tool: str, path: str) -> dict[str, str]:
    if tool == "write":
        return {"path": path, "content": "pwned"}
    if tool == "edit":
        return {"path": path, "old": "secret", "new": "pwned"}
    return {"path": path}


@pytest.mark.parametrize("tool", ["write", "edit", "read"])
async def test_escapes_are_refused_and_nothing_outside_changes(
    client: Client, root: Path, outside: Path, tool: str
) -> None:
    os.symlink(outside, root / "link_dir")
    os.symlink(outside / "secret.txt", root / "link_file")
    os.symlink(root / "link_dir", root / "chain")
    attempts = [
        "../outside/secret.txt",
        str(outside / "secret.txt"),
        "link_dir/secret.txt",
        "link_file",
        "chain/secret.txt",
        "chain/new.txt",
        "sub/../../outside/new.txt",
    ]
    for raw in attempts:
        message = await call_error(client, tool, _arguments(tool, raw))
        assert "resolves outside the allowed roots" in message, raw
        assert str(root) in message and "use a path inside them" in message
    assert "NUL byte" in await call_error(client, tool, _arguments(tool, "x\x00y"))
    assert names_in(outside) == ["secret.txt"]
    assert _unchanged(outside / "secret.txt", "secret\n")
    assert not _exists(root / "sub")


async def test_edit_replaces_exactly_one_occurrence(client: Client, root: Path) -> None:
    (root / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result, text = await call_ok_text(client, "edit", {"path": "m.py", "old": "return 2", "new": "return 3"})
    assert result == {"path": "m.py", "replacements": 1, "first_line": 5, "bytes_written": 45}
    assert text == "replaced 1 occurrence in m.py (first at line 5)"
    assert (root / "m.py").read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"


async def test_edit_errors_say_what_to_do(client: Client, root: Path) -> None:
    (root / "m.py").write_text("x = 1\nx = 1\nx = 1\n")
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    ambiguous = await call_error(client, "edit", {"path": "m.py", "old": "x = 1", "new": "x = 2"})
    assert "matches 3 times in 'm.py'" in ambiguous and "replace_all=true" in ambiguous
    missing = await call_error(client, "edit", {"path": "m.py", "old": "y = 1", "new": "y = 2"})
    assert "old text not found in 'm.py'" in missing
    assert "CRLF" in await call_error(client, "edit", {"path": "crlf.txt", "old": "a\nb", "new": "c"})
    assert "identical" in await call_error(client, "edit", {"path": "m.py", "old": "x", "new": "x"})
    assert "old is empty" in await call_error(client, "edit", {"path": "m.py", "old": "", "new": "x"})
    assert "does not exist" in await call_error(client, "edit", {"path": "nope.py", "old": "a", "new": "b"})
    assert (root / "m.py").read_text() == "x = 1\nx = 1\nx = 1\n"
    everything, text = await call_ok_text(
        client, "edit", {"path": "m.py", "old": "x = 1", "new": "x = 2", "replace_all": True}
    )
    assert everything["replacements"] == 3
    assert text == "replaced 3 occurrences in m.py (first at line 1)"
    assert (root / "m.py").read_text() == "x = 2\nx = 2\nx = 2\n"


async def test_edit_refuses_files_that_are_not_utf8(client: Client, root: Path) -> None:
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    assert "not valid UTF-8" in await call_error(client, "edit", {"path": "latin1.txt", "old": "caf", "new": "x"})
    assert (root / "latin1.txt").read_bytes() == "café".encode("latin-1")


async def test_list_reports_type_and_size_without_following_symlinks(client: Client, root: Path, outside: Path) -> None:
    (root / "b.txt").write_text("12345")
    (root / "a_dir").mkdir()
    os.symlink(outside, root / "c_link")
    listing, text = await call_ok_text(client, "list", {})
    assert text == "a_dir/\nb.txt  5 B\nc_link -> symlink"
    assert listing == {
        "path": ".",
        "entries": [
            {"name": "a_dir", "type": "dir", "size": None},
            {"name": "b.txt", "type": "file", "size": 5},
            {"name": "c_link", "type": "symlink", "size": None},
        ],
        "total_entries": 3,
        "truncated": False,
        "note": None,
    }
    empty, text = await call_ok_text(client, "list", {"path": "a_dir"})
    assert (empty["entries"], text) == ([], "a_dir is empty")
    assert "is a file, not a directory" in await call_error(client, "list", {"path": "b.txt"})
    assert "resolves outside" in await call_error(client, "list", {"path": "c_link"})


@pytest.fixture
def tree(root: Path, outside: Path) -> Path:
    for relative in [
        "setup.py",
        "src/pkg/__init__.py",
        "src/pkg/core.py",
        "src/pkg/data.bin",
        "docs/guide.md",
        ".git/hooks/x.py",
        ".venv/lib/y.py",
        "node_modules/m/z.py",
        "src/pkg/__pycache__/core.py",
    ]:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {relative}\nTODO: fix\n")
    (root / "src/pkg/data.bin").write_bytes(b"TODO\x00binary")
    (outside / "leak.py").write_text("TODO outside\n")
    os.symlink(outside, root / "src" / "linked")
    return root


async def test_glob_matches_sorted_relative_paths_and_skips_bulky_dirs(client: Client, tree: Path) -> None:
    result, text = await call_ok_text(client, "glob", {"pattern": "**/*.py"})
    assert text == "setup.py\nsrc/pkg/__init__.py\nsrc/pkg/core.py"
    assert result == {
        "pattern": "**/*.py",
        "path": ".",
        "matches": ["setup.py", "src/pkg/__init__.py", "src/pkg/core.py"],
        "truncated": False,
        "note": None,
    }
    assert (await call_ok(client, "glob", {"pattern": "*.py"}))["matches"] == ["setup.py"]
    in_src = await call_ok(client, "glob", {"pattern": "*/*.py", "path": "src"})
    assert in_src["matches"] == ["src/pkg/__init__.py", "src/pkg/core.py"]
    none, text = await call_ok_text(client, "glob", {"pattern": "**/*.rs", "path": "src"})
    assert (none["matches"], text) == ([], "no files match **/*.rs under src")
    assert "must be relative" in await call_error(client, "glob", {"pattern": "../*"})
    assert "is a file" in await call_error(client, "glob", {"pattern": "*", "path": "setup.py"})


async def test_glob_says_when_it_capped_the_result(client: Client, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("servers.fs._search.GLOB_CAP", 2)
    for name in "abc":
        (root / f"{name}.txt").write_text("")
    result, text = await call_ok_text(client, "glob", {"pattern": "*.txt"})
    assert (result["matches"], result["truncated"]) == (["a.txt", "b.txt"], True)
    assert "3 paths matched; only the first 2" in result["note"]
    assert text == f"a.txt\nb.txt\nnote: {result['note']}"


async def test_grep_finds_lines_in_text_files_only(client: Client, tree: Path) -> None:
    result, text = await call_ok_text(client, "grep", {"pattern": r"^TODO"})
    assert text.splitlines() == [
        "docs/guide.md:2: TODO: fix",
        "setup.py:2: TODO: fix",
        "src/pkg/__init__.py:2: TODO: fix",
        "src/pkg/core.py:2: TODO: fix",
        "4 matches in 4 files searched",
    ]
    assert [(m["path"], m["line"], m["text"]) for m in result["matches"]] == [
        ("docs/guide.md", 2, "TODO: fix"),
        ("setup.py", 2, "TODO: fix"),
        ("src/pkg/__init__.py", 2, "TODO: fix"),
        ("src/pkg/core.py", 2, "TODO: fix"),
    ]
    assert (result["files_searched"], result["truncated"]) == (4, False)
    by_name = await call_ok(client, "grep", {"pattern": "todo", "ignore_case": True, "glob": "*.md"})
    assert [m["path"] for m in by_name["matches"]] == ["docs/guide.md"]
    by_path = await call_ok(client, "grep", {"pattern": "TODO", "path": "src", "glob": "pkg/c*.py"})
    assert [m["path"] for m in by_path["matches"]] == ["src/pkg/core.py"]
    one_file, text = await call_ok_text(client, "grep", {"pattern": "fix$", "path": "setup.py"})
    assert [(m["path"], m["line"]) for m in one_file["matches"]] == [("setup.py", 2)]
    assert text == "setup.py:2: TODO: fix\n1 match in 1 file searched"
    nothing, text = await call_ok_text(client, "grep", {"pattern": "FIXME"})
    assert (nothing["matches"], text) == ([], "no matches in 4 files searched")
    assert "looks binary" in await call_error(client, "grep", {"pattern": "x", "path": "src/pkg/data.bin"})


async def test_grep_caps_matches_and_long_lines(client: Client, root: Path) -> None:
    (root / "many.txt").write_text("hit\n" * 10 + "hit " + "z" * 1000 + "\n")
    capped, text = await call_ok_text(client, "grep", {"pattern": "hit", "max_matches": 3})
    assert (len(capped["matches"]), capped["truncated"]) == (3, True)
    assert "max_matches=3" in capped["note"]
    assert text.splitlines() == [
        "many.txt:1: hit",
        "many.txt:2: hit",
        "many.txt:3: hit",
        f"3 matches in 1 file searched; {capped['note']}",
    ]
    long_line = (await call_ok(client, "grep", {"pattern": "z"}))["matches"][0]["text"]
    assert long_line.startswith("hit zzz") and long_line.endswith("[604 more characters]")


async def test_grep_reports_an_invalid_regex(client: Client) -> None:
    message = await call_error(client, "grep", {"pattern": "foo(bar"})
    assert "invalid regular expression 'foo(bar'" in message and "missing )" in message


async def test_a_second_root_is_reachable_by_absolute_path(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (second / "s.txt").write_text("second\n")
    async with Client(build_server([first, second])) as client:
        result = await call_ok(client, "read", {"path": str(second / "s.txt")})
        assert (result["path"], result["text"]) == (str(second / "s.txt"), "second\n")
        assert "resolves outside" in await call_error(client, "read", {"path": "../second/../../x"})


async def test_over_stdio(root: Path, outside: Path) -> None:
    async with connect("stdio", build_server([root]), "servers.fs", ["--root", str(root)]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["write"].annotations is not None and tools["write"].annotations.destructive_hint is True
        assert (await call_ok(client, "write", {"path": "d/f.txt", "content": "hi\n"}))["created"] is True
        read, text = await call_ok_text(client, "read", {"path": "d/f.txt"})
        assert (read["text"], text) == ("hi\n", "d/f.txt (line 1 of 1)\nhi\n")
        assert "resolves outside" in await call_error(client, "write", {"path": "../outside/x", "content": "x"})
    assert (root / "d" / "f.txt").read_text() == "hi\n"
    assert names_in(outside) == ["secret.txt"]


def test_main_rejects_a_missing_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert servers.fs.main(["--root", str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "not an existing directory" in captured.err
