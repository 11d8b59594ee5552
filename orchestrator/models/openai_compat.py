"""OpenAI-compatible Chat Completions provider (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp...).

Plain ``httpx`` against ``POST {base_url}/chat/completions`` with ``stream: true``; no SDK, so any
server that speaks the format works. Tool-call arguments that are not a JSON object are a permanent
:class:`ModelError` naming the tool: the reply is unusable, and retrying a deterministic local
model would only burn calls on the same output.

Keys: an endpoint on this machine or its network (a loopback, private or link-local address, ``localhost``,
a ``.local`` name or a single-label host such as a container's ``ollama``) may take calls without a key, as
Ollama, vLLM and llama.cpp do by default. Any other endpoint, the public default above all, needs
``OPENAI_API_KEY``; without one the call is refused before any request (set the variable to any value for a
remote server that needs none). Sending such a call would only fail, after a DNS lookup and retries where
the machine is offline.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

from orchestrator.messages import Attachment, Message, TextBlock, ToolResultBlock, ToolUseBlock
from orchestrator.models.base import ModelError, ModelEvent, ModelRequest
from orchestrator.models.openai_stream import ChunkAssembler, error_fields
from orchestrator.models.retry import RetryAfterError, parse_retry_after

__all__ = ["DEFAULT_BASE_URL", "OpenAICompatModel", "key_required", "to_wire_messages"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAICompatModel:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    ``api_key`` and ``base_url`` fall back to ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (default
    ``https://api.openai.com/v1``). Without a key no ``Authorization`` header is sent, as local
    servers such as Ollama expect; an endpoint that is not local refuses to be called without one
    (:func:`key_required`).
    """

    def __init__(
        self, model: str, *, api_key: str | None = None, base_url: str | None = None, timeout_s: float = 600
    ) -> None:
        """Configure the endpoint; no request is made until :meth:`stream`.

        Args:
            model: the model id the server knows, e.g. ``gpt-4o`` or ``qwen2.5-coder:7b``.
            api_key: overrides ``OPENAI_API_KEY``.
            base_url: overrides ``OPENAI_BASE_URL``; the URL that ``/chat/completions`` is appended to.
            timeout_s: limit for connecting, and for each read while streaming.
        """
        self._model = model
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or None
        self._base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        # No keep-alive: each call opens its own connection, so a model object never holds sockets
        # that someone must remember to close, and works across event loops. Creating the client
        # (and its TLS context) once keeps that work off the per-call path.
        self._client = httpx.AsyncClient(
            timeout=self._timeout, limits=httpx.Limits(max_connections=100, max_keepalive_connections=0)
        )

    @property
    def name(self) -> str:
        """``openai:<model>``."""
        return f"openai:{self._model}"

    async def aclose(self) -> None:
        """Release the HTTP client. Optional: no connection outlives a call."""
        await self._client.aclose()

    def credentials_problem(self) -> str | None:
        """Why no call can succeed for want of a key (no key for an endpoint that needs one), or None."""
        if self._api_key or not key_required(self._base_url):
            return None
        if self._base_url == DEFAULT_BASE_URL:
            return (
                f"openai: no API key for {self.name} at the public endpoint {DEFAULT_BASE_URL}; set OPENAI_API_KEY, "
                "or OPENAI_BASE_URL to your server's URL (one on this machine or network, such as Ollama, needs no key)"
            )
        return (
            f"openai: no API key for {self.name} at {_redacted(self._base_url)}; set OPENAI_API_KEY "
            "(any value, if that server takes calls without one)"
        )

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": to_wire_messages(request.system, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # OpenAI's newer models reject ``max_tokens``; most other servers only know ``max_tokens``.
        if self._base_url == DEFAULT_BASE_URL:
            body["max_completion_tokens"] = request.max_tokens
        else:
            body["max_tokens"] = request.max_tokens
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one call: text and tool-argument deltas as they arrive, then the assembled response.

        Raises:
            ModelError: HTTP errors with the server's message (408/409/429/5xx transient, other 4xx
                permanent), transport failures and timeouts (transient), in-stream errors
                (transient), malformed tool-call arguments (permanent).
        """
        problem = self.credentials_problem()
        if problem is not None:
            raise ModelError(problem, transient=False)
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        url = f"{self._base_url}/chat/completions"
        assembler = ChunkAssembler()
        try:
            async with self._client.stream("POST", url, json=self._body(request), headers=headers) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _status_error(response)
                async for line in response.aiter_lines():
                    for delta in assembler.feed_line(line):
                        yield delta
                    if assembler.done:
                        break
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise ModelError(f"openai: bad base URL {_redacted(self._base_url)}: {exc}", transient=False) from exc
        except httpx.TimeoutException as exc:
            raise ModelError(f"openai: request to {_redacted(url)} timed out", transient=True) from exc
        except httpx.TransportError as exc:
            detail = str(exc) or type(exc).__name__
            raise ModelError(f"openai: connection to {_redacted(url)} failed: {detail}", transient=True) from exc
        except ModelError as exc:
            if self._api_key and self._api_key in str(exc):
                # Some servers echo the key in their error text; it must not reach logs or the UI.
                raise _scrubbed(exc, self._api_key) from exc.__cause__
            raise
        yield assembler.response()


def to_wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Translate our history to Chat Completions ``messages``.

    Each tool result becomes its own ``tool`` message, placed before any user text of the same turn
    because they must directly follow the assistant message that made the calls. A ``tool`` message
    carries text only, so each image of a result is named with what was left out of it.
    """
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        # Blocks are separate pieces (the user's words, a note Loom adds on resume): gluing them would merge sentences.
        text = "\n\n".join(b.text for b in message.content if isinstance(b, TextBlock) and b.text)
        if message.role == "assistant":
            calls = [
                {
                    "id": b.id,
                    "type": "function",
                    "function": {"name": b.name, "arguments": json.dumps(b.input)},
                }
                for b in message.content
                if isinstance(b, ToolUseBlock)
            ]
            entry: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
            if calls:
                entry["tool_calls"] = calls
            wire.append(entry)
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                # The format has no error flag; without the prefix the model would take a failure as output.
                content = f"ERROR: {block.content}" if block.is_error else block.content
                content += "".join(f"\n{_left_out(image)}" for image in block.images)
                wire.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        if text:
            wire.append({"role": "user", "content": text})
    return wire


