"""A run a Stop hook sent on, interrupted before the model answered again, resumes from the hook's reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.config import LoomConfig, ShellOptions
from orchestrator.context.history import rebuild_history
from orchestrator.events_long import HookRan
from orchestrator.messages import TextBlock
from orchestrator.models.base import ModelRequest
from orchestrator.models.scripted import FunctionModel
from orchestrator.runtime.embedded import embedded_runtime
from tests.orchestrator.hooks.support import handler, script, write_hooks

pytestmark = pytest.mark.anyio

REASON = "run the tests before you finish"


def said(request: ModelRequest) -> str:
    return " ".join(b.text for m in request.messages if m.role == "user" for b in m.content if isinstance(b, TextBlock))


async def test_a_resume_after_a_stop_hook_sent_the_run_on_continues_from_its_reason(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    once = tmp_path / "blocked-once"
    body = (
        "import json, os, sys\n"
        f"if not os.path.exists({str(once)!r}):\n"
        f"    open({str(once)!r}, 'w').close()\n"
        f"    print(json.dumps({{'decision': 'block', 'reason': {REASON!r}}}))\n"
    )
    write_hooks(home / "hooks.json", {"Stop": [{"hooks": [handler(script(tmp_path, "stop", body))]}]})
    requests: list[ModelRequest] = []

    def answer(request: ModelRequest) -> dict[str, Any]:
        requests.append(request)
        if REASON not in said(request):
            return {"text": "All done."}
        if len(requests) == 2:
            return {"text": "never seen: Loom stops first", "delay_s": 60}
        return {"text": "Tests pass; done."}

    model = FunctionModel(answer, name="stop-resume")
    config = LoomConfig(shell=ShellOptions(sandbox="off"))
    async with embedded_runtime(home, config=config) as runtime:
        async with runtime.open_session(work, model, headless=True) as session:
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.run, "fix it")
                with anyio.fail_after(20):
                    while True:
                        if len(requests) == 2:
                            break
                        await anyio.sleep(0.02)
                session.stopping = "Loom is shutting down"
                tg.cancel_scope.cancel()
            session_id = session.id
    async with embedded_runtime(home, config=config) as runtime:
        run = (await runtime.log.store.list_runs(limit=1))[0]
        assert run.status == "interrupted"
        async with runtime.open_session(work, model, session_id=session_id, headless=True) as session:
            result = await session.resume(run.id)
            events = await runtime.log.store.read_events(session_id)
            live = list(session.history)
    # Not "All done.": the hook had refused that answer, so the resumed run asks the model again from its reason.
    assert (result.status, result.final_text) == ("completed", "Tests pass; done.")
    assert REASON in said(requests[-1])
    assert len([e for e in events if isinstance(e, HookRan) and e.context]) == 1
    assert rebuild_history(events) == live
