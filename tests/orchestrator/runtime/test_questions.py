"""The questions desk: a child's questions listed under its ancestors, and what a hostile server cannot make it do.

Real event log over a real SQLite store; the asking side is a task, as a server's request is in the hub.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.events import QuestionAnswered, QuestionAsked
from orchestrator.runtime.questions import MAX_OPEN_PER_SESSION, PendingQuestion, QuestionDesk, QuestionError
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

pytestmark = pytest.mark.anyio

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture
async def desk(tmp_path: Path) -> AsyncIterator[QuestionDesk]:
    async with CheckpointStore(tmp_path / "loom.db") as store:
        yield QuestionDesk(EventLog(store), timeout_s=5)


async def until(condition: Callable[[], bool]) -> None:
    """Wait (at most 5 s) for ``condition``: the asking tasks run meanwhile."""
    for _ in range(500):
        if condition():
            return
        await anyio.sleep(0.01)
    raise AssertionError("timed out waiting")


async def ask(desk: QuestionDesk, answers: list[PendingQuestion], **how: Any) -> None:
    fields: dict[str, Any] = {
        "session_id": "s_child", "ancestors": ("s_parent", "s_top"), "run_id": "r_1", "server": "crm",
        "message": "Who?", "requested_schema": FORM, **how,
    }  # fmt: skip
    answers.append(await desk.ask(**fields))


async def test_a_childs_question_is_listed_under_each_ancestor_and_answered_from_there(desk: QuestionDesk) -> None:
    answers: list[PendingQuestion] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, desk, answers)
        await until(lambda: bool(desk.open_questions()))
        (q,) = desk.open_questions("s_top")
        assert desk.open_questions("s_parent") == [q] and desk.open_questions("s_other") == []
        await desk.answer(q.question_id, "accept", {"name": "Ann"}, "parent-client")
    assert (answers[0].action, answers[0].content) == ("accept", {"name": "Ann"})
    events = await desk.log.store.read_events("s_child")
    assert [type(e) for e in events] == [QuestionAsked, QuestionAnswered]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ({"name": {"nested": "object"}}, "only text, numbers"),
        ({"name": 3}, "is not of type 'string'"),
        ({}, "'name' is a required property"),
        (None, "needs content"),
    ],
)
async def test_an_answer_that_does_not_fit_is_refused_and_the_question_stays_open(
    desk: QuestionDesk, content: dict[str, Any] | None, why: str
) -> None:
    answers: list[PendingQuestion] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, desk, answers)
        await until(lambda: bool(desk.open_questions()))
        (q,) = desk.open_questions()
        with pytest.raises(QuestionError, match=why):
            await desk.answer(q.question_id, "accept", content, "client")
        with pytest.raises(QuestionError, match="unknown action"):
            await desk.answer(q.question_id, "maybe", None, "client")
        assert desk.open_questions() == [q]
        await desk.answer(q.question_id, "decline", None, "client")
    assert answers[0].action == "decline" and answers[0].content is None


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ({"requested_schema": {"type": 12}}, "not valid JSON Schema"),
        ({"requested_schema": {"type": "object", "description": "x" * 30_000}}, "too large"),
        ({"mode": "url", "url": "javascript:alert(1)", "requested_schema": None}, "not an http(s) URL"),
        ({"headless": True}, "headless"),
    ],
)
async def test_what_a_server_cannot_make_loom_show_is_declined_at_once_saying_why(
    desk: QuestionDesk, how: dict[str, Any], why: str
) -> None:
    answers: list[PendingQuestion] = []
    with anyio.fail_after(5):
        await ask(desk, answers, **how)
    assert answers[0].action == "decline" and why in answers[0].reason and answers[0].answered_by == "loom"
    assert desk.open_questions() == []


async def test_a_server_asking_more_at_once_than_anyone_could_answer_is_declined_past_the_cap(
    desk: QuestionDesk,
) -> None:
    answers: list[PendingQuestion] = []
    async with anyio.create_task_group() as tg:
        for _ in range(MAX_OPEN_PER_SESSION + 3):
            tg.start_soon(ask, desk, answers)
        await until(lambda: len(answers) >= 3)
        assert len(desk.open_questions()) == MAX_OPEN_PER_SESSION
        assert all("open questions" in a.reason for a in answers)
        tg.cancel_scope.cancel()  # the server's calls end: the open ones are cancelled, saying so
    events = await desk.log.store.read_events("s_child")
    cancelled = [e for e in events if isinstance(e, QuestionAnswered) and e.action == "cancel"]
    assert len(cancelled) == MAX_OPEN_PER_SESSION and all("ended first" in e.reason for e in cancelled)
