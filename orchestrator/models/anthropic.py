"""Anthropic Messages API provider, on the official ``anthropic`` SDK's raw event stream.

The SDK's own retries are off: :class:`~orchestrator.models.retry.RetryingModel` owns retrying, and
stacking two retry loops multiplies attempts. Errors become :class:`ModelError` with the API's own
``error.type`` and ``error.message`` in the text, classified transient or permanent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, cast, get_args

import anthropic
import httpx2  # the transport of the anthropic SDK (a dependency of it); mid-stream I/O errors escape unwrapped
from anthropic.types import (
    AssistantMessageParam,
    Base64ImageSourceParam,
    ImageBlockParam,
    InputJSONDelta,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
    UserMessageParam,
)
from anthropic.types import TextBlock as WireTextBlock
from anthropic.types import TextDelta as WireTextDelta
from anthropic.types import ToolUseBlock as WireToolUseBlock

from orchestrator.messages import Attachment, ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from orchestrator.models.base import (
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextDelta,
    ToolCallDelta,
    parse_tool_input,
)
from orchestrator.models.retry import RetryAfterError, parse_retry_after

__all__ = ["AnthropicModel"]

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    # The output was cut off either way; the caller reacts the same.
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
}
# In-stream ``error`` events that a new attempt can get past. Unknown types count as transient too:
# once the server has accepted the request, a failure mid-stream is almost always on its side.
_PERMANENT_STREAM_ERRORS = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error", "billing_error"}
)


class AnthropicModel:
    """A Claude model behind the Anthropic Messages API.

    ``api_key`` and ``base_url`` fall back to ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL`` (the
    SDK reads them, along with its other credential sources such as ``ANTHROPIC_AUTH_TOKEN``).
    """

    def __init__(
        self, model: str, *, api_key: str | None = None, base_url: str | None = None, timeout_s: float = 600
    ) -> None:
        """Create the client; no request is made until :meth:`stream`.

        Args:
            model: the Anthropic model id, e.g. ``claude-sonnet-4-5``.
            api_key: overrides ``ANTHROPIC_API_KEY``.
            base_url: overrides ``ANTHROPIC_BASE_URL`` (the API origin, without ``/v1``).
            timeout_s: limit for the whole call, and per read while streaming.
        """
        self._model = model
        timeout = httpx2.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        # No keep-alive: each call opens its own connection, so a model object never holds sockets
        # that someone must remember to close, and works across event loops. A new connection per
        # call costs a handshake, negligible next to a model call.
        http_client = anthropic.DefaultAsyncHttpxClient(
            timeout=timeout, limits=httpx2.Limits(max_connections=100, max_keepalive_connections=0)
        )
        self._client: anthropic.AsyncAnthropic | None = None
        self._setup_error = ""
        try:
            self._client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0, http_client=http_client
            )
        except anthropic.AnthropicError as exc:
            # A broken SDK profile (ANTHROPIC_PROFILE / ANTHROPIC_CONFIG_DIR) fails here; report it
            # as the call's error so that constructing a model never raises.
            self._setup_error = f"anthropic: credentials: {exc}"
        else:
            if self._client.api_key is None and self._client.auth_token is None and self._client.credentials is None:
                self._setup_error = (
                    f"anthropic: no API key for {self.name}; set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
                )

    @property
    def name(self) -> str:
        """``anthropic:<model>``."""
        return f"anthropic:{self._model}"

    def credentials_problem(self) -> str | None:
        """Why no call can succeed for want of credentials (no key, a broken SDK profile), or None.

        The SDK's own credential sources count (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, profiles), so
        a caller can refuse a run before it starts instead of recording one that fails at its first call.
        """
        return self._setup_error or None

    async def aclose(self) -> None:
        """Release the HTTP client. Optional: no connection outlives a call."""
        if self._client is not None:
            await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one call: text and tool-input deltas as they arrive, then the assembled response.

        Raises:
            ModelError: HTTP errors with the API's type and message (408/409/429/5xx/529 transient,
                other 4xx permanent), transport failures and timeouts (transient), in-stream
                ``error`` events (transient unless a client error), a stream cut before
                ``message_stop`` (transient), missing credentials or malformed tool input (permanent).
        """
        client = self._client
        if client is None or self._setup_error:
            raise ModelError(self._setup_error, transient=False)
        kwargs: dict[str, Any] = {}
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = [
                ToolParam(name=t.name, description=t.description, input_schema=t.input_schema) for t in request.tools
            ]
        assembler = _Assembler()
        try:
            events = await client.messages.create(
                model=self._model,
                max_tokens=request.max_tokens,
                messages=to_wire_messages(request.messages),
                stream=True,
                **kwargs,
            )
            async with events:
                async for event in events:
                    delta = assembler.feed(event)
                    if delta is not None:
                        yield delta
        except anthropic.APIStatusError as exc:
            raise _status_error(exc, client.api_key) from exc
        except (anthropic.APIConnectionError, httpx2.TransportError) as exc:
            raise _connection_error(exc, _messages_url(client)) from exc
        yield assembler.response()


