"""A fake OpenAI Chat Completions API speaking the real streaming wire format.

``POST /v1/chat/completions`` answers with ``text/event-stream`` of ``data: {chat.completion.chunk}``
lines: a role chunk, content deltas, tool-call deltas (id, type and name in the first one for each
index, then argument pieces), a chunk with ``finish_reason``, a usage chunk with empty ``choices``
(when ``stream_options.include_usage`` was asked for) and ``data: [DONE]``. Errors use the real
``{"error": {"message", "type", "param", "code"}}`` body, in-stream errors a ``data: {"error": ...}``
line. Point ``OpenAICompatModel(base_url=fake.base_url)`` at it; ``base_url`` ends in ``/v1``.
"""

from __future__ import annotations

import json
import time
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
    Truncated,
    chunks,
)
from tests.orchestrator.models.live_server import serve

# (type, code) as OpenAI sends them for each status.
ERROR_SHAPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", "service_unavailable"),
}
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter"}


def _data(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {text}\n\n".encode()


class FakeOpenAI(ScriptedFake):
    """Scriptable fake of ``POST /v1/chat/completions`` (streaming only, as our client uses)."""

    def __init__(self) -> None:
        super().__init__()
        self.app = Starlette(routes=[Route("/v1/chat/completions", self._completions, methods=["POST"])])

    async def _completions(self, request: Request) -> Response:
        recorded, action = await self.record(request)
        if self.api_key is not None and recorded.headers.get("authorization") != f"Bearer {self.api_key}":
            return self._error(HttpError(401, "Incorrect API key provided."))
        if action is None:
            return self._error(HttpError(400, "fake_openai: no scripted response left"))
        if isinstance(action, HttpError):
            return self._error(action)
        body = recorded.body if isinstance(recorded.body, dict) else {}
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if isinstance(action, Reply) and action.delay_s:
            await anyio.sleep(action.delay_s)
        return StreamingResponse(
            self._events(action, str(body.get("model", "gpt-fake")), include_usage),
            media_type="text/event-stream",
            headers={"x-request-id": self.next_id("req_")},
        )

    def _error(self, error: HttpError) -> JSONResponse:
        error_type, code = ERROR_SHAPES.get(error.status, ("server_error", None))
        body = {
            "error": {"message": error.message, "type": error.error_type or error_type, "param": None, "code": code}
        }
        headers = {"retry-after": error.retry_after} if error.retry_after is not None else None
        return JSONResponse(body, status_code=error.status, headers=headers)

    async def _events(self, action: Action, model: str, include_usage: bool) -> AsyncIterator[bytes]:
        for event in self._render(action, model, include_usage):
            yield event
            await anyio.lowlevel.checkpoint()

    def _render(self, action: Action, model: str, include_usage: bool) -> Iterator[bytes]:
        chunk_id = self.next_id("chatcmpl-")
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            payload: dict[str, Any] = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            if include_usage:
                payload["usage"] = None
            return _data(payload)

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        if isinstance(action, StreamError | Truncated):
            for piece in chunks(action.text_before, 4) if action.text_before else ():
                yield chunk({"content": piece})
            if isinstance(action, StreamError):
                yield _data(
                    {"error": {"message": action.message, "type": action.error_type, "param": None, "code": None}}
                )
            return
        assert isinstance(action, Reply)
        call_index = 0
        for block in action.blocks:
            if isinstance(block, Text):
                for piece in chunks(block.text, action.chunk_size):
                    yield chunk({"content": piece})
                continue
            call_id = block.id or self.next_id("call_")
            # Without an index a server tells calls apart by the id that opens each one.
            where: dict[str, Any] = {"index": call_index} if action.call_index else {}
            head = {**where, "id": call_id, "type": "function"}
            yield chunk({"tool_calls": [{**head, "function": {"name": block.name, "arguments": ""}}]})
            for piece in chunks(block.wire_input(), action.chunk_size):
                yield chunk({"tool_calls": [{**where, "function": {"arguments": piece}}]})
            call_index += 1
        stop = action.effective_stop_reason()
        yield chunk({}, FINISH_REASONS.get(stop, stop))
        if include_usage:
            usage = {
                "prompt_tokens": action.input_tokens,
                "completion_tokens": action.output_tokens,
                "total_tokens": action.input_tokens + action.output_tokens,
            }
            yield _data(
                {
                    "id": chunk_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "system_fingerprint": "fp_fake",
                    "choices": [],
                    "usage": usage,
                }
            )
        yield _data("[DONE]")


@contextmanager
def serve_fake_openai() -> Iterator[FakeOpenAI]:
    """Run a :class:`FakeOpenAI` under uvicorn; ``fake.base_url`` (ending in ``/v1``) is set inside."""
    fake = FakeOpenAI()
    with serve(fake.app) as origin:
        fake.base_url = f"{origin}/v1"
        yield fake
