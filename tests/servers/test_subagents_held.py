"""The subagents server's one connection to the face: opened on first use, replaced when it fails."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.loom import LoomClient, open_client
from servers.subagents._held import HeldClient

pytestmark = pytest.mark.anyio


async def test_a_connection_that_cannot_open_fails_that_call_only(tmp_path: Path) -> None:
    async with open_client(tmp_path / "home", cwd=tmp_path) as live:
        attempts: list[str] = []

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[LoomClient]:
            attempts.append("open")
            if len(attempts) == 1:
                raise ConnectionRefusedError("the daemon is restarting")
            yield live

        held = HeldClient(connect)
        async with held.running():
            with pytest.raises(ConnectionRefusedError):
                async with held.client():
                    pass
            async with held.client() as first:
                sessions = await first.list_sessions()
            async with held.client() as second:
                assert second is first  # one connection for the calls after
            held.forget()
            async with held.client() as third:
                await third.list_sessions()

    assert sessions == [] and attempts == ["open", "open", "open"]