MAX_REQUEST_IMAGES = 20
"""Most images one request carries: past 20, the API limits each image to 2000 px a side."""
MAX_REQUEST_IMAGE_B64 = 24 * 1024 * 1024
"""Most base64 characters of images in one request, which may carry 32 MB in all."""


def to_wire_messages(messages: Sequence[Message]) -> list[MessageParam]:
    """Translate our history to Anthropic ``messages``.

    Tool results go first in their user message: the API requires them to open the turn that
    follows the tool calls. Empty text blocks are dropped because the API rejects them. A tool
    result's images follow its text as image blocks, the newest first within the request's bounds
    (:data:`MAX_REQUEST_IMAGES`, :data:`MAX_REQUEST_IMAGE_B64`); an older image past them is a line saying
    it was shown earlier, so a long session of screenshots never grows a request past what the API takes.
    """
    shown = _images_shown(messages)
    wire: list[MessageParam] = []
    for m, message in enumerate(messages):
        blocks = sorted(enumerate(message.content), key=lambda ib: not isinstance(ib[1], ToolResultBlock))
        content = [_wire_block(b, shown, (m, i)) for i, b in blocks if not (isinstance(b, TextBlock) and not b.text)]
        if message.role == "user":
            wire.append(UserMessageParam(role="user", content=content))
        else:
            wire.append(AssistantMessageParam(role="assistant", content=content))
    return wire


def _images_shown(messages: Sequence[Message]) -> set[tuple[int, int, int]]:
    """(message, block, image) positions of the images a request carries: the newest, within the bounds."""
    shown: set[tuple[int, int, int]] = set()
    total = 0
    for m in range(len(messages) - 1, -1, -1):
        content = messages[m].content
        for i in range(len(content) - 1, -1, -1):
            block = content[i]
            if not isinstance(block, ToolResultBlock):
                continue
            images = block.images
            for k in range(len(images) - 1, -1, -1):
                size = len(images[k].data)
                if len(shown) >= MAX_REQUEST_IMAGES or total + size > MAX_REQUEST_IMAGE_B64:
                    return shown
                shown.add((m, i, k))
                total += size
    return shown


