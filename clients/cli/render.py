"""How events look on a terminal (and as NDJSON)."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from clients.long_work_lines import goal_line, notice_line, todo_changes
from clients.server_rows import plain, server_event_line
from clients.timeline import child_label, first_line
from orchestrator.events import (
    AssistantMessage,
    ChildActivity,
    ChildFinished,
    ChildStarted,
    ContextCompacted,
    ContextWatermark,
    Event,
    ModelRetry,
    ModelSwitched,
    Notice,
    QuestionAnswered,
    QuestionAsked,
    RunFinished,
    ServerFailed,
    ServerLog,
    ServerStateChanged,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from orchestrator.events_long import GoalFinished, GoalSessionStarted, GoalStarted, GoalVerdict, TodoItem, TodoUpdated

_ARGS_WIDTH = 90
_ERROR_WIDTH = 200


class JsonRenderer:
    """One JSON object per line, every event, flushed as it comes."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stdout

    def __call__(self, event: Event) -> None:
        """Print one event."""
        self._out.write(event.model_dump_json() + "\n")
        self._out.flush()


class TerminalRenderer:
    """Streamed assistant text on stdout, one line per tool call, status lines on stderr."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self._mid_line = False
        self._arguments: dict[str, dict[str, object]] = {}
        self._streamed: tuple[str, int] | None = None
        """The (run, step) whose text arrived as deltas; stored events alone (attach) carry none."""
        self._watermark: ContextWatermark | None = None
        self._warned = False
        self._agents: dict[str, str] = {}
        """child_session_id -> its agent, from its child_started (later lines about it name it too)."""
        self._plan: list[TodoItem] = []
        """The model's plan as last printed: an update prints what changed in it."""

    def __call__(self, event: Event) -> None:
        """Print one event."""
        if isinstance(event, TextDelta):
            self._streamed = (event.run_id, event.step)
            self._out.write(event.text)
            self._mid_line = not event.text.endswith("\n")
            self._out.flush()
        elif isinstance(event, AssistantMessage):
            if self._streamed != (event.run_id, event.step) and event.message.text:
                self._out.write(event.message.text)
                self._mid_line = not event.message.text.endswith("\n")
            self._end_line()
            # Calls refused before they start (unknown tool, bad arguments, server down) get no
            # ToolCallStarted; their arguments come from the message so that their line shows them too.
            for use in event.message.tool_uses:
                self._arguments[use.id] = use.input
        elif isinstance(event, ToolCallStarted):
            self._arguments[event.call_id] = event.arguments
        elif isinstance(event, ToolCallFinished):
            self._end_line()
            self._out.write(_tool_line(event, self._arguments.pop(event.call_id, None)) + "\n")
            self._out.flush()
        elif isinstance(event, Notice):
            self._status(f"{event.level}: {event.text}" if event.level != "info" else event.text)
        elif isinstance(event, ModelRetry):
            self._status(f"model error, retrying in {event.delay_s:.1f}s (attempt {event.attempt}): {event.error}")
        elif isinstance(event, ServerFailed):
            self._status(f"warning: MCP server {event.server!r} is unavailable: {event.error}")
        elif isinstance(event, ServerStateChanged | ServerLog):
            line = server_event_line(event)
            if line is not None:
                self._status(line[0] if line[1] == "info" else f"{line[1]}: {line[0]}")
        elif isinstance(event, QuestionAsked | QuestionAnswered):
            self._status(question_line(event))
        elif isinstance(event, ContextWatermark):
            self._watermark = event
            near = event.ratio >= event.threshold - 0.1
            if near and not self._warned:  # once, on the way up: every step would drown the output
                self._status(f"context {watermark_text(event)}; it compacts at {event.threshold:.0%}")
            self._warned = near
        elif isinstance(event, ContextCompacted):
            self._status(
                f"context compacted ({event.trigger}): {event.tokens_before:,} → {event.tokens_after:,} tokens; "
                f"{event.dropped_messages} messages ({event.dropped_tool_calls} tool calls) replaced by a summary"
            )
        elif isinstance(event, ModelSwitched):
            self._status(f"model switched to {event.model} (window {event.window:,} tokens)")
        elif isinstance(event, ChildStarted | ChildActivity | ChildFinished):
            self._status(self.child_line(event))
        elif isinstance(event, RunFinished):
            self._end_line()
            if self._watermark is not None:
                self._status(f"context {watermark_text(self._watermark)}")
            self._status(_finish_line(event))
        else:
            self._long_work(event)

    def _long_work(self, event: Event) -> None:
        """The plan's changes, a goal's progress, hooks that did something, loops, handoffs, memory carried over."""
        if isinstance(event, TodoUpdated):
            for line in todo_changes(self._plan, event.items):
                self._status(line)
            self._plan = list(event.items)
        elif isinstance(event, GoalStarted | GoalSessionStarted | GoalVerdict | GoalFinished):
            lines, level = goal_line(event)
            self._status(lines[0] if level == "info" else f"{level}: {lines[0]}")
            for line in lines[1:]:
                self._status(line)
        elif (found := notice_line(event)) is not None:
            text, level = found
            self._status(text if level == "info" else f"{level}: {text}")

    def child_line(self, event: ChildStarted | ChildActivity | ChildFinished) -> str:
        """One short line about a child: its start and goal, a tool it called, or its end with why and its answer."""
        if isinstance(event, ChildStarted):
            self._agents[event.child_session_id] = event.agent
        who = child_label(self._agents.get(event.child_session_id, ""), event.child_session_id)
        if isinstance(event, ChildStarted):
            return f"{who} started: {first_line(event.goal)}"
        if isinstance(event, ChildActivity):
            return f"{who} step {event.step}: {event.tool}"
        steps = f"{event.steps} step{'s' if event.steps != 1 else ''}, {event.elapsed_s:.1f}s"
        if event.status == "completed":
            answer = first_line(event.final_text)
            return f"{who} completed ({steps})" + (f": {answer}" if answer else "")
        return f"{who} {event.status} ({steps}): {first_line(event.reason, 200)}"

    def _end_line(self) -> None:
        if self._mid_line:
            self._out.write("\n")
            self._out.flush()
            self._mid_line = False

    def _status(self, text: str) -> None:
        self._end_line()
        self._err.write(f"loom: {text}\n")
        self._err.flush()


