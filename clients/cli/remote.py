"""The CLI as an MCP client of Loom's face: ``sessions``, ``send``, ``attach``, ``approvals``, ``approve``, ``deny``.

Each command talks to the daemon when one runs for ``$LOOM_HOME`` (so it sees the sessions every
other client sees), and otherwise to an embedded runtime in this process, through the very same MCP
tools. Nothing here reaches into the runtime's objects.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from clients.cli.errors import cli_message, first_of
from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from clients.cli.render import TerminalRenderer
from orchestrator.config import loom_home
from orchestrator.events import EVENT_ADAPTER, AssistantMessage, Event, RunFinished, TextDelta, ToolCallDelta

FINAL = {"completed", "failed", "cancelled", "interrupted", "needs_review"}
"""Statuses a ``get_run`` poll stops at (a resumed run is ``needs_review`` only while it waits, or at its end)."""


class FaceError(Exception):
    """A face tool answered with an error; the message is the tool's."""


@contextlib.asynccontextmanager
async def face_client() -> AsyncIterator[Client]:
    """A client of the daemon's face if a daemon runs for ``$LOOM_HOME``, else of an embedded one."""
    from orchestrator.daemon.discovery import read_discovery

    home = loom_home()
    if read_discovery(home) is not None:
        from orchestrator.daemon.client import connect

        async with connect(home) as client:
            yield client
        return
    from orchestrator.config import ConfigError, load_config
    from orchestrator.face.server import build_face
    from orchestrator.runtime.embedded import embedded_runtime
    from orchestrator.runtime.host import SessionHost

    try:
        # The same config `loom run` and the daemon read: sessions reopened here get the same servers.
        config = load_config(home, Path.cwd())
    except ConfigError as exc:
        raise FaceError(str(exc)) from exc
    async with (
        embedded_runtime(home, config=config) as runtime,
        SessionHost(runtime) as host,
        Client(build_face(host)) as client,
    ):
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a face tool and return its structured result.

    Raises:
        FaceError: the tool answered with an error.
    """
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        text = " ".join(getattr(b, "text", "") for b in result.content).strip()
        raise FaceError(text.removeprefix(f"Error executing tool {tool}: ") or f"{tool} failed")
    content: dict[str, Any] = result.structured_content
    return content


class LiveFollower:
    """Follows one session through ``read_events``: its stored events, with the text in flight as it is written.

    The live text comes as :class:`~orchestrator.events.TextDelta` events made here from the page's ``live``
    part (and :class:`~orchestrator.events.ToolCallDelta` for streamed tool arguments), so a renderer shows
    them as it shows an embedded run's. What was shown is remembered per attempt of a step (run, step,
    ``after_seq``); when the step's ``assistant_message`` arrives, only the part of its text not shown yet is
    given as one more delta before it: attach or reconnect mid-message, and nothing is doubled or missed.

    Args:
        session_id: the session to follow.
        after_seq: the stored events to skip.
        every_message: give every stored message's unshown text as a delta, even one nothing of which was
            seen live (``loom run``, so that its output has the embedded run's event types); otherwise only
            messages seen in part get one, and replayed history keeps its messages alone (``loom attach``).
    """

    def __init__(self, session_id: str, after_seq: int = 0, *, every_message: bool = False) -> None:
        self.session_id = session_id
        self.cursor = after_seq
        self.live_cursor = ""
        self._every = every_message
        self._shown: dict[tuple[str, int], tuple[int, str]] = {}
        """(run, step) -> (after_seq of the attempt shown, its text shown so far)"""
        self._arguments: dict[tuple[str, int, int, int], int] = {}
        """(run, step, after_seq, call index) -> characters of its arguments shown"""

    async def next(self, client: Client, wait_s: float) -> list[Event]:
        """One ``read_events`` call (a long-poll of up to ``wait_s``): the events to show, in order."""
        page = await call(
            client,
            "read_events",
            session_id=self.session_id,
            after_seq=self.cursor,
            wait_s=wait_s,
            live_cursor=self.live_cursor,
        )
        return self.take(page)

    def take(self, page: dict[str, Any]) -> list[Event]:
        """The events of one ``read_events`` page, live text included, and the cursors moved past them."""
        out: list[Event] = []
        for raw in page["events"]:
            event = EVENT_ADAPTER.validate_python(raw)
            if isinstance(event, AssistantMessage):
                out.extend(self._rest_of(event))
            elif isinstance(event, RunFinished):
                self._forget(event.run_id)
            out.append(event)
        self.cursor = page["next_after_seq"]
        live = page.get("live")
        self.live_cursor = live["cursor"] if live else ""
        if live:
            out.extend(self._live(live))
        return out

    def _rest_of(self, message: AssistantMessage) -> list[Event]:
        key = (message.run_id, message.step)
        shown = self._shown.pop(key, None)
        text, before = message.message.text, shown[1] if shown else ""
        # A streamed text that is not the start of the stored one (never seen from our providers) stays
        # as it was shown rather than being shown twice.
        rest = text[len(before) :] if text.startswith(before) else ""
        if not rest or (shown is None and not self._every):
            return []
        return [TextDelta(session_id=self.session_id, run_id=message.run_id, step=message.step, text=rest)]

    def _live(self, live: dict[str, Any]) -> list[Event]:
        run_id, step, after_seq = live["run_id"], live["step"], live["after_seq"]
        shown = self._shown.get((run_id, step))
        if shown is None or shown[0] != after_seq:
            shown = (after_seq, "")  # a new attempt streams from nothing; an earlier one stays shown
        offset, have = live["text_offset"], len(shown[1])
        if offset > have:  # sent from past what we hold: ask for all of it
            self.live_cursor = ""
            return []
        out: list[Event] = []
        new = live["text"][have - offset :]
        if new:
            out.append(TextDelta(session_id=self.session_id, run_id=run_id, step=step, text=new))
        self._shown[(run_id, step)] = (after_seq, shown[1] + new)
        for c in live["tool_calls"]:
            key = (run_id, step, after_seq, c["index"])
            done = self._arguments.get(key, 0)
            piece = c["arguments_so_far"][done:]
            if piece or key not in self._arguments:
                self._arguments[key] = done + len(piece)
                out.append(
                    ToolCallDelta(
                        session_id=self.session_id,
                        run_id=run_id,
                        step=step,
                        index=c["index"],
                        call_id=c["call_id"],
                        name=c["name"],
                        arguments=piece,
                    )
                )
        return out

    def _forget(self, run_id: str) -> None:
        for key in [k for k in self._shown if k[0] == run_id]:
            del self._shown[key]
        for args_key in [k for k in self._arguments if k[0] == run_id]:
            del self._arguments[args_key]


def _run(fn: Any, *args: Any) -> int:
    try:
        code: int = anyio.run(fn, *args)
    except (FaceError, BaseExceptionGroup) as exc:
        # raised inside the client's task groups, a FaceError reaches us wrapped in exception groups
        error = first_of(exc, FaceError)
        if error is None:
            raise
        sys.stderr.write(f"loom: error: {cli_message(str(error))}\n")  # CLI commands, not face tools, named
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    return code


def sessions(args: argparse.Namespace) -> int:
    """``loom sessions``: the sessions every client sees."""

    async def main() -> int:
        async with face_client() as client:
            listed = await call(client, "list_sessions", include_archived=args.all)
        rows = listed["sessions"]
        if not rows:
            sys.stdout.write("no sessions\n")
            return EXIT_OK
        # Columns as wide as their widest cell, so that a long mode (accept-edits) or model keeps them aligned.
        wide = [max(len(title), *(len(s[key]) for s in rows)) for key, title in _SESSION_COLUMNS]
        sys.stdout.write(_session_line(["SESSION", "MODE", "MODEL"], wide, "CTX", "CWD"))
        for s in rows:
            flag = " (archived)" if s["archived"] else ""
            ratio = s.get("context_ratio")
            context = f"{ratio:.0%}" if ratio is not None else "-"
            cells = [s[key] for key, _ in _SESSION_COLUMNS]
            sys.stdout.write(_session_line(cells, wide, context, f"{s['cwd']}{flag}"))
        return EXIT_OK

    return _run(main)


_SESSION_COLUMNS = (("session_id", "SESSION"), ("mode", "MODE"), ("model", "MODEL"))


def _session_line(cells: list[str], widths: list[int], context: str, cwd: str) -> str:
    padded = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))
    return f"{padded}  {context:>4}  {cwd}\n"


def send(args: argparse.Namespace) -> int:
    """``loom send SESSION "message"``: start a run; wait for it unless ``--no-wait`` (daemon only)."""

    async def main() -> int:
        async with face_client() as client:
            run = await call(client, "send_message", session_id=args.session, text=args.message, wait_s=0)
            sys.stderr.write(f"loom: run {run['run_id']} started in session {args.session}\n")
            if args.no_wait:
                sys.stdout.write(json.dumps(run) + "\n")
                return EXIT_OK
            while run["status"] not in FINAL:
                if run["status"] == "awaiting_approval":
                    ids = ", ".join(run["pending_approvals"])
                    sys.stderr.write(f"loom: waiting for approval {ids} (loom approve ID / loom deny ID)\n")
                run = await call(client, "get_run", run_id=run["run_id"], wait_s=30)
        if run["final_text"]:
            sys.stdout.write(run["final_text"].rstrip("\n") + "\n")
        why = f": {run['reason']}" if run["reason"] and run["status"] != "completed" else ""
        sys.stderr.write(f"loom: run {run['run_id']} {run['status']}{why}\n")
        return {"completed": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(run["status"], EXIT_FAILED)

    return _run(main)


def attach(args: argparse.Namespace) -> int:
    """``loom attach SESSION``: the session's events from ``--after`` on, then live until Ctrl-C."""

    async def main() -> int:
        renderer = TerminalRenderer() if not args.json else None
        follower = LiveFollower(args.session, args.after)
        async with face_client() as client:
            await call(client, "get_session", session_id=args.session)
            while True:
                events = await follower.next(client, 0 if args.no_follow else 30)
                for event in events:
                    if renderer is None:
                        sys.stdout.write(json.dumps(event.model_dump(mode="json")) + "\n")
                    else:
                        renderer(event)
                        if event.type == "approval_requested":
                            sys.stderr.write(f"loom: approval needed: loom approve {event.approval_id}\n")
                sys.stdout.flush()
                if args.no_follow and not any(e.seq is not None for e in events):
                    return EXIT_OK

    return _run(main)


def approvals(args: argparse.Namespace) -> int:
    """``loom approvals``: tool calls waiting for a decision."""

    async def main() -> int:
        async with face_client() as client:
            listed = await call(client, "list_approvals")
        if not listed["approvals"]:
            sys.stdout.write("no approvals waiting\n")
        for a in listed["approvals"]:
            arguments = json.dumps(a["arguments"], ensure_ascii=False)[:100]
            sys.stdout.write(f"{a['approval_id']}  {a['session_id']}  {a['tool']} {arguments}\n  why: {a['reason']}\n")
        return EXIT_OK

    return _run(main)


def decide(args: argparse.Namespace, decision: str) -> int:
    """``loom approve ID [--session]`` and ``loom deny ID [--reason TEXT]``."""

    async def main() -> int:
        async with face_client() as client:
            done = await call(
                client,
                "decide_approval",
                approval_id=args.approval_id,
                decision=decision,
                reason=getattr(args, "reason", "") or "",
                decided_by="cli",
            )
        sys.stderr.write(f"loom: {done['approval_id']} ({done['tool']}): {done['decision']}\n")
        return EXIT_OK

    return _run(main)


async def run_on_daemon(
    spec: str, cwd: str, goal: str, max_steps: int, renderer: Any, notice: str, mode: str = "accept-edits"
) -> int:
    """``loom run`` when a daemon runs: the session lives there, so every other client sees the run.

    The session is headless, as an embedded ``loom run`` is: what policy would ask about is denied.

    Ctrl-C (or SIGTERM) cancels the run on the daemon and exits 130.
    """
    import signal

    from orchestrator.daemon.client import connect

    async with connect(loom_home()) as client:
        session = await call(client, "create_session", cwd=cwd, model=spec, mode=mode, headless=True)
        sid = session["session_id"]
        if notice:
            sys.stderr.write(f"loom: {notice}\n")
        run = await call(client, "send_message", session_id=sid, text=goal, max_steps=max_steps)
        status = "running"
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:

                async def cancel_on_signal() -> None:
                    async for _ in signals:
                        await call(client, "cancel_run", run_id=run["run_id"])
                        return

                tg.start_soon(cancel_on_signal)
                follower = LiveFollower(sid, every_message=True)
                while status not in FINAL:
                    for event in await follower.next(client, 30):
                        renderer(event)
                        if isinstance(event, RunFinished) and event.run_id == run["run_id"]:
                            status = event.status
                tg.cancel_scope.cancel()
    return {"completed": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(status, EXIT_FAILED)
