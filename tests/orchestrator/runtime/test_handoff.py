"""Handing a session off to a fresh one, through a real host: store on SQLite, scripted models, real servers."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.context.handoff import BLOCKS
from orchestrator.context.history import rebuild_history
from orchestrator.events import Event, SessionArchived, SessionCreated, UserMessage
from orchestrator.events_long import HandoffWritten, MemoryArchived, TodoItem, TodoUpdated
from orchestrator.models.scripted import Script, ScriptedModel, ScriptedTurn
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.handoff import HandoffError
from orchestrator.runtime.host import HostError, SessionHost

pytestmark = pytest.mark.anyio

INSTRUCTION = 'Keep every line under 80 columns; never touch "setup.py".'
EXTRA = "Start with the failing test in tests/test_a.py, then stop."


def handoff(*, without: str = "", instruction: str = INSTRUCTION) -> ScriptedTurn:
    blocks = dict.fromkeys(BLOCKS, "none")
    blocks["Goal and constraints"] = f'- "{instruction}"'
    blocks["Work done"] = "- saved the build command as a session note (memory__set result seen)"
    blocks["Next step"] = "- run the tests"
    text = "\n\n".join(f"## {name}\n{body}" for name, body in blocks.items() if name != without)
    return ScriptedTurn(text=text)


def first_session_turns() -> list[dict[str, Any]]:
    note = {"namespace": "session", "key": "build", "body": "make test runs the suite"}
    return [
        {"text": "Noting it.", "tool_calls": [{"name": "memory__set", "arguments": note}]},
        {"text": "Noted the build command."},
        {"text": "Carrying on from the handoff."},
    ]


@asynccontextmanager
async def hosted(tmp_path: Path) -> AsyncIterator[SessionHost]:
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        yield host


async def events_of(host: SessionHost, session_id: str) -> list[Event]:
    return await host.runtime.log.store.read_events(session_id)


async def finished(host: SessionHost, session_id: str, text: str) -> str:
    handle = await host.start_run(session_id, text, 10)
    with anyio.fail_after(20):
        await handle.done.wait()
    assert handle.result is not None, handle.status
    return handle.result.final_text


async def test_the_fresh_session_starts_from_the_handoff_and_the_old_one_is_archived_intact(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    model = ScriptedModel(Script(turns=[ScriptedTurn.model_validate(t) for t in first_session_turns()],
                                 summaries=[handoff()]))  # fmt: skip
    async with hosted(tmp_path) as host:
        old = await host.create_session(work, model, "bypass")
        assert await finished(host, old.id, INSTRUCTION) == "Noted the build command."
        before = await events_of(host, old.id)
        report = await host.handoffs.handoff(old.id, EXTRA)
        new_id = report.new_session_id
        after = await events_of(host, old.id)
        created = (await events_of(host, new_id))[0]
        old_record = await host.record(old.id)
        listed = [s.id for s in await host.list_sessions()]
        # The fresh session's first message, sent later: its first request opens with the handoff.
        sent_before = len(model.requests)
        assert await finished(host, new_id, "go on") == "Carrying on from the handoff."
        first = model.requests[sent_before]
        fresh = host.sessions[new_id]
        in_memory = list(fresh.history)
        rebuilt = rebuild_history(await events_of(host, new_id))
        with pytest.raises(HostError, match="was handed off to session"):
            await host.start_run(old.id, "more", 5)

    assert report.session_id == old.id and report.archived and report.instructions == [INSTRUCTION]
    assert report.extra == EXTRA and report.attempts == 1
    # The old session: every event it had is still there, unchanged; then the handoff and the archive.
    assert after[: len(before)] == before
    tail = after[len(before) :]
    assert [type(e) for e in tail] == [HandoffWritten, SessionArchived, MemoryArchived]
    written = tail[0]
    assert isinstance(written, HandoffWritten) and written.to_session_id == new_id and INSTRUCTION in written.text
    assert isinstance(tail[2], MemoryArchived) and tail[2].keys == ["build"]
    assert old_record.archived and old.id not in listed and new_id in listed
    # Same directory, mode, model; the link back to the old session.
    assert isinstance(created, SessionCreated) and created.handoff_from == old.id
    assert (created.cwd, created.mode, created.model) == (str(work.resolve()), "bypass", model.name)
    # The first request of the fresh session: the handoff, the instruction and the extra text verbatim, then "go on".
    opening = first.messages[0].text
    assert first.purpose == "turn" and f"handoff of session {old.id}" in opening
    assert INSTRUCTION in opening and EXTRA in opening and "## Warnings" in opening
    assert first.messages[1].text == "go on"
    # A reopened fresh session rebuilds exactly what the open one holds.
    assert rebuilt == in_memory


async def test_a_handoff_missing_a_block_is_retried_then_refused_and_nothing_changes(tmp_path: Path) -> None:
    model = ScriptedModel(
        Script(turns=[ScriptedTurn(text="Done.")], summaries=[handoff(without="Warnings"), handoff(without="Warnings")])
    )
    async with hosted(tmp_path) as host:
        old = await host.create_session(tmp_path, model, "bypass")
        await finished(host, old.id, INSTRUCTION)
        before = await events_of(host, old.id)
        sessions_before = await host.list_sessions(include_archived=True)
        with pytest.raises(HandoffError) as refused:
            await host.handoffs.handoff(old.id)
        after = await events_of(host, old.id)
        sessions_after = await host.list_sessions(include_archived=True)
        record = await host.record(old.id)
        assert await finished(host, old.id, "still here?") == "(The script has no more turns.)"
    message = str(refused.value)
    assert "failed its checks 2 times" in message and '"## Warnings"' in message and "is as it was" in message
    asks = [r for r in model.requests if r.purpose == "summary"]
    assert len(asks) == 2 and "Your previous handoff was rejected" in asks[1].messages[0].text
    assert after == before and not record.archived
    assert [s.id for s in sessions_after] == [s.id for s in sessions_before]


async def test_a_handoff_that_drops_an_instruction_is_retried_and_the_second_one_stands(tmp_path: Path) -> None:
    model = ScriptedModel(
        Script(turns=[ScriptedTurn(text="Done.")], summaries=[handoff(instruction="keep lines short"), handoff()])
    )
    async with hosted(tmp_path) as host:
        old = await host.create_session(tmp_path, model, "bypass")
        await finished(host, old.id, INSTRUCTION)
        report = await host.handoffs.handoff(old.id, keep_memory=True)
        tail = (await events_of(host, old.id))[-2:]
    assert report.attempts == 2 and report.memory is None
    asks = [r for r in model.requests if r.purpose == "summary"]
    assert "user instructions not quoted verbatim" in asks[1].messages[0].text
    assert [type(e) for e in tail] == [HandoffWritten, SessionArchived]  # kept memory: no memory_archived


async def test_a_busy_session_is_refused_and_the_plan_is_carried_verbatim(tmp_path: Path) -> None:
    model = ScriptedModel(Script(turns=[ScriptedTurn(text="slow", delay_s=30)], summaries=[handoff()]))
    async with hosted(tmp_path) as host:
        old = await host.create_session(tmp_path, model, "bypass")
        handle = await host.start_run(old.id, INSTRUCTION, 5)
        with pytest.raises(HandoffError, match="is busy"):
            await host.handoffs.handoff(old.id)
        await host.cancel(handle.run_id)
        with anyio.fail_after(10):
            await handle.done.wait()
        plan = [TodoItem(text="write the *parser*  (twice)", status="completed"), TodoItem(text="test it")]
        await host.runtime.log.append(TodoUpdated(session_id=old.id, items=plan))
        report = await host.handoffs.handoff(old.id)
        shown = await host.handoffs.get(report.new_session_id)
        by_old = await host.handoffs.get(old.id)
        with pytest.raises(HandoffError, match="already handed off"):
            await host.handoffs.handoff(old.id)
        with pytest.raises(HostError, match="has no handoff"):
            await host.handoffs.get((await host.create_session(tmp_path, model, "bypass")).id)
    assert "1. [x] write the *parser*  (twice)\n2. [ ] test it" in report.text
    assert shown == by_old and shown.new_session_id == report.new_session_id and shown.text == report.text


async def test_a_reopened_fresh_session_still_starts_from_the_handoff(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    turns = [ScriptedTurn(text="Done."), ScriptedTurn(text="Fresh and reopened.")]
    script.write_text(Script(turns=turns, summaries=[handoff()]).model_dump_json())
    work = tmp_path / "work"
    work.mkdir()
    async with hosted(tmp_path) as host:
        model = ScriptedModel.from_file(script)
        old = await host.create_session(work, model, "accept-edits")
        await finished(host, old.id, INSTRUCTION)
        new_id = (await host.handoffs.handoff(old.id)).new_session_id
    async with hosted(tmp_path) as host:  # another process: the fresh session is reopened from the store
        reopened = await host.session(new_id)
        history = list(reopened.history)
        events = await events_of(host, new_id)
    assert reopened.approvals.bounds.effective_mode == "accept-edits"
    assert len(history) == 1 and history[0].role == "user" and INSTRUCTION in history[0].text
    assert not any(isinstance(e, UserMessage) for e in events)


async def test_a_childs_handoff_continues_as_a_child_of_the_same_parent_within_the_same_bounds(tmp_path: Path) -> None:
    model = ScriptedModel(Script(turns=[ScriptedTurn(text="Child done.")], summaries=[handoff()]))
    async with hosted(tmp_path) as host:
        parent = await host.create_session(tmp_path, model, "accept-edits")
        child = await host.create_child(parent.id, lambda *_: model, mode="plan", allow=["fs__*"])
        await finished(host, child.id, INSTRUCTION)
        report = await host.handoffs.handoff(child.id)
        fresh = host.sessions[report.new_session_id]
        old_record, new_record = await host.record(child.id), await host.record(fresh.id)
        sees = {t.name for t in fresh.hub.tools if fresh.approvals.bounds.sees(t.name)}
        saw = {t.name for t in child.hub.tools if child.approvals.bounds.sees(t.name)}
        created = (await events_of(host, fresh.id))[0]
    assert old_record.archived and new_record.parent_session_id == parent.id
    assert fresh.approvals.bounds.effective_mode == "plan" and new_record.mode == "plan"
    assert sees == saw and "fs__read" in sees and "shell__run" not in sees  # the same allow-list narrows it
    assert isinstance(created, SessionCreated) and created.handoff_from == child.id and created.request is not None


async def test_a_fresh_session_that_cannot_be_opened_leaves_the_old_one_as_it_was(tmp_path: Path) -> None:
    model = ScriptedModel(Script(turns=[ScriptedTurn(text="Done.")], summaries=[handoff()]))
    async with hosted(tmp_path) as host:
        old = await host.create_session(tmp_path, model, "bypass")
        await finished(host, old.id, INSTRUCTION)
        before = await events_of(host, old.id)
        # The policy file turned unreadable since the session opened: opening the fresh one fails before it is stored.
        (host.runtime.home / "policy.toml").write_text("[[rules]\nthis is not toml")
        with pytest.raises(HostError, match="could not open a session"):
            await host.handoffs.handoff(old.id)
        after = await events_of(host, old.id)
        record = await host.record(old.id)
        sessions = await host.list_sessions(include_archived=True)
        assert await finished(host, old.id, "still yours") == "(The script has no more turns.)"
    assert after == before and not record.archived and [s.id for s in sessions] == [old.id]


async def test_a_scripted_model_without_scripted_summaries_writes_a_handoff_that_passes(tmp_path: Path) -> None:
    model = ScriptedModel(Script(turns=[ScriptedTurn(text="Done.")]))  # as the demo: nothing scripted for it
    async with hosted(tmp_path) as host:
        old = await host.create_session(tmp_path, model, "bypass")
        await finished(host, old.id, INSTRUCTION)
        report = await host.handoffs.handoff(old.id)
    assert report.attempts == 1 and f'"{INSTRUCTION}"' in report.text
    assert all(f"## {name}" in report.text for name in BLOCKS)


async def test_notes_that_cannot_be_promoted_leave_the_handoff_standing_and_say_why(tmp_path: Path) -> None:
    model = ScriptedModel(Script(turns=[ScriptedTurn(text="Done.")], summaries=[handoff()]))
    async with hosted(tmp_path) as host:
        old = await host.create_session(tmp_path, model, "bypass")
        await finished(host, old.id, INSTRUCTION)
        # A memory file a newer Loom wrote: the memory server refuses it, so nothing can be promoted.
        with sqlite3.connect(host.runtime.home / "memory.db") as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', '99')")
        report = await host.handoffs.handoff(old.id)
        record = await host.record(old.id)
    assert report.memory is None and "newer than this server knows" in report.memory_error
    assert record.archived and report.new_session_id