def _wire_block(
    block: ContentBlock, shown: set[tuple[int, int, int]], at: tuple[int, int]
) -> TextBlockParam | ToolUseBlockParam | ToolResultBlockParam:
    if isinstance(block, TextBlock):
        return TextBlockParam(type="text", text=block.text)
    if isinstance(block, ToolUseBlock):
        return ToolUseBlockParam(type="tool_use", id=block.id, name=block.name, input=block.input)
    images = block.images
    if not images:
        return ToolResultBlockParam(
            type="tool_result", tool_use_id=block.tool_use_id, content=block.content, is_error=block.is_error
        )
    # Each image follows the line that names it in the text, so the model reads them in the server's order;
    # one whose line the text no longer has (cut as too long) follows the whole text.
    parts: list[TextBlockParam | ImageBlockParam] = []
    rest, late = block.content, list[TextBlockParam | ImageBlockParam]()
    for k, image in enumerate(images):
        part = _image_part(image, (*at, k) in shown)
        marker = f"[{image.label}]"
        cut = rest.find(marker)
        if cut < 0:
            late.append(part)
            continue
        parts.extend(_text_parts(rest[: cut + len(marker)]))
        parts.append(part)
        rest = rest[cut + len(marker) :]
    parts.extend([*_text_parts(rest), *late])
    return ToolResultBlockParam(
        type="tool_result", tool_use_id=block.tool_use_id, content=parts, is_error=block.is_error
    )


def _image_part(image: Attachment, shown: bool) -> TextBlockParam | ImageBlockParam:
    if not shown:
        note = f"[{image.summary}: shown earlier, left out of this request to keep it within the API's limits]"
        return TextBlockParam(type="text", text=note)
    source = Base64ImageSourceParam(type="base64", media_type=_media_type(image.mime_type), data=image.data)
    return ImageBlockParam(type="image", source=source)


def _text_parts(text: str) -> list[TextBlockParam]:
    # The API rejects a text block with nothing but whitespace in it.
    return [TextBlockParam(type="text", text=text)] if text.strip() else []


_MediaType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]


def _media_type(mime: str) -> _MediaType:
    # The hub keeps only images whose bytes are one of these four (orchestrator/hub/media.py).
    for known in get_args(_MediaType):
        if mime == known:
            return cast(_MediaType, known)
    return "image/png"


class _Assembler:
    """Builds the final response from raw stream events."""

    def __init__(self) -> None:
        # Keyed by the event's block index; the API may interleave blocks we do not model.
        self._blocks: dict[int, TextBlock | _PendingToolUse] = {}
        self._text: dict[int, list[str]] = {}
        self._usage = Usage()
        self._stop_reason: str | None = None
        self._stopped = False
        self._calls = 0

    def feed(self, event: object) -> TextDelta | ToolCallDelta | None:
        """Take one event; return the live delta it carries, if any."""
        if isinstance(event, RawMessageStartEvent):
            usage = event.message.usage
            self._usage = Usage(input_tokens=_total_input(usage), output_tokens=usage.output_tokens)
        elif isinstance(event, RawContentBlockStartEvent):
            block = event.content_block
            if isinstance(block, WireTextBlock):
                self._blocks[event.index] = TextBlock(text="")
                self._text[event.index] = [block.text]
                return TextDelta(block.text) if block.text else None
            elif isinstance(block, WireToolUseBlock):
                # The response lists tool calls in block order, so counting them here gives each its position there.
                pending = _PendingToolUse(self._calls, block.id, block.name, dict(block.input))
                self._calls += 1
                self._blocks[event.index] = pending
                # The API sends ``input: {}`` here and the JSON in deltas; an input given whole up front is its text.
                opening = json.dumps(pending.start_input) if pending.start_input else ""
                return ToolCallDelta(pending.position, opening, call_id=block.id, name=block.name)
        elif isinstance(event, RawContentBlockDeltaEvent):
            delta = event.delta
            if isinstance(delta, WireTextDelta) and event.index in self._text:
                self._text[event.index].append(delta.text)
                return TextDelta(delta.text) if delta.text else None
            open_block = self._blocks.get(event.index)
            if isinstance(delta, InputJSONDelta) and isinstance(open_block, _PendingToolUse):
                open_block.json_parts.append(delta.partial_json)
                return ToolCallDelta(open_block.position, delta.partial_json) if delta.partial_json else None
        elif isinstance(event, RawMessageDeltaEvent):
            self._stop_reason = event.delta.stop_reason
            delta_usage = event.usage
            # message_delta counts are cumulative, so they replace the message_start ones.
            input_tokens = self._usage.input_tokens if delta_usage.input_tokens is None else _total_input(delta_usage)
            self._usage = Usage(input_tokens=input_tokens, output_tokens=delta_usage.output_tokens)
        elif isinstance(event, RawMessageStopEvent):
            self._stopped = True
        return None

    def response(self) -> ModelResponse:
        if not self._stopped:
            # The SDK ends iteration quietly when the connection closes early; the message is partial.
            raise ModelError("anthropic: stream ended before message_stop", transient=True)
        content: list[ContentBlock] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if isinstance(block, TextBlock):
                text = "".join(self._text[index])
                if text:
                    content.append(TextBlock(text=text))
            else:
                content.append(block.finish())
        stop_reason = _STOP_REASONS.get(self._stop_reason or "", "other")
        return ModelResponse(
            message=Message(role="assistant", content=content), stop_reason=stop_reason, usage=self._usage
        )


