"""The footer: tokens the run's model calls used, and the run's elapsed time, ticking while it goes."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from clients.loom import LoomClient
from clients.loom.daemon import connect
from clients.tui.app import LoomApp
from clients.tui.text import elapsed, token_count
from orchestrator.events import EVENT_ADAPTER, RunStarted
from tests.clients.cli_support import make_project, write_script
from tests.clients.tui.support import SIZE, connected, stored_messages, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.timeout(120)

CLOCK = re.compile(r" (\d+:\d\d)(?: |$)")


def clock(app: LoomApp) -> str:
    found = CLOCK.search(app.status.render().plain)
    return found.group(1) if found else ""


async def drive(home: Path, project: Path, model: str) -> tuple[str, int, float, float, str, list[str]]:
    app = tui(home, project, model)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        await type_message(pilot, "think about it")
        await until(pilot, lambda: app.status.run == "running" and bool(clock(app)), "the run's clock")
        seen = [clock(app)]
        await until(pilot, lambda: clock(app) != seen[0], "the clock to tick while the run goes", timeout_s=5)
        seen.append(clock(app))
        await until(pilot, lambda: app.status.run == "completed", "the run to finish")
        status = app.status
        assert app.session_id is not None and status.started is not None and status.finished is not None
        line = status.render().plain
        assert len(line) <= status.size.width
        return app.session_id, status.tokens, status.started, status.finished, line, seen


async def run_started(home: Path, session_id: str) -> RunStarted:
    async with connect(home) as session:
        page = await LoomClient(session, on_daemon=True).read_events(session_id)
    events = [EVENT_ADAPTER.validate_python(e.model_dump()) for e in page.events]
    (started,) = [e for e in events if isinstance(e, RunStarted)]
    return started


def test_the_footer_counts_the_runs_tokens_and_times_it_from_its_start(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(
        tmp_path / "s.json",
        [
            {"text": "Looking.", "tool_calls": [{"name": "fs__list", "arguments": {"path": "."}}]},
            {"text": "Thought it over: " + "the widgets are blue. " * 10, "delay_s": 2.2},
        ],
    )
    with running_daemon(home, tmp_path):
        sid, tokens, started, finished, line, seen = anyio.run(drive, home, project, f"scripted:{script}")
        stored = anyio.run(stored_messages, home, sid)
        begun = anyio.run(run_started, home, sid)

    used = sum(m.usage.input_tokens + m.usage.output_tokens for m in stored)
    assert len(stored) == 2 and tokens == used > 0
    assert started == begun.ts and finished - started >= 2.2
    assert f"{token_count(used)} tok" in line, line  # it fits in 80 columns
    assert f" {elapsed(finished - started)}" in line and "completed" in line and "connected" in line, line
    assert seen[0] != seen[1]


def test_the_tokens_are_the_runs_like_its_step_and_clock() -> None:
    # A session opened at its end shows its last runs only: a session total counted from what is shown would lie.
    from clients.tui.status_bar import StatusBar
    from orchestrator.events import AssistantMessage, RunStarted
    from orchestrator.messages import Message, TextBlock, Usage

    bar = StatusBar()

    def answer(run: str, tokens: int) -> AssistantMessage:
        message = Message(role="assistant", content=[TextBlock(text="ok")])
        usage = Usage(input_tokens=tokens, output_tokens=1)
        return AssistantMessage(
            session_id="s", run_id=run, step=0, message=message, stop_reason="end_turn", usage=usage, duration_ms=1
        )

    bar.observe(RunStarted(session_id="s", run_id="r_1", model="m", max_steps=5))
    bar.observe(answer("r_1", 10))
    bar.observe(answer("r_1", 20))
    assert bar.tokens == 32
    bar.observe(RunStarted(session_id="s", run_id="r_2", model="m", max_steps=5))
    assert bar.tokens == 0
    bar.observe(answer("r_2", 5))
    assert bar.tokens == 6
