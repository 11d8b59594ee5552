"""Counting the builds of tool schemas from signatures (what servers._tools exists to do once per process)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp.server.mcpserver.tools import Tool


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the name of every tool whose pydantic models and JSON schemas are built from now on.

    The real builder still runs: this only watches ``Tool.from_function``, which ``MCPServer.add_tool`` and
    ``servers._tools.bound_tool`` both go through.
    """
    built: list[str] = []
    real: Callable[..., Tool] = Tool.from_function

    def recording(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Tool:
        built.append(str(kwargs.get("name")))
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(Tool, "from_function", recording)
    return built