class _PendingToolUse:
    def __init__(self, position: int, id: str, name: str, start_input: dict[str, Any]) -> None:
        self.position = position
        self.id = id
        self.name = name
        self.start_input = start_input
        self.json_parts: list[str] = []

    def finish(self) -> ToolUseBlock:
        raw = "".join(self.json_parts)
        if not raw.strip():  # the whole input came in content_block_start
            return ToolUseBlock(id=self.id, name=self.name, input=self.start_input)
        return ToolUseBlock(id=self.id, name=self.name, input=parse_tool_input("anthropic", self.name, self.id, raw))


def _total_input(usage: Any) -> int:
    # Cached prompt tokens are reported apart from ``input_tokens``; together they are the prompt.
    return int(
        (usage.input_tokens or 0) + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    )


def _status_error(exc: anthropic.APIStatusError, api_key: str | None) -> ModelError:
    error_type = exc.type or "error"
    message = exc.api_message or _body_text(exc)
    if api_key:
        # Some gateways echo the key in their error text; it must not reach logs or the UI.
        message = message.replace(api_key, "***")
    if exc.status_code < 400:
        # The SDK raises an in-stream ``event: error`` as a status error carrying the 200 of the stream.
        transient = error_type not in _PERMANENT_STREAM_ERRORS
        return ModelError(f"anthropic: stream error {error_type}: {message}", transient=transient)
    status = exc.status_code
    text = f"anthropic: {status} {error_type}: {message}"
    if not _is_transient_status(status):
        return ModelError(text, transient=False, status=status)
    retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
    if retry_after is not None:
        return RetryAfterError(text, retry_after_s=retry_after, status=status)
    return ModelError(text, transient=True, status=status)


def _body_text(exc: anthropic.APIStatusError) -> str:
    # Not the API's JSON (a proxy's HTML page, say): show a bounded piece of whatever came back.
    body = exc.body
    text = body if isinstance(body, str) else json.dumps(body) if body is not None else exc.message
    return " ".join(text.split())[:300] or f"HTTP {exc.status_code}"


def _is_transient_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def _messages_url(client: anthropic.AsyncAnthropic) -> str:
    """The URL a call goes to (as the SDK joins it), without user info or query, for error messages."""
    base = client.base_url
    try:
        url = base.copy_with(raw_path=base.raw_path + b"v1/messages")
        return str(url.copy_with(username=None, password=None, query=None))
    except (httpx2.InvalidURL, TypeError, ValueError):
        return "<unparseable base URL>"


def _connection_error(exc: Exception, url: str) -> ModelError:
    # The SDK wraps transport errors raised before the stream starts; the original is the cause.
    cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) and exc.__cause__ else exc
    if isinstance(cause, anthropic.APITimeoutError | httpx2.TimeoutException):
        return ModelError(f"anthropic: request to {url} timed out", transient=True)
    if isinstance(cause, httpx2.UnsupportedProtocol):
        return ModelError(f"anthropic: bad base URL {url}: {cause}", transient=False)
    detail = str(cause) or type(cause).__name__
    return ModelError(f"anthropic: connection to {url} failed: {detail}", transient=True)
