"""The prompt's kept history: a private file, cut back when it grows, read back whatever it holds."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from clients.tui.history import KEEP, PromptHistory

pytestmark = pytest.mark.anyio


async def test_the_file_is_private_and_cut_to_its_newest_entries(tmp_path: Path) -> None:
    path = tmp_path / "home" / "h.jsonl"
    kept = PromptHistory(path, max_bytes=8192)  # reached after about 600 short entries, not a megabyte
    for n in range(2 * KEEP + 200):
        await kept.save(f"message {n}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.stat().st_size <= 8192 + 32
    assert len(path.read_text().splitlines()) < 2 * KEEP
    again = PromptHistory(path)
    await again.load()
    assert again.entries[-1] == f"message {2 * KEEP + 199}"
    assert len(again.entries) <= KEEP


async def test_a_damaged_line_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('"one"\nnot json\n{"a": 1}\n"two\\nlines"\n')
    kept = PromptHistory(path)
    await kept.load()
    assert kept.entries == ["one", "two\nlines"]


def test_walking_back_and_forth_keeps_the_draft_and_stops_at_the_ends() -> None:
    kept = PromptHistory(None)
    assert kept.older("draft") is None  # nothing sent yet: the draft stays
    for text in ("a", "b", "b"):
        kept.add(text)
    assert kept.entries == ["a", "b"]  # the same text twice in a row is kept once
    assert kept.older("draft") == "b" and kept.older("ignored") == "a" and kept.older("x") is None
    assert kept.newer() == "b" and kept.newer() == "draft" and kept.newer() is None


async def test_a_history_file_readable_by_others_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('"old"\n')
    path.chmod(0o644)
    await PromptHistory(path).save("new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
