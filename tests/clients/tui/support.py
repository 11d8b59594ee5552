"""Driving the real TUI under Pilot against a real daemon subprocess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
from textual.pilot import Pilot

from clients.loom import LoomClient
from clients.loom.daemon import connect
from clients.tui.app import LoomApp
from orchestrator.events import EVENT_ADAPTER, AssistantMessage

SIZE = (80, 24)
WAIT_S = 20.0


async def until(pilot: Pilot[int], predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """Let the app run until ``predicate`` holds (bounded)."""
    try:
        with anyio.fail_after(timeout_s):
            while not predicate():
                await pilot.pause(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def tui(home: Path, project: Path, model: str, *, mode: str = "ask", session_id: str | None = None) -> LoomApp:
    """The app as `loom tui` makes it, on a daemon the test started (so nothing is started here)."""
    return LoomApp(home=home, cwd=project, model=model, mode=mode, session_id=session_id, autostart=False)


async def connected(pilot: Pilot[int]) -> None:
    """Wait for the TUI to attach to the daemon."""
    app = pilot.app
    assert isinstance(app, LoomApp)
    await until(pilot, lambda: app.status.connection == "connected", "the TUI to connect")


async def type_message(pilot: Pilot[int], text: str) -> None:
    """Type ``text`` into the prompt and press Enter."""
    for char in text:
        await pilot.press("space" if char == " " else char)
    await pilot.press("enter")


async def stored_messages(home: Path, session_id: str) -> list[AssistantMessage]:
    """The session's stored assistant messages, read through a client of our own."""
    async with connect(home) as session:
        page = await LoomClient(session, on_daemon=True).read_events(session_id)
    events = [EVENT_ADAPTER.validate_python(e.model_dump()) for e in page.events]
    return [e for e in events if isinstance(e, AssistantMessage)]
