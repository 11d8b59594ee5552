"""Fixtures shared by the server tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty directory for a server to be confined to."""
    root = tmp_path / "root"
    root.mkdir()
    return root
