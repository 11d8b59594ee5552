"""Firing one hook event: the matching handlers run concurrently, each run is a ``hook_ran`` event.

:class:`Firing` is what :mod:`orchestrator.hooks.session` builds each event's payload with and reads the
decisions of; it neither stores events nor knows the loop, so each caller can place the events where a
rebuilt history expects them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from orchestrator.events_long import HookRan
from orchestrator.hooks.config import HookEvent, HookHandler
from orchestrator.hooks.decisions import Decision, decide
from orchestrator.hooks.runner import run_command

__all__ = ["CLAUDE_MODES", "Fired", "fire"]

CLAUDE_MODES = {"ask": "default", "accept-edits": "acceptEdits", "plan": "plan", "bypass": "bypassPermissions"}
"""Loom's modes as Claude Code's ``permission_mode`` names them."""
_EVENT_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Fired:
    """One handler's run: what it decided and its event (not yet stored)."""

    handler: HookHandler
    decision: Decision
    event: HookRan


async def fire(
    event: HookEvent,
    handlers: Sequence[HookHandler],
    payload: Callable[[HookHandler], Mapping[str, Any]],
    *,
    session_id: str,
    cwd: Path,
    run_id: str | None = None,
    call_id: str = "",
    tool: str = "",
    adjust: Callable[[HookHandler, Decision], Decision] | None = None,
) -> list[Fired]:
    """Run every handler at once with its payload; results come back in configuration order.

    ``adjust`` may rework a handler's decision before it is recorded (a Claude-shaped ``updatedInput`` translated
    back to Loom's arguments).
    """
    results: list[Fired | None] = [None] * len(handlers)

    async def one(i: int, handler: HookHandler) -> None:
        data = json.dumps(payload(handler), default=str).encode()
        ran = await run_command(handler.command, data, cwd=str(cwd), project=str(cwd), timeout_s=handler.timeout_s)
        decision = decide(event, handler, ran)
        if adjust is not None:
            decision = adjust(handler, decision)
        record = HookRan(
            session_id=session_id,
            run_id=run_id,
            hook_event=event,
            matcher=handler.matcher,
            command=handler.command[:500],
            source=handler.source,
            call_id=call_id,
            tool=tool,
            exit_code=ran.exit_code,
            duration_ms=ran.duration_ms,
            outcome=decision.outcome,
            reason=decision.reason[:_EVENT_CHARS],
            system_message=decision.system_message[:_EVENT_CHARS],
        )
        results[i] = Fired(handler, decision, record)

    if len(handlers) == 1:
        await one(0, handlers[0])
    else:
        async with anyio.create_task_group() as tg:
            for i, handler in enumerate(handlers):
                tg.start_soon(one, i, handler)
    return [r for r in results if r is not None]


def with_context(fired: Fired, text: str) -> Fired:
    """``fired`` whose event records ``text`` as given to the model."""
    return replace(fired, event=fired.event.model_copy(update={"context": text}))
