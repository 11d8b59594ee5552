"""Reading an OpenAI-compatible ``chat.completion.chunk`` stream: live deltas, then the whole response.

Below it are the SSE lines :class:`~orchestrator.models.openai_compat.OpenAICompatModel` reads from the
server; above it, the :class:`~orchestrator.models.base.ModelEvent` stream the loop consumes. Servers
differ in how they cut tool calls (OpenAI sends the id and name first, then argument pieces, each with
its ``index``; Ollama sends whole calls without one), so the assembler numbers calls itself.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from orchestrator.messages import Message, TextBlock, ToolUseBlock, Usage
from orchestrator.models.base import (
    ModelError,
    ModelResponse,
    StopReason,
    TextDelta,
    ToolCallDelta,
    parse_tool_input,
)

__all__ = ["ChunkAssembler", "error_fields"]

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class ChunkAssembler:
    """Builds the final response from SSE lines of ``chat.completion.chunk`` objects.

    Tool calls are kept in the order the stream opens them; that order is each call's ``index`` in the
    :class:`ToolCallDelta` pieces and its place in the response, so the two always agree.
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _PendingCall] = {}
        """The server's index (or ours, where it sends none) -> the call, in the order the stream opened them."""
        self._finish_reason: str | None = None
        self._usage = Usage()
        self._refused = False
        self.done = False
        """``data: [DONE]`` was read: nothing more will come."""

    def feed_line(self, line: str) -> list[TextDelta | ToolCallDelta]:
        """Take one SSE line; return the live deltas it carries, in order (text before tool calls).

        Raises:
            ModelError: an unparseable chunk or an in-stream error (transient).
        """
        if not line.startswith("data:"):
            # Blank separators, ``event:``/``id:`` fields and ``:`` keep-alive comments.
            return []
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return []
        if not data:
            return []
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ModelError(f"openai: unparseable stream chunk: {data[:200]!r}", transient=True) from exc
        if not isinstance(chunk, dict):
            return []
        if chunk.get("error"):
            label, message = error_fields(chunk)
            raise ModelError(f"openai: stream error {label}: {message}", transient=True)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            )
        text = ""
        calls: list[TextDelta | ToolCallDelta] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text += delta["content"]
            if isinstance(delta.get("refusal"), str) and delta["refusal"]:
                # OpenAI streams a refusal in its own field; to the user it is the answer text.
                self._refused = True
                text += delta["refusal"]
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    piece = self._feed_call(call)
                    if piece is not None:
                        calls.append(piece)
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        self._text.append(text)
        return [TextDelta(text), *calls] if text else calls

    def _feed_call(self, call: dict[str, Any]) -> ToolCallDelta | None:
        index = call.get("index")
        if not isinstance(index, int):
            # Some servers omit the index: a new id starts a call, anything else continues the last.
            call_id = call.get("id")
            same = [i for i, c in self._calls.items() if call_id and c.id == call_id]
            if same:
                index = same[0]
            elif call_id or not self._calls:
                index = max(self._calls, default=-1) + 1
            else:
                index = max(self._calls)
        pending = self._calls.get(index)
        opened = pending is None
        if pending is None:
            pending = self._calls[index] = _PendingCall(len(self._calls))
        new_id = _text(call.get("id"))
        if new_id == pending.id:
            new_id = ""
        elif new_id:
            pending.id = new_id
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        new_name = _text(function.get("name"))
        if new_name == pending.name:
            new_name = ""
        elif new_name:
            pending.name = new_name
        piece = _text(function.get("arguments"))
        if piece:
            pending.arguments.append(piece)
        if not (opened or new_id or new_name or piece):
            return None  # a chunk that repeats what we have (some servers resend the id with every piece)
        return ToolCallDelta(pending.position, piece, call_id=new_id, name=new_name)

    def response(self) -> ModelResponse:
        """The whole assistant message, once the stream has ended.

        Raises:
            ModelError: the stream ended before a ``finish_reason`` (transient), or a tool call has no
                name or arguments that are not a JSON object (permanent).
        """
        if self._finish_reason is None:
            # A cut connection ends the body early; the message is partial.
            raise ModelError("openai: stream ended before a finish_reason", transient=True)
        content: list[TextBlock | ToolUseBlock] = []
        text = "".join(self._text)
        if text:
            content.append(TextBlock(text=text))
        content.extend(call.finish() for call in self._calls.values())
        stop_reason = "refusal" if self._refused else _FINISH_REASONS.get(self._finish_reason, "other")
        if content and isinstance(content[-1], ToolUseBlock) and stop_reason == "end_turn":
            # Some servers (older Ollama among them) report "stop" even when they made tool calls.
            stop_reason = "tool_use"
        return ModelResponse(
            message=Message(role="assistant", content=list(content)), stop_reason=stop_reason, usage=self._usage
        )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


class _PendingCall:
    def __init__(self, position: int) -> None:
        self.position = position
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []

    def finish(self) -> ToolUseBlock:
        # Tool results are matched to calls by id, so a call without one gets one.
        call_id = self.id or f"call_{uuid.uuid4().hex[:24]}"
        raw = "".join(self.arguments)
        if not self.name:
            raise ModelError(f"openai: tool call {call_id} has no function name", transient=False)
        arguments = parse_tool_input("openai", self.name, call_id, raw, what="arguments")
        return ToolUseBlock(id=call_id, name=self.name, input=arguments)


def error_fields(body: object) -> tuple[str, str]:
    """``(label, message)`` from an error body: OpenAI's shape and the common variants."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, str):
            return "error", error
        if isinstance(error, dict):
            label = error.get("code") or error.get("type") or "error"
            message = error.get("message") or error.get("detail") or json.dumps(error)
            return str(label), str(message)
    return "error", json.dumps(body)
