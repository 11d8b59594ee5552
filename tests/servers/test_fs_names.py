r"""File names that are not valid UTF-8: shown as ``\xHH``, accepted back in that form, and never lone surrogates.

Linux names are bytes. Without escaping, ``b"bad\xff.txt"`` reaches a result as ``"bad\udcff.txt"``, which looks
fine until the run tries to store the result as JSON or in SQLite and dies with "surrogates not allowed".
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from servers.fs import build_server
from servers.fs._names import ESCAPES_NOTE, escape, unescape
from tests.servers._support import call_error, call_ok, call_ok_text

pytestmark = pytest.mark.anyio

BAD = b"bad\xff.txt"
SHOWN = "bad\\xff.txt"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    _make(root, BAD, b"hello from bad\n")
    _make(root, b"dir\xfe/inner.txt", b"hello from inner\n")
    _make(root, b"back\\slash.txt", b"hello from backslash\n")
    _make(root, "caf\u00e9.txt".encode(), b"hello from cafe\n")
    return root


def _make(root: Path, relative: bytes, content: bytes) -> None:
    """Create a file by its bytes name, the way a tarball or another program would have."""
    path = os.fsencode(root) + b"/" + relative
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, content)
    finally:
        os.close(fd)


def _names(directory: Path) -> set[bytes]:
    return set(os.listdir(os.fsencode(directory)))


@pytest.fixture
async def client(root: Path) -> AsyncIterator[Client]:
    async with Client(build_server([root])) as client:
        yield client


def _storable(result: CallToolResult) -> None:
    """What the run does with every result: serialize it to JSON and store it as UTF-8. It must not raise."""
    for block in result.content:
        assert isinstance(block, TextContent)
        block.text.encode("utf-8")
    json.dumps(result.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
    json.dumps(result.structured_content, ensure_ascii=False).encode("utf-8")


async def _call(client: Client, tool: str, arguments: dict[str, object]) -> CallToolResult:
    result = await client.call_tool(tool, arguments)
    _storable(result)
    return result


async def test_list_shows_undecodable_bytes_escaped_with_a_note(client: Client) -> None:
    result = await _call(client, "list", {"path": "."})
    assert not result.is_error
    assert result.structured_content is not None
    names = [entry["name"] for entry in result.structured_content["entries"]]
    assert sorted(names) == sorted([SHOWN, "dir\\xfe", "back\\x5cslash.txt", "caf\u00e9.txt"])
    assert result.structured_content["note"] == ESCAPES_NOTE
    [block] = result.content
    assert isinstance(block, TextContent)
    assert f"{SHOWN}  15 B" in block.text.splitlines()
    assert block.text.endswith(f"note: {ESCAPES_NOTE}")
    inner = await call_ok(client, "list", {"path": "dir\\xfe"})
    assert (inner["path"], [entry["name"] for entry in inner["entries"]], inner["note"]) == (
        "dir\\xfe",
        ["inner.txt"],
        None,
    )


async def test_glob_shows_and_matches_the_escaped_spelling(client: Client) -> None:
    everything, text = await call_ok_text(client, "glob", {"pattern": "**"})
    assert set(everything["matches"]) == {
        SHOWN,
        "dir\\xfe",
        "dir\\xfe/inner.txt",
        "back\\x5cslash.txt",
        "caf\u00e9.txt",
    }
    assert everything["note"] == ESCAPES_NOTE
    assert everything["truncated"] is False
    assert text.endswith(f"note: {ESCAPES_NOTE}")
    # The pattern is matched against the names as shown, so what the model saw is what it can ask for.
    assert (await call_ok(client, "glob", {"pattern": "bad\\xff*"}))["matches"] == [SHOWN]
    assert (await call_ok(client, "glob", {"pattern": "*/inner.txt"}))["matches"] == ["dir\\xfe/inner.txt"]
    plain = await call_ok(client, "glob", {"pattern": "caf*"})
    assert (plain["matches"], plain["note"]) == (["caf\u00e9.txt"], None)
    assert not (await _call(client, "glob", {"pattern": "**"})).is_error


async def test_grep_shows_escaped_paths_with_a_note(client: Client) -> None:
    result, text = await call_ok_text(client, "grep", {"pattern": "^hello from"})
    paths = [match["path"] for match in result["matches"]]
    assert sorted(paths) == sorted([SHOWN, "dir\\xfe/inner.txt", "back\\x5cslash.txt", "caf\u00e9.txt"])
    assert result["note"] == ESCAPES_NOTE
    assert f"{SHOWN}:1: hello from bad" in text.splitlines()
    filtered = await call_ok(client, "grep", {"pattern": "hello", "glob": "bad\\xff.*"})
    assert [match["path"] for match in filtered["matches"]] == [SHOWN]
    _storable(await client.call_tool("grep", {"pattern": "hello"}))


async def test_the_escaped_name_works_as_a_path_for_every_tool(client: Client, root: Path) -> None:
    read = await _call(client, "read", {"path": SHOWN})
    assert read.structured_content is not None
    assert (read.structured_content["path"], read.structured_content["text"]) == (SHOWN, "hello from bad\n")
    written = await call_ok(client, "write", {"path": SHOWN, "content": "rewritten\n"})
    assert written == {"path": SHOWN, "bytes_written": 10, "created": False}
    assert (root / os.fsdecode(BAD)).read_bytes() == b"rewritten\n"
    await call_ok(client, "edit", {"path": SHOWN, "old": "rewritten", "new": "edited"})
    assert (root / os.fsdecode(BAD)).read_bytes() == b"edited\n"
    assert (await call_ok(client, "read", {"path": "dir\\xfe/inner.txt"}))["text"] == "hello from inner\n"
    assert (await call_ok(client, "read", {"path": "back\\x5cslash.txt"}))["text"] == "hello from backslash\n"
    # An escape made of bytes that are valid UTF-8 names the same file as the character.
    assert (await call_ok(client, "read", {"path": "caf\\xc3\\xa9.txt"}))["path"] == "caf\u00e9.txt"
    # Absolute paths too, and upper-case hex.
    absolute = f"{root}/bad\\xFF.txt"
    assert (await call_ok(client, "read", {"path": absolute}))["text"] == "edited\n"

    deleted = await call_ok(client, "delete", {"path": SHOWN})
    assert deleted == {"path": SHOWN, "bytes_deleted": 7}
    assert BAD not in _names(root)


async def test_new_files_can_be_created_with_escaped_names(client: Client, root: Path) -> None:
    created = await call_ok(client, "write", {"path": "new\\x80dir/file\\xfe.txt", "content": "x"})
    assert created == {"path": "new\\x80dir/file\\xfe.txt", "bytes_written": 1, "created": True}
    assert b"new\x80dir" in _names(root)
    assert _names(root / os.fsdecode(b"new\x80dir")) == {b"file\xfe.txt"}


@pytest.mark.parametrize(
    "raw",
    [
        "src\\main.py",  # a Windows path
        "a\\\\b",  # a doubled backslash is not an escape either
        "\\x41.txt",  # ASCII is never escaped, so its escape is not accepted
        "\\x2e\\x2e/outside",  # nor can an escape spell '.' or '/'
        "x\\x2fy",
        "\\x00",
        "bad\\xf",  # incomplete
    ],
)
async def test_other_backslashes_are_still_refused(client: Client, root: Path, raw: str) -> None:
    for tool, arguments in [
        ("read", {"path": raw}),
        ("write", {"path": raw, "content": "x"}),
        ("list", {"path": raw}),
    ]:
        message = await call_error(client, tool, arguments)
        assert "contains a backslash, which is not a path separator here" in message, (tool, message)
    assert _names(root) == {BAD, b"dir\xfe", b"back\\slash.txt", "caf\u00e9.txt".encode()}


async def test_patterns_with_lone_surrogates_are_refused(client: Client) -> None:
    for tool in ("glob", "grep"):
        message = await call_error(client, tool, {"pattern": "bad\udcff*"})
        assert "cannot be encoded as UTF-8" in message, message


async def test_file_contents_that_are_not_utf8_never_come_back_as_surrogates(client: Client, root: Path) -> None:
    (root / "latin1.txt").write_bytes(b"caf\xe9 au lait\n\xff\xfe\n")
    grep = await _call(client, "grep", {"pattern": "au lait"})
    assert grep.structured_content is not None
    assert [match["text"] for match in grep.structured_content["matches"]] == ["caf\ufffd au lait"]
    read = await _call(client, "read", {"path": "latin1.txt"})
    assert read.structured_content is not None
    assert read.structured_content["text"] == "caf\ufffd au lait\n\ufffd\ufffd\n"


def test_escape_and_unescape_round_trip_every_byte() -> None:
    for byte in range(1, 256):
        if byte == ord("/"):
            continue
        name = os.fsdecode(b"n" + bytes([byte]) + b".txt")
        shown = escape(name)
        shown.encode("utf-8")  # never a lone surrogate
        assert shown.isprintable() or not name.isprintable(), shown
        assert os.fsencode(unescape(shown)) == os.fsencode(name), (byte, shown)
    assert escape("plain/caf\u00e9.txt") == "plain/caf\u00e9.txt"
    assert escape(os.fsdecode(b"a\\b\xff")) == "a\\x5cb\\xff"
    with pytest.raises(ValueError, match="backslash"):
        unescape("a\\b")
