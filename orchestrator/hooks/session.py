"""A session's hooks: what the loop and the session call at each hook event, and what they do with the answers.

One :class:`SessionHooks` per open session, built only when some hooks file has handlers (a session without
hooks has ``None``, so the loop pays one ``is None`` check per call site). Every handler run is a ``hook_ran``
event; one that gave the model text records that text (``context``), and is stored where a rebuilt history puts
it: after the tool results (PostToolUse), in the user's turn (UserPromptSubmit), as the user-side turn that sends
the run on (Stop).

Decisions on tool calls combine with policy as docs/long-work.md ("Hooks") says: a hook's deny refuses the call,
its ask asks even where policy allows, its allow leaves the call to policy (a policy deny or ask, a child's bounds
and the protected paths still hold), and its ``updatedInput`` replaces the arguments, which are then validated
against the tool's schema and decided by policy as rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.events import Event, Notice, UserMessage
from orchestrator.hooks.config import HookEvent, HookHandler, HooksConfig
from orchestrator.hooks.decisions import Decision, combine
from orchestrator.hooks.firing import CLAUDE_MODES, Fired, fire, with_context
from orchestrator.hooks.names import ToolNames, from_claude, to_claude, tool_names
from orchestrator.hooks.transcript import Transcript
from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from orchestrator.store.eventlog import EventLog

if TYPE_CHECKING:
    from orchestrator.hub.pool import HubTool
    from orchestrator.loop.approvals import Verdict
    from orchestrator.loop.loop import LoopResult, RunContext

__all__ = ["MAX_STOP_CONTINUATIONS", "PreToolVerdict", "SessionHooks"]

MAX_STOP_CONTINUATIONS = 3
"""How many times Stop hooks may send one run on before its end is let through."""
SESSION_END_CAP_S = 10.0
"""SessionEnd hooks run while the session closes (a shutdown waits for them): at most this long."""
_RESPONSE_CHARS = 50_000


@dataclass(frozen=True, slots=True)
class PreToolVerdict:
    """What PreToolUse hooks said about one call."""

    permission: str | None
    """``allow``, ``deny``, ``ask`` or None (nothing said)."""
    reason: str

    def over(self, verdict: Verdict, why: str, headless: bool) -> tuple[Verdict, str]:
        """Policy's ``(verdict, why)`` for the call as the hooks' answer changes it (never more freely)."""
        if self.permission == "deny":
            return "deny", f"denied by a PreToolUse hook: {self.reason or 'no reason given'}"
        if verdict == "deny" or self.permission != "ask":
            return verdict, why  # allow (or nothing) leaves the call to policy, asks included
        asked = f"a PreToolUse hook asks for approval: {self.reason or 'no reason given'}"
        if headless:
            return "deny", f"denied: {asked}; this run is headless, so nobody can approve the call"
        return "ask", f"{asked}; {why}" if verdict == "ask" and why else asked


class SessionHooks:
    """The hooks of one session."""

    def __init__(
        self,
        config: HooksConfig,
        *,
        session_id: str,
        cwd: Path,
        log: EventLog,
        child: bool = False,
        mode: Callable[[], str] = lambda: "ask",
        max_continuations: int = MAX_STOP_CONTINUATIONS,
        transcript: Transcript | None = None,
    ) -> None:
        self.config = config
        self.session_id = session_id
        self.cwd = cwd
        self.log = log
        self.child = child
        self.mode = mode
        """The session's mode now (it can change between runs)."""
        self.max_continuations = max_continuations
        self.transcript = transcript
        """Where hooks read the conversation (``transcript_path``); None gives them ``""``."""
        self.session_context = ""
        """What SessionStart hooks gave the model: added to the system prompt of this open session."""
        self._continued: dict[str, int] = {}
        self._events = {event: bool(config.of(event)) for event in ("UserPromptSubmit", "Stop", "SubagentStop")}

    def has(self, event: HookEvent) -> bool:
        """Whether any handler is configured for ``event``."""
        return self._events.get(event, bool(self.config.of(event)))

    def _base(self, event: HookEvent, transcript: str) -> dict[str, Any]:
        mode = self.mode()
        return {
            "session_id": self.session_id,
            "transcript_path": transcript,
            "cwd": str(self.cwd),
            "hook_event_name": event,
            "permission_mode": CLAUDE_MODES.get(mode, mode),
            "loom_mode": mode,
        }

    async def _fire(
        self,
        event: HookEvent,
        handlers: tuple[HookHandler, ...],
        extra: Callable[[HookHandler], Mapping[str, Any]] | Mapping[str, Any],
        *,
        run_id: str | None = None,
        call_id: str = "",
        tool: str = "",
        adjust: Callable[[HookHandler, Decision], Decision] | None = None,
    ) -> list[Fired]:
        transcript = await self.transcript.refresh() if self.transcript is not None else ""

        def payload(handler: HookHandler) -> Mapping[str, Any]:
            more = extra(handler) if callable(extra) else extra
            return {**self._base(event, transcript), **more}

        return await fire(
            event,
            handlers,
            payload,
            session_id=self.session_id,
            cwd=self.cwd,
            run_id=run_id,
            call_id=call_id,
            tool=tool,
            adjust=adjust,
        )

    # -- tool calls ------------------------------------------------------------------------------------------

    def _claude_shaped(self, handler: HookHandler, names: ToolNames) -> bool:
        if names.claude_form() == names.loom:
            return False
        pattern = handler.pattern
        return pattern is None or any(pattern.fullmatch(n) for n in (names.claude, names.mcp) if n)

    def _tool_payload(self, handler: HookHandler, names: ToolNames, use: ToolUseBlock) -> dict[str, Any]:
        claude = self._claude_shaped(handler, names)
        shaped = to_claude(use.name, use.input, str(self.cwd)) if claude and names.claude else dict(use.input)
        return {
            "tool_name": names.claude_form() if claude else names.loom,
            "tool_input": shaped,
            "tool_use_id": use.id,
            "loom_tool_name": use.name,
            "loom_tool_input": use.input,
        }

    async def pre_tool(self, ctx: RunContext, use: ToolUseBlock, tool: HubTool) -> tuple[ToolUseBlock, PreToolVerdict]:
        """Fire PreToolUse for one call; returns the call (rewritten if a hook said so) and what the hooks said.

        The events are stored before returning, so that a hook's decision is on record before the call is.
        """
        names = tool_names(use.name, tool.server, tool.remote_name)
        handlers = tuple(h for h in self.config.of("PreToolUse") if h.matches(names.all()))
        if not handlers:
            return use, PreToolVerdict(None, "")

        def back(handler: HookHandler, decision: Decision) -> Decision:
            if decision.updated_input is None or not (self._claude_shaped(handler, names) and names.claude):
                return decision
            return replace(decision, updated_input=from_claude(use.name, decision.updated_input))

        fired = await self._fire(
            "PreToolUse",
            handlers,
            lambda h: self._tool_payload(h, names, use),
            run_id=ctx.run_id,
            call_id=use.id,
            tool=use.name,
            adjust=back,
        )
        await self.log.append(*_records(fired))
        decided = combine([f.decision for f in fired])
        if decided.updated_input is not None and not decided.block:
            use = use.model_copy(update={"input": decided.updated_input})
        return use, PreToolVerdict(decided.permission, decided.reason)

    async def permission(self, ctx: RunContext, use: ToolUseBlock, reason: str) -> tuple[bool, str] | None:
        """Fire PermissionRequest for a call about to be asked about: ``(allowed, message)``, or None to ask.

        A change to Loom's own configuration (a protected path) is always left to a person.
        """
        tool = ctx.hub.tool(use.name)
        if tool is None or ctx.approvals is None:
            return None
        if ctx.approvals.bounds.decide(use.name, tool.annotations, use.input).protected:
            return None
        names = tool_names(use.name, tool.server, tool.remote_name)
        handlers = tuple(h for h in self.config.of("PermissionRequest") if h.matches(names.all()))
        if not handlers:
            return None

        def payload(handler: HookHandler) -> dict[str, Any]:
            return {**self._tool_payload(handler, names, use), "loom_reason": reason}

        fired = await self._fire(
            "PermissionRequest", handlers, payload, run_id=ctx.run_id, call_id=use.id, tool=use.name
        )
        await self.log.append(*_records(fired))
        decided = combine([f.decision for f in fired])
        if decided.permission == "deny":
            return False, f"denied by a PermissionRequest hook: {decided.reason or 'no reason given'}"
        if decided.permission == "allow":
            return True, ""
        return None

    async def post_tools(
        self, ctx: RunContext, ran: list[ToolUseBlock], results: list[ToolResultBlock | TextBlock]
    ) -> list[TextBlock]:
        """Fire PostToolUse for each call that ran; returns the text the model gets after the results."""
        handlers = self.config.of("PostToolUse")
        if not handlers or not ran:
            return []
        by_id = {r.tool_use_id: r for r in results if isinstance(r, ToolResultBlock)}
        fired_by_call: list[list[Fired]] = [[] for _ in ran]

        async def one(i: int, use: ToolUseBlock) -> None:
            tool = ctx.hub.tool(use.name)
            names = tool_names(use.name, tool.server if tool else "", tool.remote_name if tool else use.name)
            matching = tuple(h for h in handlers if h.matches(names.all()))
            if not matching:
                return
            result = by_id.get(use.id)
            response = {
                "content": (result.content if result else "")[:_RESPONSE_CHARS],
                "is_error": bool(result and result.is_error),
            }

            def payload(handler: HookHandler) -> dict[str, Any]:
                return {**self._tool_payload(handler, names, use), "tool_response": response}

            fired_by_call[i] = await self._fire(
                "PostToolUse", matching, payload, run_id=ctx.run_id, call_id=use.id, tool=use.name
            )

        async with anyio.create_task_group() as tg:
            for i, use in enumerate(ran):
                tg.start_soon(one, i, use)
        told: list[Fired] = []
        for use, fired in zip(ran, fired_by_call, strict=True):
            for f in fired:
                text = _post_text(use.name, f.decision)
                told.append(with_context(f, text) if text else f)
        await self.log.append(*_records(told))
        return [TextBlock(text=f.event.context) for f in told if f.event.context]

    # -- prompts and ends ----------------------------------------------------------------------------------------

    async def submit_prompt(self, ctx: RunContext, text: str) -> tuple[LoopResult | None, list[TextBlock]]:
        """Fire UserPromptSubmit. Stores the user's message (unless blocked) with the hooks' events after it.

        Returns:
            The run's end when a hook blocked the prompt (it never reaches the model, nor the store), else None;
            and the text blocks the hooks added to the user's turn.
        """
        from orchestrator.loop.loop import LoopResult

        fired = await self._fire(
            "UserPromptSubmit", self.config.of("UserPromptSubmit"), {"prompt": text}, run_id=ctx.run_id
        )
        decided = combine([f.decision for f in fired])
        if decided.block:
            await self.log.append(*_records(fired))
            return LoopResult("failed", f"blocked by a UserPromptSubmit hook: {decided.reason}", "", ctx.step), []
        told = [with_context(f, f.decision.context) if f.decision.context else f for f in fired]
        message = UserMessage(session_id=self.session_id, run_id=ctx.run_id, text=text)
        await self.log.append(message, *_records(told))
        return None, [TextBlock(text=f.event.context) for f in told if f.event.context]

    async def at_stop(self, ctx: RunContext, final_text: str) -> LoopResult | None:
        """Fire Stop (SubagentStop in a child) at the run's final answer, which is in ``ctx.unstored``.

        Returns:
            None when the run may end (the hooks' events join ``ctx.unstored``); a ``failed`` result when a hook
            failed and blocks; or a ``running`` result when a hook sent the run on: the answer and the events are
            stored and the reason is the history's new user-side turn, and the loop takes another step.
        """
        from orchestrator.loop.loop import LoopResult

        event: HookEvent = "SubagentStop" if self.child else "Stop"
        if not self.has(event):
            return None
        count = self._continued.get(ctx.run_id, 0)
        payload = {"stop_hook_active": count > 0, "loom_final_text": final_text[:_RESPONSE_CHARS]}
        fired = await self._fire(event, self.config.of(event), payload, run_id=ctx.run_id)
        decided = combine([f.decision for f in fired])
        if decided.block and decided.error:
            ctx.unstored.extend(_records(fired))
            return LoopResult("failed", decided.reason, final_text, ctx.step)
        if not decided.block:
            ctx.unstored.extend(_records(fired))
            return None
        if count >= self.max_continuations:
            ctx.unstored.extend(_records(fired))
            ctx.unstored.append(
                Notice(
                    session_id=self.session_id,
                    run_id=ctx.run_id,
                    level="warning",
                    text=f"{event} hooks sent this run on {count} times already; it ends now despite: "
                    f"{decided.reason[:500]}",
                )
            )
            return None
        self._continued[ctx.run_id] = count + 1
        told = [
            with_context(f, f"[Loom: a {event} hook did not let the run end yet] {f.decision.reason}")
            if f.decision.block
            else f
            for f in fired
        ]
        answer, ctx.unstored = ctx.unstored, []
        await self.log.append(*answer, *_records(told))
        ctx.history.append(
            Message(role="user", content=[TextBlock(text=f.event.context) for f in told if f.event.context])
        )
        return LoopResult("running", "a stop hook sent the run on", final_text, ctx.step)

    # -- the session -------------------------------------------------------------------------------------------

    async def session_start(self, source: str) -> None:
        """Fire SessionStart (``startup`` for a new session, ``resume`` for a reopened one)."""
        handlers = tuple(h for h in self.config.of("SessionStart") if h.matches((source,)))
        if not handlers:
            return
        fired = await self._fire("SessionStart", handlers, {"source": source})
        told = [
            with_context(f, f.decision.context) if f.decision.context and not f.decision.error else f for f in fired
        ]
        await self.log.append(*_records(told))
        self.session_context = "\n\n".join(f.event.context for f in told if f.event.context)

    async def session_end(self, reason: str) -> None:
        """Fire SessionEnd as the session closes; it cannot block, and it is bounded even during a shutdown."""
        handlers = self.config.of("SessionEnd")
        if not handlers:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(SESSION_END_CAP_S):
            fired = await self._fire("SessionEnd", handlers, {"reason": reason})
            await self.log.append(*_records(fired))

    async def pre_compact(self, trigger: str, focus: str, run_id: str | None) -> None:
        """Fire PreCompact (matcher ``manual`` or ``auto``); it cannot block the compaction."""
        claude = "manual" if trigger == "manual" else "auto"
        handlers = tuple(h for h in self.config.of("PreCompact") if h.matches((claude, trigger)))
        if not handlers:
            return
        payload = {"trigger": claude, "custom_instructions": focus, "loom_trigger": trigger}
        fired = await self._fire("PreCompact", handlers, payload, run_id=run_id)
        await self.log.append(*_records(fired))

    def prompt_addition(self) -> str:
        """What the system prompt gains from SessionStart hooks."""
        if not self.session_context:
            return ""
        return f"\n\n# Context from SessionStart hooks\n\n{self.session_context}"


def _records(fired: list[Fired]) -> list[Event]:
    """The runs' events, each followed by a notice for its ``systemMessage`` (for the person, not the model)."""
    records: list[Event] = []
    for f in fired:
        records.append(f.event)
        if f.decision.system_message:
            text = f"{f.event.hook_event} hook {f.handler.command[:80]!r}: {f.decision.system_message[:2000]}"
            records.append(Notice(session_id=f.event.session_id, run_id=f.event.run_id, level="info", text=text))
    return records


def _post_text(tool: str, decision: Decision) -> str:
    if decision.error and decision.block:
        return f"[Loom: a PostToolUse hook on {tool} failed] {decision.reason}"
    parts = []
    if decision.block and decision.reason:
        parts.append(f"[Loom: a PostToolUse hook on {tool} says] {decision.reason}")
    if decision.context:
        parts.append(decision.context)
    return "\n\n".join(parts)
