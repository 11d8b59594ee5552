"""A long stored session opens at its end through a real daemon, and its older runs come as the user scrolls up."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.tui.app import LoomApp
from clients.tui.user_message import UserMessageBlock
from orchestrator.events import AssistantMessage, Notice, RunFinished, RunStarted, UserMessage
from orchestrator.messages import Message, TextBlock, Usage
from orchestrator.models import resolve_model
from orchestrator.protocol import Event
from orchestrator.runtime.embedded import embedded_runtime
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import start_daemon

pytestmark = pytest.mark.timeout(240)

RUNS = 500
"""2,168 stored events: four a run (started, question, answer, finished), a notice in every third run (so that
pages of 200 begin inside runs), and the session's first."""
NOTES = len(range(0, RUNS, 3))


def _run(session_id: str, i: int) -> list[Event]:
    run = f"r_{i:05d}"
    answer = Message(role="assistant", content=[TextBlock(text=f"answer {i}")])
    note: list[Event] = [Notice(session_id=session_id, text=f"note {i}")] if i % 3 == 0 else []
    return [
        RunStarted(session_id=session_id, run_id=run, model="scripted:stored", max_steps=5),
        UserMessage(session_id=session_id, run_id=run, text=f"question {i}"),
        AssistantMessage(
            session_id=session_id,
            run_id=run,
            step=0,
            message=answer,
            stop_reason="end_turn",
            usage=Usage(input_tokens=1, output_tokens=1),
            duration_ms=1,
        ),
        *note,
        RunFinished(session_id=session_id, run_id=run, status="completed", reason="end_turn", final_text="", steps=1),
    ]


def _stored_session(home: Path, project: Path, model: str) -> str:
    async def store() -> str:
        async with embedded_runtime(home) as runtime:
            async with runtime.open_session(project, resolve_model(model)) as session:
                session_id = session.id
            for i in range(RUNS):
                await runtime.log.store.append(_run(session_id, i))
        return session_id

    return anyio.run(store)


def _questions(app: LoomApp) -> list[int]:
    """Every question the conversation holds, in order (mounted or not: each block's widget made afresh)."""
    made = [entry._make() for entry in app.conversation._entries]  # the records, not the window
    assert isinstance(made[0], UserMessageBlock), "the first block held is a run's beginning, not its end"
    return [int(b.text.split()[1]) for b in made if isinstance(b, UserMessageBlock)]


def _mounted_questions(app: LoomApp) -> list[int]:
    return [int(b.text.split()[1]) for b in app.conversation.query(UserMessageBlock)]


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, Path, str, str]:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    model = f"scripted:{write_script(tmp_path / 's.json', [{'text': 'a live answer'}])}"
    return home, project, model, _stored_session(home, project, model)


def _drive(tmp_path: Path, home: Path, check: object) -> None:
    daemon = start_daemon(home, tmp_path)
    try:
        anyio.run(check)  # type: ignore[arg-type]
    finally:
        daemon.stop()


def test_it_opens_showing_the_last_question_with_only_the_tail_read(
    tmp_path: Path, stored: tuple[Path, Path, str, str]
) -> None:
    home, project, model, session_id = stored

    async def check() -> None:
        app = tui(home, project, model, session_id=session_id)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await until(pilot, lambda: _mounted_questions(app)[-1:] == [RUNS - 1], "the last question")
            held = _questions(app)
            assert held == list(range(held[0], RUNS))  # whole runs, the newest, in order
            assert 200 // 5 <= len(held) <= 200 // 4  # one page of 200 events' whole runs, not 2,168 events
            assert app.conversation.has_older

    _drive(tmp_path, home, check)


def test_home_brings_every_older_block_exactly_once_and_a_live_run_then_streams(
    tmp_path: Path, stored: tuple[Path, Path, str, str]
) -> None:
    home, project, model, session_id = stored

    async def check() -> None:
        app = tui(home, project, model, session_id=session_id)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await until(pilot, lambda: bool(app.conversation.block_count), "the tail")
            app.conversation.focus()
            await pilot.press("home")
            await until(pilot, lambda: not app.conversation.has_older, "every older run", 60)
            await until(pilot, lambda: _mounted_questions(app)[:1] == [0], "the top")
            assert _questions(app) == list(range(RUNS))
            assert app.conversation.block_count == 2 * RUNS + NOTES
            await pilot.press("end")
            app.query_one("Prompt").focus()
            await type_message(pilot, "live")
            live = [f"answer {RUNS - 1}", "a live answer"]
            await until(pilot, lambda: [t.source for t in app.conversation.texts][-2:] == live, "the live answer")
            await until(pilot, lambda: app.status.run == "completed" and app.current_run is None, "the run's end")
            assert app.conversation.block_count == 2 * RUNS + NOTES + 2

    _drive(tmp_path, home, check)


def test_scrolling_up_reads_the_runs_before_keeping_each_once_in_order(
    tmp_path: Path, stored: tuple[Path, Path, str, str]
) -> None:
    home, project, model, session_id = stored

    async def check() -> None:
        app = tui(home, project, model, session_id=session_id)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await until(pilot, lambda: bool(app.conversation.block_count), "the tail")
            first = _questions(app)[0]
            app.conversation.focus()
            for _ in range(300):
                if _questions(app)[0] < first:
                    break
                await pilot.press("pageup")
                await pilot.pause(0.05)
            held = _questions(app)
            assert held[0] < first and held == list(range(held[0], RUNS))
            mounted = _mounted_questions(app)
            assert mounted == list(range(mounted[0], mounted[0] + len(mounted)))

    _drive(tmp_path, home, check)