def question_line(event: QuestionAsked | QuestionAnswered) -> str:
    """A server's question and how to answer it, or how it was answered (what the server wrote made safe to print)."""
    if isinstance(event, QuestionAnswered):
        why = f": {plain(event.reason, 300)}" if event.reason else ""
        done = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}[event.action]
        return f"question {event.question_id} {done} by {plain(event.answered_by, 100)}{why}"
    if event.mode == "url":
        asked = (
            f"{first_line(event.message, 200)} — open {plain(event.url, 500)} yourself, then answer accept (or decline)"
        )
    else:
        fields = event.requested_schema.get("properties")
        names = plain(", ".join(fields), 200) if isinstance(fields, dict) else ""
        asked = f"{first_line(event.message, 200)} (fields: {names or 'none'})"
    how = f"loom answer {event.question_id} accept --content '{{\"field\": ...}}' | decline"
    return f"{plain(event.server, 100)} asks: {asked}; answer with `{how}` (or the face tool answer_question)"


def _tool_line(event: ToolCallFinished, arguments: dict[str, object] | None) -> str:
    mark = "✗" if event.is_error else "✓"
    args = f" {format_arguments(arguments)}" if arguments else ""
    line = f"  {mark} {event.tool}{args} ({event.duration_ms:.0f} ms)"
    line += "".join(f" [{part.summary}]" for part in event.attachments)  # what the line's text cannot show
    if event.is_error:
        line += f" → {error_text(event)}"
    return line


def error_text(event: ToolCallFinished) -> str:
    """What a failed call's line shows of its result.

    A policy denial is shown whole: its last sentence says how to allow the call, which is what the
    user needs. Any other error shows its first line, up to ``_ERROR_WIDTH`` characters; whatever is
    left out is marked with ``…`` (``loom export RUN`` has the whole result).
    """
    text = event.content.strip()
    if not text:
        return "error"
    if event.failure == "denied":
        return " ".join(text.split())
    lines = text.splitlines()
    first = lines[0].rstrip()
    if len(first) > _ERROR_WIDTH:
        return first[: _ERROR_WIDTH - 1] + "…"
    return f"{first} …" if len(lines) > 1 else first


def _finish_line(event: RunFinished) -> str:
    steps = f"{event.steps} step{'s' if event.steps != 1 else ''}"
    if event.status == "completed":
        return f"run {event.run_id} completed in {steps}"
    return f"run {event.run_id} {event.status} after {steps}: {event.reason}"


def watermark_text(event: ContextWatermark) -> str:
    """``12% (24,100 / 200,000 tokens)``."""
    return f"{event.ratio:.0%} ({event.used_tokens:,} / {event.window:,} tokens)"


def format_arguments(arguments: dict[str, object]) -> str:
    """Compact one-line JSON of tool arguments, cut to fit a terminal line."""
    text = json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= _ARGS_WIDTH else text[: _ARGS_WIDTH - 1] + "…"
