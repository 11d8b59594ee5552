"""The fs server's delete tool and its ``before_change`` hook, which Loom uses to snapshot files for rewind."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from servers.fs import build_server
from tests.servers._support import call_error, call_ok

pytestmark = pytest.mark.anyio


async def test_every_change_is_announced_with_the_prior_content_first(tmp_path: Path) -> None:
    root = Path(await anyio.Path(tmp_path).resolve())
    seen: list[tuple[Path, bytes | None, bytes | None]] = []

    def before_change(path: Path, content: bytes | None) -> None:
        # What is on disk at the moment of the call must equal what the hook is given: nothing changed yet.
        on_disk = path.read_bytes() if path.exists() else None
        seen.append((path, content, on_disk))

    (tmp_path / "old.txt").write_bytes(b"old\r\ncontent\n")
    async with Client(build_server([tmp_path], before_change=before_change)) as client:
        await call_ok(client, "write", {"path": "new.txt", "content": "fresh"})
        await call_ok(client, "edit", {"path": "old.txt", "old": "old", "new": "changed"})
        await call_ok(client, "write", {"path": "old.txt", "content": "rewritten"})
        await call_ok(client, "delete", {"path": "new.txt"})
        await call_ok(client, "read", {"path": "old.txt"})  # reads are not announced
    assert [(p, c) for p, c, _ in seen] == [
        (root / "new.txt", None),
        (root / "old.txt", b"old\r\ncontent\n"),
        (root / "old.txt", b"changed\r\ncontent\n"),
        (root / "new.txt", b"fresh"),
    ]
    assert all(content == on_disk for _, content, on_disk in seen)
    assert not (tmp_path / "new.txt").exists()


async def test_a_failing_hook_refuses_the_change_and_leaves_the_file(tmp_path: Path) -> None:
    def before_change(path: Path, content: bytes | None) -> None:
        raise OSError(28, "No space left on device")

    (tmp_path / "keep.txt").write_text("keep")
    async with Client(build_server([tmp_path], before_change=before_change)) as client:
        write = await call_error(client, "write", {"path": "keep.txt", "content": "lost?"})
        delete = await call_error(client, "delete", {"path": "keep.txt"})
        create = await call_error(client, "write", {"path": "other.txt", "content": "x"})
    assert "No space left on device" in write and "No space left on device" in delete and create
    assert (tmp_path / "keep.txt").read_text() == "keep"
    assert not (tmp_path / "other.txt").exists()


async def test_delete_removes_a_file_and_refuses_directories_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("12345")
    (tmp_path / "d").mkdir()
    async with Client(build_server([tmp_path])) as client:
        done = await call_ok(client, "delete", {"path": "f.txt"})
        missing = await call_error(client, "delete", {"path": "f.txt"})
        directory = await call_error(client, "delete", {"path": "d"})
    assert done == {"path": "f.txt", "bytes_deleted": 5}
    assert "does not exist" in missing and "is a directory" in directory
    assert (tmp_path / "d").is_dir()
