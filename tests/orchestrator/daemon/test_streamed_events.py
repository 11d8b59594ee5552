"""Following a daemon session with one open ``read_events(stream=True)``: each change is pushed as it is made.

A long-poll answers once per change, and whatever the session writes while that answer travels and the
next request comes back waits for the round trip; a streamed read is one call that the daemon writes
pages into (progress notifications over the call's SSE response), in both protocol eras.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from clients.loom import LiveFollower, LoomClient
from orchestrator.events import AssistantMessage, Event, RunFinished, TextDelta
from orchestrator.protocol import EventPage
from tests.clients.cli_support import write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon

pytestmark = pytest.mark.anyio

PIECE = 12
WHOLE = "".join(p.ljust(PIECE) for p in ["Streamed", "in six", "pieces,", "each one", "pushed as", "it comes."])
GAP_S = 0.25


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_each_piece_is_pushed_within_one_open_call_as_it_is_written(tmp_path: Path, mode: str) -> None:
    script = write_script(tmp_path / "s.json", [{"text": WHOLE, "chunk_chars": PIECE, "chunk_delay_s": GAP_S}])
    with running_daemon(tmp_path / "home", tmp_path) as daemon:
        async with mcp_client(daemon, mode) as client:
            session = await call(client, "create_session", cwd=str(tmp_path), model=f"scripted:{script}")
            sid = session["session_id"]
            loom = LoomClient(client, on_daemon=True)
            follower = LiveFollower(sid)
            await follower.next(loom, 0)
            shown: list[tuple[float, Event]] = []
            calls = 0

            done = anyio.CancelScope()

            def arrived(events: list[Event]) -> None:
                shown.extend((time.perf_counter(), e) for e in events)
                if any(isinstance(e, RunFinished) for e in events):
                    done.cancel()  # the call would stay open for the rest of its wait, for a next run

            await call(client, "send_message", session_id=sid, text="go")
            with anyio.fail_after(30), done:
                while not any(isinstance(e, RunFinished) for _, e in shown):
                    calls += 1
                    await follower.stream(loom, 20, arrived)
    text = "".join(e.text for _, e in shown if isinstance(e, TextDelta))
    stored = next(e for _, e in shown if isinstance(e, AssistantMessage))
    assert text == WHOLE == stored.message.text  # every piece once, none doubled by the stored message
    seqs = [e.seq for _, e in shown if e.seq is not None]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, no duplicate
    # One call stayed open (a long-poll answers once per piece), and the pieces came as they were written,
    # GAP_S apart, not in a burst at the end.
    pieces = [t for t, e in shown if isinstance(e, TextDelta)]
    assert calls == 1, calls
    assert len(pieces) >= 4 and (pieces[-1] - pieces[0]) > 2 * GAP_S


async def test_a_stream_with_nothing_new_ends_after_wait_s_with_the_cursors_to_go_on(tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", [{"text": "done"}])
    with running_daemon(tmp_path / "home", tmp_path) as daemon:
        async with mcp_client(daemon, "legacy") as client:
            session = await call(client, "create_session", cwd=str(tmp_path), model=f"scripted:{script}")
            loom = LoomClient(client, on_daemon=True)
            history = await loom.read_events(session["session_id"])
            pushed: list[EventPage] = []
            started = time.perf_counter()
            last = await loom.stream_events(
                session["session_id"], pushed.append, after_seq=history.next_after_seq, wait_s=0.5, live_cursor=""
            )
            took = time.perf_counter() - started
    assert 0.45 < took < 10
    assert pushed == [] and last.events == [] and last.next_after_seq == history.next_after_seq
