"""Live text latency: from the model writing a piece of text to a follower over HTTP having it.

**The daemon** is the real face over streamable HTTP on 127.0.0.1 (``build_face`` + ``build_app`` under
uvicorn, as ``loom serve`` serves it), in this process. Each session's scripted model writes one long
answer in pieces of ``CHUNK_CHARS`` characters, ``CHUNK_DELAY_S`` apart (a fast model's pace). A piece is
*produced* at its ``text_delta``'s ``ts``: the wall-clock time the loop took it from the model, read here
through an event-log subscriber.

**The followers** are the CLI's :class:`~clients.loom.LiveFollower` (which ``loom attach`` long-polls with),
each with one ``read_events`` call open at a time that the daemon pushes pages into (``LiveFollower.stream``), one
MCP client per session (as separate ``loom attach`` processes would be), all in one child process, so
the daemon and its clients have a core each. A piece has *arrived* when a follower's page holds its last
character (wall clock again: both processes read the same clock). Every follower must reassemble exactly
the stored ``assistant_message``, or the benchmark fails.

Reported: the median and the 99th percentile of arrival minus production over every piece, with 1 and
with 50 sessions streaming at once. Target: p50 under 100 ms.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from benchmarks._report import Figure, fmt_time, median

TARGET_S = 0.1
"""p50 under 100 ms."""
CHUNK_CHARS = 16
CHUNK_DELAY_S = 0.05
"""20 pieces a second per session: about the pace at which a fast model streams tokens."""
RUN_TIMEOUT_S = 120.0
REPO_ROOT = Path(__file__).resolve().parents[1]


def answer(pieces: int) -> str:
    """A text of ``pieces`` pieces of :data:`CHUNK_CHARS` characters."""
    return "".join(f"piece {i:>4} of it " for i in range(pieces))


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers (Ctrl-C stays the benchmark's), telling us when it listens."""

    def __init__(self, config: uvicorn.Config, listening: anyio.Event) -> None:
        super().__init__(config)
        self._listening = listening

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self._listening.set()


def nagle_on(sock: socket.socket) -> bool:
    """Whether connections accepted on ``sock`` keep Nagle's algorithm on.

    asyncio sets ``TCP_NODELAY`` on an accepted socket only when the listening one was made with
    ``proto=IPPROTO_TCP``; otherwise a response written in two parts (headers, then body) waits for the
    client's delayed ACK, some 40 ms, on every call.
    """
    return sock.proto != socket.IPPROTO_TCP and not sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


@contextlib.asynccontextmanager
async def serving(home: Path) -> AsyncIterator[tuple[Any, str, str, bool]]:
    """The face over HTTP on a free loopback port, bound as the daemon binds: (host, URL, token, Nagle on)."""
    from orchestrator.daemon.app import MCP_PATH, build_app
    from orchestrator.daemon.runner import HOST, bind
    from orchestrator.face.server import build_face
    from orchestrator.runtime.embedded import embedded_runtime
    from orchestrator.runtime.host import SessionHost

    token = secrets.token_urlsafe(32)
    async with embedded_runtime(home) as runtime, SessionHost(runtime) as host:
        with bind(0) as sock:
            url = f"http://{HOST}:{sock.getsockname()[1]}{MCP_PATH}"
            config = uvicorn.Config(
                build_app(build_face(host), token), lifespan="on", log_config=None, access_log=False
            )
            listening = anyio.Event()
            server = _Server(config, listening)
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve, [sock])
                with anyio.fail_after(20):
                    await listening.wait()
                try:
                    yield host, url, token, nagle_on(sock)
                finally:
                    server.should_exit = True


