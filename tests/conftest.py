"""Suite-wide fixtures: every async test runs on asyncio through anyio's pytest plugin, in a home of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["tests.pg"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _own_loom_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point ``LOOM_HOME`` at a fresh (not yet created) directory for every test.

    Code that falls back to ``loom_home()`` would otherwise use the developer's ``~/.loom``: its
    ``runtime.lock`` would make tests on parallel workers refuse each other, and its ``policy.toml``
    would leak into their decisions. Tests that want a particular home still set their own.
    """
    monkeypatch.setenv("LOOM_HOME", str(tmp_path / "loom-home"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="also run long-mode tests (same as LOOM_LONG_TESTS=1), e.g. 50+ daemon kills in tests/durability",
    )
