"""The slash commands against a real daemon: /compact (and --preview), /model, /mode, /rewind, /resume, /trace."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from textual.pilot import Pilot

from clients.loom import LoomClient
from clients.loom.daemon import connect
from clients.tui.app import LoomApp
from clients.tui.checkpoint_picker import CheckpointPicker
from clients.tui.notice_line import NoticeLine
from orchestrator.events import EVENT_ADAPTER, ContextCompacted, Event, RunResumed, RunStarted
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon, start_daemon

pytestmark = pytest.mark.timeout(150)

LONG = "word " * 600


def notices(app: LoomApp) -> list[str]:
    return [n.text for n in app.conversation.query(NoticeLine)]


def has_notice(app: LoomApp, part: str) -> bool:
    return any(part in n for n in notices(app))


async def events_of(home: Path, session_id: str) -> list[Event]:
    async with connect(home) as session:
        page = await LoomClient(session, on_daemon=True).read_events(session_id, limit=1000)
    return [EVENT_ADAPTER.validate_python(e.model_dump()) for e in page.events]


async def prepared(home: Path, project: Path, model: str, messages: list[str], mode: str = "ask") -> str:
    """A session with ``messages`` answered, made through a client of our own (typing them would be slow)."""
    async with connect(home) as session:
        loom = LoomClient(session, on_daemon=True)
        info = await loom.create_session(str(project), model=model, mode=mode)
        for text in messages:
            run = await loom.send_message(info.session_id, text, wait_s=20)
            assert run.status == "completed", run
    return info.session_id


def test_compact_preview_then_compact_then_model_and_mode(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    first = tmp_path / "one.json"
    # A small window, so that four long answers give compaction something to replace (below the 0.8 threshold).
    first.write_text(json.dumps({"context_window": 10000, "turns": [{"text": f"{n} {LONG}"} for n in range(4)]}))
    second = write_script(tmp_path / "two.json", [{"text": "from the second model"}])

    async def drive() -> None:
        sid = await prepared(home, project, f"scripted:{first}", ["a", "b", "c", "d"])
        app = tui(home, project, f"scripted:{first}", session_id=sid)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await until(pilot, lambda: len(app.conversation.texts) == 4, "the history")
            await until(pilot, lambda: app.status.ratio is not None, "the watermark")
            before = app.status.ratio
            assert before is not None

            await type_message(pilot, "/compact --preview")
            await until(pilot, lambda: has_notice(app, "compaction preview:"), "the preview")
            assert not any(isinstance(e, ContextCompacted) for e in await events_of(home, sid))  # nothing changed

            await type_message(pilot, "/compact the words")
            await until(pilot, lambda: has_notice(app, "context compacted:"), "the compaction's event")
            assert has_notice(app, "messages summarised")
            (compacted,) = [e for e in await events_of(home, sid) if isinstance(e, ContextCompacted)]
            assert compacted.trigger == "manual" and compacted.dropped_messages > 0
            await until(pilot, lambda: (app.status.ratio or 1) < before, "the gauge to drop")

            await type_message(pilot, f"/model scripted:{second}")
            await until(pilot, lambda: app.status.model == f"scripted:{second}", "the status line's model")
            await type_message(pilot, "hello")
            await until(pilot, lambda: app.conversation.texts[-1].source == "from the second model", "its answer")
            starts = [e for e in await events_of(home, sid) if isinstance(e, RunStarted)]
            assert starts[-1].model == f"scripted:{second}"

            await type_message(pilot, "/mode plan")
            await until(pilot, lambda: has_notice(app, "mode: ask → plan by tui"), "the mode notice")
            assert app.status.mode == "plan"
            await type_message(pilot, "/mode sideways")
            await until(pilot, lambda: has_notice(app, "unknown mode 'sideways'"), "the refusal")
            async with connect(home) as session:  # another client changes it: the status line follows
                await LoomClient(session, on_daemon=True).set_mode(sid, "accept-edits", changed_by="cli")
            await until(pilot, lambda: app.status.mode == "accept-edits", "the status line to follow")
            assert has_notice(app, "mode: plan → accept-edits by cli")
        async with connect(home) as session:
            info = await LoomClient(session, on_daemon=True).get_session(sid)
        assert info.mode == "accept-edits"

    with running_daemon(home, tmp_path):
        anyio.run(drive)


def test_rewind_picks_a_checkpoint_from_the_list_and_restores_the_files(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    target = project / "notes.txt"
    write = {"name": "fs__write", "arguments": {"path": "notes.txt", "content": "first version"}}
    rewrite = {"name": "fs__write", "arguments": {"path": "notes.txt", "content": "second version"}}
    script = write_script(
        tmp_path / "s.json",
        [{"tool_calls": [write]}, {"text": "wrote it"}, {"tool_calls": [rewrite]}, {"text": "again"}],
    )

    async def pick(pilot: Pilot[int], app: LoomApp) -> CheckpointPicker:
        await type_message(pilot, "/rewind")
        await until(pilot, lambda: isinstance(app.screen, CheckpointPicker), "the picker")
        assert isinstance(app.screen, CheckpointPicker)
        return app.screen

    async def drive() -> tuple[str, str]:
        sid = await prepared(home, project, f"scripted:{script}", ["write notes", "rewrite notes"], mode="bypass")
        app = tui(home, project, f"scripted:{script}", session_id=sid)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await until(pilot, lambda: len(app.conversation.texts) == 2, "the history")
            picker = await pick(pilot, app)
            assert [c.prompt for c in picker.checkpoints] == ["rewrite notes", "write notes"]  # newest first
            await pilot.press("escape")  # backing out changes nothing
            await until(pilot, lambda: not isinstance(app.screen, CheckpointPicker), "the picker to close")
            assert app.session_id == sid and target.read_text() == "second version"
            await pick(pilot, app)
            await pilot.press("enter")  # the newest: back to before "rewrite notes"
            await until(pilot, lambda: app.session_id not in (None, sid), "the new branch")
            await until(pilot, lambda: has_notice(app, "rewound to before run"), "the notice")
            assert target.read_text() == "first version"
            assert app.session_id is not None
            return sid, app.session_id

    with running_daemon(home, tmp_path):
        old, new = anyio.run(drive)
    assert new != old


def test_resume_continues_the_run_the_daemon_interrupted(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "s.json", [{"text": "slowly done", "delay_s": 3.0}])
    model = f"scripted:{script}"
    daemon = start_daemon(home, tmp_path)

    async def drive() -> str:
        nonlocal daemon
        app = tui(home, project, model)
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await type_message(pilot, "/resume")  # no session yet
            await until(pilot, lambda: has_notice(app, "no session yet"), "the refusal")
            app.query_one("#prompt").clear()  # type: ignore[attr-defined]
            await type_message(pilot, "take your time")
            await until(pilot, lambda: app.status.run == "running", "the run to start")
            run_id = app.current_run
            assert run_id is not None
            await anyio.to_thread.run_sync(daemon.stop)  # stopped mid-run: it is recorded as interrupted
            daemon = await anyio.to_thread.run_sync(lambda: start_daemon(home, tmp_path, log_name="again"))
            await until(pilot, lambda: has_notice(app, "run interrupted"), "the interruption", 60)
            await type_message(pilot, "/trace")
            await until(pilot, lambda: has_notice(app, f"run {run_id}"), "the trace")
            await type_message(pilot, "/resume")
            await until(pilot, lambda: has_notice(app, f"resuming run {run_id}"), "the resume")
            await until(pilot, lambda: app.status.run == "completed", "the resumed run to finish", 30)
            assert [t.source for t in app.conversation.texts] == ["slowly done"]
            assert app.session_id is not None
            resumed = [e for e in await events_of(home, app.session_id) if isinstance(e, RunResumed)]
            assert [e.run_id for e in resumed] == [run_id]
            await type_message(pilot, "/resume")
            await until(pilot, lambda: has_notice(app, "nothing to resume"), "nothing left to resume")
            return run_id

    try:
        anyio.run(drive)
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()


def test_cancel_stops_the_running_run(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(tmp_path / "s.json", [{"text": "never finished", "delay_s": 30.0}])

    async def drive() -> None:
        app = tui(home, project, f"scripted:{script}")
        async with app.run_test(size=SIZE) as pilot:
            await connected(pilot)
            await type_message(pilot, "/cancel")
            await until(pilot, lambda: has_notice(app, "no run is going"), "nothing to cancel")
            await type_message(pilot, "go")
            await until(pilot, lambda: app.status.run == "running", "the run to start")
            await type_message(pilot, "/cancel")
            await until(pilot, lambda: app.status.run == "cancelled", "the run to be cancelled")
            assert has_notice(app, "cancelling run")

    with running_daemon(home, tmp_path):
        anyio.run(drive)
