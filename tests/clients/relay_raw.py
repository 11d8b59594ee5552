"""A raw JSON-RPC driver of a real ``loom mcp`` subprocess: lines written to its stdin, lines read from its stdout.

Used where the SDK client would hide what the relay does (a listen stream's frames as they arrive, the tasks
extension's methods, stdin closing): every line the relay writes is kept, in order, and must be JSON-RPC.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.clients.cli_support import loom_command

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
WAIT_S = 20.0

Message = dict[str, Any]


@dataclass
class RawRelay:
    """One ``loom mcp`` process and everything it has written so far."""

    process: Process
    stderr_path: Path
    received: list[Message] = field(default_factory=list)
    caps: dict[str, Any] = field(default_factory=dict)
    _arrived: anyio.Event = field(default_factory=anyio.Event)
    _ids: int = 0

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    async def send(self, message: Mapping[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def modern(self, method: str, params: Mapping[str, Any], *, caps: dict[str, Any] | None = None) -> Message:
        """A 2026-07-28 request: its version, client and capabilities in ``_meta``."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-driver", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": self.caps if caps is None else caps,
        }
        return {"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": {**params, "_meta": meta}}

    async def handshake(self) -> dict[str, Any]:
        """The 2025-era ``initialize`` and ``notifications/initialized``: the session is open after this."""
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw-legacy", "version": "1"}}
        result = await self.result({"jsonrpc": "2.0", "id": self.next_id(), "method": "initialize", "params": params})
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def legacy(self, method: str, params: Mapping[str, Any]) -> Message:
        """A 2025-era request (its session is the relay's business)."""
        return {"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": dict(params)}

    async def wait_for(self, matches: Callable[[Message], bool], timeout_s: float = WAIT_S) -> Message:
        """The first message received (earlier or later) that ``matches``."""
        with anyio.fail_after(timeout_s):
            while True:
                for message in self.received:
                    if matches(message):
                        return message
                arrived = self._arrived
                await arrived.wait()

    async def answer(self, request: Message, timeout_s: float = WAIT_S) -> Message:
        """Send ``request`` and wait for the response to it."""
        await self.send(request)
        return await self.wait_for(lambda m: "method" not in m and m.get("id") == request["id"], timeout_s)

    async def result(self, request: Message) -> dict[str, Any]:
        response = await self.answer(request)
        assert "result" in response, f"{response}\n{self.stderr()}"
        return dict(response["result"])

    async def tool(self, name: str, caps: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
        """A 2026-07-28 ``tools/call``'s result."""
        return await self.result(self.modern("tools/call", {"name": name, "arguments": arguments}, caps=caps))

    async def _read(self) -> None:
        assert self.process.stdout is not None
        lines = BufferedByteReceiveStream(self.process.stdout)
        with contextlib.suppress(anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
            while True:
                line = await lines.receive_until(b"\n", 16 * 1024 * 1024)
                message = json.loads(line)  # anything on stdout that is not JSON fails the test
                assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
                self.received.append(message)
                arrived, self._arrived = self._arrived, anyio.Event()
                arrived.set()


@contextlib.asynccontextmanager
async def raw_loom_mcp(
    home: Path, cwd: Path, name: str = "raw", *, caps: dict[str, Any] | None = None
) -> AsyncIterator[RawRelay]:
    """Start ``loom mcp`` on ``home`` (attached, when a daemon runs there) and drive it with raw lines."""
    env = {"LOOM_HOME": str(home), "PATH": os.environ["PATH"]}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    stderr_path = cwd / f"{name}.stderr"
    with stderr_path.open("wb") as errlog:
        process = await anyio.open_process([*loom_command(), "mcp"], cwd=cwd, env=env, stderr=errlog)
        relay = RawRelay(process, stderr_path, caps=caps or {})
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(relay._read)
                try:
                    yield relay
                finally:
                    if process.stdin is not None:
                        await process.stdin.aclose()
                    with anyio.move_on_after(10):
                        await process.wait()
                    tg.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