def _left_out(image: Attachment) -> str:
    return f"[{image.summary}: left out, tool results reach this model as text only]"


def key_required(base_url: str) -> bool:
    """Whether an endpoint is taken to need an API key: every one not on this machine or its network.

    An unparseable URL needs none here: the call then fails on the URL itself, which says more.
    """
    try:
        host = httpx.URL(base_url).host.lower().rstrip(".")
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local")) or "." not in host and ":" not in host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return True  # a domain name: somewhere else
    return not (address.is_loopback or address.is_private or address.is_link_local)


def _redacted(url: str) -> str:
    """``url`` without user info or query, where credentials could hide, for error messages."""
    try:
        return str(httpx.URL(url).copy_with(username=None, password=None, query=None))
    except (httpx.InvalidURL, TypeError, ValueError):
        return "<unparseable URL>"


def _scrubbed(error: ModelError, secret: str) -> ModelError:
    text = str(error).replace(secret, "***")
    if isinstance(error, RetryAfterError):
        return RetryAfterError(text, retry_after_s=error.retry_after_s, status=error.status)
    return ModelError(text, transient=error.transient, status=error.status)


def _status_error(response: httpx.Response) -> ModelError:
    status = response.status_code
    try:
        label, message = error_fields(response.json())
    except ValueError:
        label, message = "error", " ".join(response.text.split())[:300] or response.reason_phrase
    text = f"openai: {status} {label}: {message}"
    if not (status in (408, 409, 429) or status >= 500):
        return ModelError(text, transient=False, status=status)
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    if retry_after is not None:
        return RetryAfterError(text, retry_after_s=retry_after, status=status)
    return ModelError(text, transient=True, status=status)
