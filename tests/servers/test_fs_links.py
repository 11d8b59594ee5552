"""Hard links: a name inside the root for a file outside it is read with a warning and never written through."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from servers.fs import build_server
from tests.servers._support import call_error, call_ok, call_ok_text

pytestmark = pytest.mark.anyio

OUTSIDE_TEXT = "outside content\n"


@pytest.fixture
def outside_file(tmp_path: Path, root: Path) -> Path:
    """A file outside the root with a hard link to it planted at root/linked.txt."""
    (tmp_path / "outside").mkdir()
    target = tmp_path / "outside" / "data.txt"
    target.write_text(OUTSIDE_TEXT)
    os.link(target, root / "linked.txt")
    return target


@pytest.fixture
async def client(root: Path) -> AsyncIterator[Client]:
    async with Client(build_server([root])) as client:
        yield client


def _text(path: Path) -> str:
    return path.read_text()


def _mtime(path: Path) -> int:
    return path.stat().st_mtime_ns


REFUSAL = (
    "'linked.txt' has 2 hard links, so it may be a file outside the workspace; Loom does not write through hard "
    "links — copy it or remove the link"
)


async def test_write_and_edit_through_a_hard_link_are_refused(client: Client, outside_file: Path) -> None:
    before = _mtime(outside_file)
    write = await call_error(client, "write", {"path": "linked.txt", "content": "pwned\n"})
    edit = await call_error(client, "edit", {"path": "linked.txt", "old": "outside", "new": "pwned"})
    assert REFUSAL in write
    assert REFUSAL in edit
    assert _text(outside_file) == OUTSIDE_TEXT
    assert _mtime(outside_file) == before


async def test_a_refused_write_is_not_announced_for_rewind(root: Path, outside_file: Path) -> None:
    seen: list[Path] = []
    async with Client(build_server([root], before_change=lambda path, _: seen.append(path))) as client:
        assert REFUSAL in await call_error(client, "write", {"path": "linked.txt", "content": "x"})
    assert seen == []
    assert _text(outside_file) == OUTSIDE_TEXT


async def test_reading_a_hard_link_says_what_it_may_be(client: Client, outside_file: Path) -> None:
    result, text = await call_ok_text(client, "read", {"path": "linked.txt"})
    note = "the file has 2 hard links, so it may be a file outside the workspace"
    assert result["text"] == OUTSIDE_TEXT
    assert result["note"] == note
    assert text == f"linked.txt (line 1 of 1); {note}\n{OUTSIDE_TEXT}"


async def test_grep_marks_matches_in_hard_linked_files(client: Client, root: Path, outside_file: Path) -> None:
    (root / "plain.txt").write_text("outside the box\n")
    result, text = await call_ok_text(client, "grep", {"pattern": "outside"})
    assert [match["path"] for match in result["matches"]] == ["linked.txt", "plain.txt"]
    assert result["note"] == "files with several hard links may be files outside the workspace: linked.txt (2)"
    assert result["truncated"] is False
    assert text.endswith(f"2 matches in 2 files searched; {result['note']}")


async def test_deleting_a_hard_link_removes_only_the_name_inside(
    client: Client, root: Path, outside_file: Path
) -> None:
    assert await call_ok(client, "delete", {"path": "linked.txt"}) == {
        "path": "linked.txt",
        "bytes_deleted": len(OUTSIDE_TEXT),
    }
    assert not (root / "linked.txt").exists()
    assert _text(outside_file) == OUTSIDE_TEXT


async def test_files_with_one_link_and_files_the_server_created_are_written_as_before(
    client: Client, root: Path
) -> None:
    (root / "single.txt").write_text("one link\n")
    await call_ok(client, "edit", {"path": "single.txt", "old": "one", "new": "just one"})
    assert (root / "single.txt").read_text() == "just one link\n"

    # A file this server created stays its own even after something links it (a build tool, a backup).
    assert (await call_ok(client, "write", {"path": "mine.txt", "content": "mine\n"}))["created"] is True
    os.link(root / "mine.txt", root / "mine-backup.txt")
    await call_ok(client, "edit", {"path": "mine.txt", "old": "mine", "new": "still mine"})
    await call_ok(client, "write", {"path": "mine-backup.txt", "content": "through the other name\n"})
    assert (root / "mine.txt").read_text() == "through the other name\n"
    read = await call_ok(client, "read", {"path": "mine.txt"})
    assert read["note"] is None


async def test_a_deleted_file_is_forgotten(client: Client, root: Path) -> None:
    await call_ok(client, "write", {"path": "gone.txt", "content": "x\n"})
    os.link(root / "gone.txt", root / "gone-link.txt")
    await call_ok(client, "delete", {"path": "gone.txt"})
    # The inode lives on under the other name, with one link, so writing it is fine as for any file...
    await call_ok(client, "write", {"path": "gone-link.txt", "content": "y\n"})
    # ...but the server no longer vouches for it: linked again, it is refused like any other hard link.
    os.link(root / "gone-link.txt", root / "again.txt")
    assert "'gone-link.txt' has 2 hard links" in await call_error(
        client, "write", {"path": "gone-link.txt", "content": "z\n"}
    )
    assert (root / "again.txt").read_text() == "y\n"
