"""The face's log to its client: setLevel and messages in the handshake era, per-request opt-in in 2026-07-28."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from mcp import Client, MCPDeprecationWarning
from mcp.shared.exceptions import MCPError
from mcp.types import METHOD_NOT_FOUND, LoggingMessageNotificationParams

from tests.mcp_calls import call, error_of
from tests.orchestrator.face.test_face_resources import loom_face

pytestmark = pytest.mark.anyio


async def test_a_legacy_client_sets_a_level_and_hears_what_the_face_did_and_refused(tmp_path: Path) -> None:
    heard: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        heard.append(params)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # deprecated by 2026-07-28, current in this era
        async with loom_face(tmp_path) as (_, face), Client(face, mode="legacy", logging_callback=on_log) as client:
            assert client.server_capabilities.logging is not None
            await client.set_logging_level("debug")
            sid = (await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo"))["session_id"]
            await call(client, "get_session", session_id=sid)
            await error_of(client, "set_mode", session_id=sid, mode="yolo")
            at_debug = [(p.level, str(p.data)) for p in heard]
            await client.set_logging_level("warning")
            await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo")
            await error_of(client, "get_session", session_id="s_nope")
    assert at_debug[0][0] == "info" and at_debug[0][1].startswith(f"create_session: session_id {sid},")
    assert at_debug[1] == ("debug", f"get_session: session_id {sid}, status idle, mode ask")
    assert at_debug[2][0] == "warning" and "set_mode refused: unknown mode 'yolo'" in at_debug[2][1]
    assert all(p.logger == "loom" for p in heard)
    # At warning, the second create_session's info is not sent; the refusal is.
    assert [p.level for p in heard[3:]] == ["warning"] and "s_nope" in str(heard[3].data)


async def test_a_2026_client_hears_only_what_a_request_opted_in_to_and_has_no_set_level(tmp_path: Path) -> None:
    heard: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        heard.append(params)

    async with loom_face(tmp_path) as (_, face):
        async with Client(face, logging_callback=on_log, log_level="info") as client:
            await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo")
            await call(client, "list_sessions")  # debug: below the level asked for
        opted_in = list(heard)
        async with Client(face, logging_callback=on_log) as quiet:
            await call(quiet, "create_session", cwd=str(tmp_path), model="scripted:demo")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                with pytest.raises(MCPError) as removed:
                    await quiet.set_logging_level("debug")
    assert [p.level for p in opted_in] == ["info"] and "create_session: session_id" in str(opted_in[0].data)
    assert heard == opted_in  # a request that did not opt in gets no log messages
    assert removed.value.error.code == METHOD_NOT_FOUND
