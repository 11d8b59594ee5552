"""A fake Anthropic Messages API speaking the real wire format.

``POST /v1/messages`` answers with ``text/event-stream`` in the real event sequence (message_start,
content_block_start / content_block_delta / content_block_stop with ``text_delta`` and
``input_json_delta``, message_delta with stop reason and usage, message_stop, interleaved pings), or
with the real error JSON (``{"type": "error", "error": {"type": ..., "message": ...}}``), or with an
in-stream ``event: error``. Point ``AnthropicModel(base_url=fake.base_url)`` at it.

Usage from any test::

    from tests.orchestrator.models.fake_anthropic import FakeAnthropic, serve_fake_anthropic
    from tests.orchestrator.models.fake_common import HttpError, text_reply

    with serve_fake_anthropic() as fake:
        fake.script(HttpError(429), text_reply("hello"))
        ...  # AnthropicModel("claude-x", api_key="k", base_url=fake.base_url)
        assert fake.requests[-1].body["system"] == "..."
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.orchestrator.models.fake_common import (
    Action,
    HttpError,
    Reply,
    ScriptedFake,
    StreamError,
    Text,
    ToolCall,
    Truncated,
    chunks,
)
from tests.orchestrator.models.live_server import serve

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class FakeAnthropic(ScriptedFake):
    """Scriptable fake of ``POST /v1/messages`` (streaming only, as our client uses)."""

    def __init__(self) -> None:
        super().__init__()
        self.app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    async def _messages(self, request: Request) -> Response:
        recorded, action = await self.record(request)
        if self.api_key is not None:
            sent = recorded.headers.get("x-api-key") or recorded.headers.get("authorization", "").removeprefix(
                "Bearer "
            )
            if sent != self.api_key:
                return self._error(HttpError(401, "invalid x-api-key"))
        if action is None:
            return self._error(HttpError(400, "fake_anthropic: no scripted response left"))
        if isinstance(action, HttpError):
            return self._error(action)
        model = recorded.body.get("model", "claude-fake") if isinstance(recorded.body, dict) else "claude-fake"
        if isinstance(action, Reply) and action.delay_s:
            await anyio.sleep(action.delay_s)
        return StreamingResponse(
            self._events(action, model),
            media_type="text/event-stream",
            headers={"request-id": self.next_id("req_"), "cache-control": "no-cache"},
        )

    def _error(self, error: HttpError) -> JSONResponse:
        error_type = error.error_type or ERROR_TYPES.get(error.status, "api_error")
        request_id = self.next_id("req_")
        headers = {"request-id": request_id}
        if error.retry_after is not None:
            headers["retry-after"] = error.retry_after
        body = {"type": "error", "error": {"type": error_type, "message": error.message}, "request_id": request_id}
        return JSONResponse(body, status_code=error.status, headers=headers)

    async def _events(self, action: Action, model: str) -> AsyncIterator[bytes]:
        # A real stream flushes events one by one; yielding per event keeps that shape.
        for event in self._render(action, model):
            yield event
            await anyio.lowlevel.checkpoint()

    def _render(self, action: Action, model: str) -> Iterator[bytes]:
        reply = action if isinstance(action, Reply) else None
        yield _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": self.next_id("msg_"),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": reply.input_tokens if reply else 5,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                    },
                },
            },
        )
        yield _sse("ping", {"type": "ping"})
        if isinstance(action, StreamError | Truncated):
            if action.text_before:
                yield from self._text_block(0, action.text_before, 4)
            if isinstance(action, StreamError):
                yield _sse("error", {"type": "error", "error": {"type": action.error_type, "message": action.message}})
            return
        assert isinstance(action, Reply)
        for index, block in enumerate(action.blocks):
            if isinstance(block, Text):
                yield from self._text_block(index, block.text, action.chunk_size)
            else:
                yield from self._tool_block(index, block, action.chunk_size)
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": action.effective_stop_reason(), "stop_sequence": None},
                "usage": {"output_tokens": action.output_tokens},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})

    def _text_block(self, index: int, text: str, size: int) -> Iterator[bytes]:
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        )
        for piece in chunks(text, size):
            yield _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})

    def _tool_block(self, index: int, call: ToolCall, size: int) -> Iterator[bytes]:
        block = {"type": "tool_use", "id": call.id or self.next_id("toolu_"), "name": call.name, "input": {}}
        yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
        # The real API opens with an empty partial_json before the pieces.
        for piece in ["", *chunks(call.wire_input(), size)]:
            yield _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                },
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})


@contextmanager
def serve_fake_anthropic() -> Iterator[FakeAnthropic]:
    """Run a :class:`FakeAnthropic` under uvicorn; ``fake.base_url`` is set inside the block."""
    fake = FakeAnthropic()
    with serve(fake.app) as origin:
        fake.base_url = origin
        yield fake