async def _scenario(base: Path, sessions: int, pieces: int) -> tuple[list[float], int, bool]:
    """One round: ``sessions`` sessions stream at once to one follower each; the latencies of every piece."""
    from orchestrator.events import TextDelta
    from orchestrator.models.scripted import ScriptedModel

    cwd = base / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    text = answer(pieces)
    turn = {"text": text, "chunk_chars": CHUNK_CHARS, "chunk_delay_s": CHUNK_DELAY_S}
    produced: dict[str, list[tuple[int, float]]] = {}
    async with serving(base / "home") as (host, url, token, nagle), anyio.create_task_group() as tg:
        ids = []
        for _ in range(sessions):
            session = await host.create_session(cwd, ScriptedModel.from_turns([turn]), "bypass", headless=True)
            ids.append(session.id)
            produced[session.id] = []

        async def stamp() -> None:
            async with host.runtime.log.subscribe() as events:
                async for event in events:
                    if isinstance(event, TextDelta) and event.session_id in produced:
                        mine = produced[event.session_id]
                        mine.append(((mine[-1][0] if mine else 0) + len(event.text), event.ts))

        tg.start_soon(stamp)
        out = base / "arrivals.json"
        code = f"from benchmarks.live import follower_child; follower_child({url!r}, {token!r}, {ids!r}, {str(out)!r})"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        }
        errors = base / "followers.stderr"
        with anyio.fail_after(RUN_TIMEOUT_S), errors.open("wb") as err:
            async with await anyio.open_process(
                [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, stderr=err
            ) as child:
                assert child.stdout is not None
                with contextlib.suppress(anyio.EndOfStream):
                    await child.stdout.receive()  # "ready": every follower is connected and waiting
                for sid in ids:
                    await host.start_run(sid, "Write the long answer.", max_steps=1)
                if await child.wait() != 0:
                    raise AssertionError(f"the followers failed: {errors.read_text(errors='replace')[-2000:]}")
        tg.cancel_scope.cancel()
    arrivals = json.loads(out.read_text(encoding="utf-8"))
    latencies: list[float] = []
    for sid in ids:
        got = arrivals[sid]
        if got["text"] != text or got["stored"] != text:
            raise AssertionError(
                f"session {sid}: the follower reassembled {len(got['text'])} of {len(text)} characters"
            )
        marks = got["arrivals"]
        k = 0
        for end, ts in produced[sid]:
            while marks[k][0] < end:
                k += 1
            latencies.append(marks[k][1] - ts)
    return latencies, len(text), nagle


def follower_child(url: str, token: str, session_ids: Sequence[str], out: str) -> None:
    """Entry point of the child process: follow every session to its run's end, then write what arrived when."""
    results = anyio.run(_follow_all, url, token, list(session_ids))
    Path(out).write_text(json.dumps(results), encoding="utf-8")


async def _follow_all(url: str, token: str, session_ids: list[str]) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    ready = {"count": 0}
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for sid in session_ids:
                results[sid] = {"arrivals": [], "text": "", "stored": None}
                tg.start_soon(_follow_one, url, token, sid, results[sid], ready, len(session_ids))
    return results


async def _follow_one(
    url: str, token: str, sid: str, result: dict[str, Any], ready: dict[str, int], total: int
) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from clients.loom import LiveFollower, LoomClient
    from clients.loom.daemon import http_client
    from orchestrator.events import AssistantMessage, RunFinished, TextDelta

    async with http_client(token) as http, Client(streamable_http_client(url, http_client=http)) as session:
        client = LoomClient(session, on_daemon=True)
        follower = LiveFollower(sid)
        await follower.next(client, 0)  # connected, the session's history read: ready for its text
        ready["count"] += 1
        if ready["count"] == total:
            sys.stdout.write("ready\n")
            sys.stdout.flush()
        finished = anyio.Event()

        def arrived(events: list[Any]) -> None:
            now = time.time()
            for event in events:
                if isinstance(event, TextDelta):
                    result["text"] += event.text
                    result["arrivals"].append((len(result["text"]), now))
                elif isinstance(event, AssistantMessage):
                    result["stored"] = event.message.text
                elif isinstance(event, RunFinished):
                    finished.set()

        # One read_events call open at a time (stream=True): the daemon pushes each piece as it is written.
        with anyio.CancelScope() as following:
            async with anyio.create_task_group() as tg:

                async def stop_when_finished() -> None:
                    await finished.wait()
                    following.cancel()

                tg.start_soon(stop_when_finished)
                while not finished.is_set():
                    await follower.stream(client, 30, arrived)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(base: Path, *, quick: bool = False) -> list[Figure]:
    """Live-text latency with 1 and with 50 sessions streaming at once (runs its own event loops)."""
    pieces, rounds_of_one = (40, 2) if quick else (100, 3)
    figures = []
    for sessions, rounds in ((1, rounds_of_one), (50, 1)):
        latencies: list[float] = []
        chars, nagle = 0, False
        for r in range(rounds):
            got, chars, nagle = anyio.run(_scenario, base / f"n{sessions}-{r}", sessions, pieces)
            latencies.extend(got)
        notes = [
            f"{len(latencies):,} pieces of {CHUNK_CHARS} characters, {CHUNK_DELAY_S * 1000:.0f} ms apart "
            f"({chars:,}-character answers, {rounds} round{'s' if rounds > 1 else ''}); followers are "
            "LiveFollower on MCP clients over HTTP in a child process; range is min–p99"
        ]
        if nagle:
            notes.append(
                "the daemon's socket (orchestrator.daemon.runner.bind) leaves TCP_NODELAY off on its connections: "
                "each response waits ~40 ms for the client's delayed ACK"
            )
        p50, p99 = median(latencies), _percentile(latencies, 0.99)
        figures.append(
            Figure(
                key=f"live_text_{sessions}",
                title=f"live text, {sessions} streaming session{'s' if sessions > 1 else ''} (p50 < 100 ms)",
                measured=f"p50 {fmt_time(p50)}, p99 {fmt_time(p99)} from model delta to follower",
                ratio=p50 / TARGET_S,
                target=1.0,
                ratio_range=(min(latencies) / TARGET_S, p99 / TARGET_S),
                notes=notes,
                data={"sessions": sessions, "p50_s": p50, "p99_s": p99, "pieces": len(latencies), "nagle": nagle},
            )
        )
    return figures


if __name__ == "__main__":
    import tempfile

    from benchmarks._report import render

    with tempfile.TemporaryDirectory(prefix="loom-bench-live-") as tmp:
        print(render(measure(Path(tmp), quick="--quick" in sys.argv)))
