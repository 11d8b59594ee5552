"""Suite-wide fixtures: every async test runs on asyncio through anyio's pytest plugin."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="also run long-mode tests (same as LOOM_LONG_TESTS=1), e.g. 50+ daemon kills in tests/durability",
    )
