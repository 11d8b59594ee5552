"""The face's context tools: refusals that keep every call bounded, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp_calls import call, error_of
from tests.orchestrator.face.test_face import face_client, script

pytestmark = pytest.mark.anyio


async def test_compaction_and_model_switch_are_refused_while_a_run_is_going(tmp_path: Path) -> None:
    model = script(tmp_path, [{"text": "thinking", "delay_s": 30}])
    async with face_client(tmp_path, "auto") as client:
        session = await call(client, "create_session", cwd=str(tmp_path), model=model)
        sid = session["session_id"]
        assert session["context_used"] is None and session["context_ratio"] is None  # no model call yet
        run = await call(client, "send_message", session_id=sid, text="go")
        busy = await error_of(client, "compact_session", session_id=sid)
        switch = await error_of(client, "switch_model", session_id=sid, model="scripted:demo")
        await call(client, "cancel_run", run_id=run["run_id"])
        bad_spec = await error_of(client, "switch_model", session_id=sid, model="nonsense")
        unknown = await error_of(client, "compact_session", session_id="s_nope")
        short = await call(client, "compact_session", session_id=sid, preview=True)
    assert "has a run in progress; cancel it first" in busy and "has a run in progress" in switch
    assert "must look like PROVIDER:NAME" in bad_spec
    assert "no session 's_nope'" in unknown
    assert short["status"] == "nothing_to_compact" and short["tokens_before"] == short["tokens_after"]
