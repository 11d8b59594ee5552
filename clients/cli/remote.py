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

from clients.cli.errors import first_of
from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from clients.cli.render import TerminalRenderer
from orchestrator.config import loom_home
from orchestrator.events import EVENT_ADAPTER

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


def _run(fn: Any, *args: Any) -> int:
    try:
        code: int = anyio.run(fn, *args)
    except (FaceError, BaseExceptionGroup) as exc:
        # raised inside the client's task groups, a FaceError reaches us wrapped in exception groups
        error = first_of(exc, FaceError)
        if error is None:
            raise
        sys.stderr.write(f"loom: error: {error}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    return code


def sessions(args: argparse.Namespace) -> int:
    """``loom sessions``: the sessions every client sees."""

    async def main() -> int:
        async with face_client() as client:
            listed = await call(client, "list_sessions", include_archived=args.all)
        for s in listed["sessions"]:
            flag = " (archived)" if s["archived"] else ""
            ratio = s.get("context_ratio")
            context = f"{ratio:>4.0%}" if ratio is not None else "   -"
            sys.stdout.write(f"{s['session_id']}  {s['mode']:<6} {s['model']:<28} {context}  {s['cwd']}{flag}\n")
        return EXIT_OK

    return _run(main)


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
        cursor = args.after
        async with face_client() as client:
            await call(client, "get_session", session_id=args.session)
            while True:
                page = await call(
                    client, "read_events", session_id=args.session, after_seq=cursor, wait_s=0 if args.no_follow else 30
                )
                for raw in page["events"]:
                    if renderer is None:
                        sys.stdout.write(json.dumps(raw) + "\n")
                    else:
                        event = EVENT_ADAPTER.validate_python(raw)
                        renderer(event)
                        if event.type == "approval_requested":
                            sys.stderr.write(f"loom: approval needed: loom approve {raw['approval_id']}\n")
                sys.stdout.flush()
                cursor = page["next_after_seq"]
                if args.no_follow and not page["events"]:
                    return EXIT_OK

    return _run(main)


def approvals(args: argparse.Namespace) -> int:
    """``loom approvals``: tool calls waiting for a decision."""

    async def main() -> int:
        async with face_client() as client:
            listed = await call(client, "list_approvals")
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
                cursor = 0
                while status not in FINAL:
                    page = await call(client, "read_events", session_id=sid, after_seq=cursor, wait_s=30)
                    for raw in page["events"]:
                        event = EVENT_ADAPTER.validate_python(raw)
                        renderer(event)
                        if event.type == "run_finished" and getattr(event, "run_id", None) == run["run_id"]:
                            status = getattr(event, "status", "failed")
                    cursor = page["next_after_seq"]
                tg.cancel_scope.cancel()
    return {"completed": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(status, EXIT_FAILED)
