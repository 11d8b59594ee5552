"""Loop detection: what counts as a loop, and a looping run noticed then stopped, through a real Session.

Real parts: the scripted model, Loom's fs server and small in-process MCP servers over the hub, SQLite.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from orchestrator.config import LoopSettings
from orchestrator.context.history import rebuild_history
from orchestrator.context.truncation import clip_result
from orchestrator.events import Event, RunFinished
from orchestrator.events_long import LoopDetected
from orchestrator.hub.pool import Hub
from orchestrator.loop.repeats import RepeatWatch, signature
from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from orchestrator.models.base import ModelEvent, ModelRequest
from orchestrator.models.scripted import Script, ScriptedModel, ScriptedTurn
from orchestrator.runtime.session import Session
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

pytestmark = pytest.mark.anyio

NOTICE = "[Loom] Loop detected"


# -- what counts ---------------------------------------------------------------------------------------------


class Steps:
    """Feeds a detector steps of one call each, with ids that differ every time as a model's do."""

    def __init__(self) -> None:
        self.watch = RepeatWatch(LoopSettings())
        self.n = 0

    def step(self, name: str, arguments: dict[str, Any], result: str, *, is_error: bool = False) -> tuple[int, int]:
        self.n += 1
        use = ToolUseBlock(id=f"toolu_{self.n:04d}", name=name, input=arguments)
        block = ToolResultBlock(tool_use_id=use.id, content=result, is_error=is_error)
        return self.watch.count([use], [block])


def test_the_same_call_with_the_same_result_counts_each_time_it_comes_round() -> None:
    steps = Steps()
    counts = [steps.step("fs__read", {"path": "a.txt"}, "hello") for _ in range(4)]
    assert counts == [(0, 0), (2, 1), (3, 1), (4, 1)]


def test_a_poll_whose_output_changes_is_progress_not_a_loop() -> None:
    steps = Steps()
    counts = [steps.step("shell__run", {"command": "make test"}, f"{9 - i} tests failing") for i in range(8)]
    assert counts == [(0, 0)] * 8


def test_the_same_tool_with_other_arguments_is_not_a_loop() -> None:
    steps = Steps()
    counts = [steps.step("fs__read", {"path": f"{i}.txt"}, "same text") for i in range(6)]
    assert counts == [(0, 0)] * 6


def test_the_same_call_failing_the_same_way_is_a_loop() -> None:
    steps = Steps()
    for _ in range(2):
        steps.step("fs__edit", {"path": "a.py", "old": "x", "new": "y"}, "old text not found", is_error=True)
    assert steps.step("fs__edit", {"path": "a.py", "old": "x", "new": "y"}, "old text not found", is_error=True) == (
        3,
        1,
    )
    # the same text, once an error and once not, is not the same result
    assert steps.step("fs__edit", {"path": "a.py", "old": "x", "new": "y"}, "old text not found") == (0, 0)


def test_arguments_compare_as_canonical_json_whatever_their_key_order() -> None:
    steps = Steps()
    steps.step("shell__run", {"command": "ls", "timeout": 5, "env": {"B": "1", "A": "2"}}, "out")
    assert steps.step("shell__run", {"env": {"A": "2", "B": "1"}, "timeout": 5, "command": "ls"}, "out") == (2, 1)
    assert signature(ToolUseBlock(id="t", name="x", input={"b": 1, "a": [True, None]})) == 'x({"a":[true,null],"b":1})'
    # 1 and true are equal in Python but not in JSON: not the same call
    assert steps.step("shell__run", {"command": "ls", "timeout": True, "env": {"A": "2", "B": "1"}}, "out") == (0, 0)


def test_a_cycle_of_two_steps_counts_its_whole_rounds() -> None:
    steps = Steps()
    counts = []
    for _ in range(3):
        counts.append(steps.step("fs__edit", {"path": "a.py"}, "edited"))
        counts.append(steps.step("shell__run", {"command": "pytest"}, "1 failed"))
    assert counts == [(0, 0), (0, 0), (0, 0), (2, 2), (0, 0), (3, 2)]


def test_a_cycle_of_three_steps_is_found_and_a_different_step_breaks_it() -> None:
    steps = Steps()
    cycle = [("fs__read", {"path": "a"}, "A"), ("fs__read", {"path": "b"}, "B"), ("fs__read", {"path": "c"}, "C")]
    counts = [steps.step(*call) for _ in range(3) for call in cycle]
    assert counts[-1] == (3, 3) and counts[2] == (0, 0) and counts[5] == (2, 3)
    steps.step("fs__list", {}, "a b c")  # something else: the cycle is broken and counting starts again
    assert [steps.step(*call) for call in cycle] == [(0, 0)] * 3


def test_a_long_result_cut_to_size_still_compares_though_its_note_names_each_call() -> None:
    steps = Steps()
    log = "\n".join(f"line {i}: waiting for the build" for i in range(2000))
    counts = []
    for _ in range(3):
        call_id = f"toolu_{steps.n + 1:04d}"
        counts.append(steps.step("shell__run", {"command": "cat build.log"}, clip_result(log, call_id)))
    assert counts[-1] == (3, 1)


def test_a_batch_counts_as_one_step_and_the_order_of_its_calls_matters() -> None:
    watch = RepeatWatch(LoopSettings())

    def batch(n: int, order: list[str]) -> tuple[int, int]:
        uses = [ToolUseBlock(id=f"t{n}{p}", name="fs__read", input={"path": p}) for p in order]
        return watch.count(uses, [ToolResultBlock(tool_use_id=u.id, content=u.input["path"]) for u in uses])

    assert [batch(1, ["a", "b"]), batch(2, ["a", "b"]), batch(3, ["a", "b"])] == [(0, 0), (2, 1), (3, 1)]
    assert batch(4, ["b", "a"]) == (0, 0)


# -- a run that loops ----------------------------------------------------------------------------------------


def reading(n: int, path: str = "notes.txt") -> list[dict[str, Any]]:
    return [
        {"text": f"Reading, pass {i}.", "tool_calls": [{"name": "fs__read", "arguments": {"path": path}}]}
        for i in range(n)
    ]


@contextlib.asynccontextmanager
async def session_for(
    tmp_path: Path, model: Recorded, loop: LoopSettings | None = None, extra: dict[str, MCPServer] | None = None
) -> AsyncIterator[Session]:
    from servers import fs

    async with CheckpointStore(tmp_path / "loom.db") as store:
        async with Hub({"fs": fs.build_server([tmp_path]), **(extra or {})}) as hub:
            yield Session("s_test", tmp_path, model, hub, EventLog(store), loop=loop)


async def stored(session: Session) -> list[Event]:
    return await session.log.store.read_events(session.id)


class Recorded(ScriptedModel):
    """A scripted model that keeps what each request held when it was sent (the loop's history list grows on)."""

    def __init__(self, turns: list[dict[str, Any]]) -> None:
        super().__init__(Script(turns=[ScriptedTurn.model_validate(t) for t in turns]))
        self.sent: list[list[Message]] = []
        self._waits: dict[int, anyio.Event] = {}

    async def until_sent(self, n: int) -> None:
        """Wait until ``n`` requests have been sent."""
        if len(self.sent) < n:
            await self._waits.setdefault(n, anyio.Event()).wait()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.sent.append(list(request.messages))
        if (waiting := self._waits.get(len(self.sent))) is not None:
            waiting.set()
        async for event in super().stream(request):
            yield event


def texts_after_results(messages: list[Message]) -> list[str]:
    """The text blocks of the last message sent, a tool-results turn."""
    last = messages[-1]
    assert any(isinstance(b, ToolResultBlock) for b in last.content)
    return [b.text for b in last.content if isinstance(b, TextBlock)]


async def test_a_looping_run_is_told_after_three_rounds_and_stopped_after_five(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing new here\n")
    model = Recorded([*reading(8), {"text": "never reached"}])
    async with session_for(tmp_path, model) as session:
        result = await session.run("read notes.txt until it changes")
        events = await stored(session)
        in_memory = list(session.history)

    assert result.status == "failed" and result.steps == 5, result
    assert result.reason == 'loop: fs__read({"path":"notes.txt"}) repeated 5 times in a row with the same result'
    assert len(model.sent) == 5  # stopped before a sixth model call
    # The model was told after the third and the fourth round, after that step's results; not before.
    assert [NOTICE in " ".join(texts_after_results(r)) for r in model.sent[1:]] == [False, False, True, True]
    (notice,) = texts_after_results(model.sent[3])
    assert "3 times in a row" in notice and 'fs__read({"path":"notes.txt"})' in notice and "5 times" in notice
    loops = [e for e in events if isinstance(e, LoopDetected)]
    assert [(e.action, e.repeats, e.step, e.period) for e in loops] == [
        ("notice", 3, 3, 1),
        ("notice", 4, 4, 1),
        ("stop", 5, 5, 1),
    ]
    assert loops[0].calls == ['fs__read({"path":"notes.txt"})'] and loops[0].note == notice and loops[2].note == ""
    (finished,) = [e for e in events if isinstance(e, RunFinished)]
    assert (finished.status, finished.reason) == ("failed", result.reason)
    assert (finished.seq or 0) > (loops[-1].seq or 0)
    # A rebuilt history places the notices where the loop did: the same conversation as the open session's.
    assert rebuild_history(events) == in_memory


async def test_a_cycle_of_two_calls_is_stopped_and_named(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A\n")
    (tmp_path / "b.txt").write_text("B\n")
    turns = [turn for _ in range(5) for turn in (*reading(1, "a.txt"), *reading(1, "b.txt"))]
    model = Recorded(turns)
    async with session_for(tmp_path, model, LoopSettings(notice_after=2, stop_after=3)) as session:
        result = await session.run("compare a and b")
        events = await stored(session)

    assert (result.status, result.steps) == ("failed", 6), result
    assert result.reason == (
        'loop: the cycle fs__read({"path":"a.txt"}) → fs__read({"path":"b.txt"}) came round 3 times in a row with '
        "the same results"
    )
    loops = [(e.action, e.repeats, e.step, e.period) for e in events if isinstance(e, LoopDetected)]
    assert loops == [("notice", 2, 4, 2), ("stop", 3, 6, 2)]
    assert "same cycle of 2 steps" in " ".join(texts_after_results(model.sent[4]))


def job_server(outputs: list[str]) -> MCPServer:
    """A job to poll: each call answers the next of ``outputs`` (then the last one again)."""
    server = MCPServer("job", log_level="WARNING")
    calls = [0]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def status() -> str:
        """How the job is doing."""
        calls[0] += 1
        return outputs[min(calls[0], len(outputs)) - 1]

    return server


async def test_polling_a_job_whose_output_changes_runs_to_the_end(tmp_path: Path) -> None:
    outputs = [f"building: {10 * i}%" for i in range(1, 10)]
    poll = {"text": "Checking.", "tool_calls": [{"name": "job__status", "arguments": {}}]}
    model = Recorded([*[poll] * 9, {"text": "Built."}])
    async with session_for(tmp_path, model, extra={"job": job_server(outputs)}) as session:
        result = await session.run("wait for the build")
        events = await stored(session)

    assert (result.status, result.final_text, result.steps) == ("completed", "Built.", 10), result
    assert not [e for e in events if isinstance(e, LoopDetected)]
    assert not any(NOTICE in " ".join(texts_after_results(r)) for r in model.sent[1:])


async def test_polling_a_job_that_says_the_same_every_time_is_stopped(tmp_path: Path) -> None:
    poll = {"text": "Checking.", "tool_calls": [{"name": "job__status", "arguments": {}}]}
    model = Recorded([*[poll] * 9, {"text": "Built."}])
    async with session_for(tmp_path, model, extra={"job": job_server(["building: 10%"])}) as session:
        result = await session.run("wait for the build")

    assert (result.status, result.steps) == ("failed", 5) and result.reason.startswith("loop: job__status({})")


async def test_with_loop_detection_off_a_repeating_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing new here\n")
    model = Recorded([*reading(7), {"text": "Read it seven times."}])
    async with session_for(tmp_path, model, LoopSettings(enabled=False)) as session:
        result = await session.run("read notes.txt seven times")
        events = await stored(session)

    assert (result.status, result.steps) == ("completed", 8) and not any(isinstance(e, LoopDetected) for e in events)


async def test_a_new_message_starts_the_count_afresh(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing new here\n")
    model = Recorded([*reading(4), {"text": "Same."}, *reading(4), {"text": "Still same."}])
    async with session_for(tmp_path, model) as session:
        first = await session.run("read notes.txt four times")
        second = await session.run("and four more")
        events = await stored(session)

    assert (first.status, second.status) == ("completed", "completed")
    # Each run was noticed at its own third and fourth round; the second did not carry on the first's count.
    assert [e.repeats for e in events if isinstance(e, LoopDetected)] == [3, 4, 3, 4]


# -- a resumed run goes on counting ---------------------------------------------------------------------------


def held_job() -> tuple[MCPServer, anyio.Event]:
    """A read-only poll that answers at once, except the fourth call, which hangs (to be interrupted)."""
    server = MCPServer("job", log_level="WARNING")
    calls = [0]
    reached = anyio.Event()

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def status() -> str:
        """How the job is doing."""
        calls[0] += 1
        if calls[0] == 4:
            reached.set()
            await anyio.sleep_forever()
        return "building: 10%"

    return server, reached


async def test_a_resumed_run_goes_on_counting_where_it_was_interrupted(tmp_path: Path) -> None:
    from servers import fs

    poll = {"text": "Checking.", "tool_calls": [{"name": "job__status", "arguments": {}}]}
    model = Recorded([*[poll] * 7, {"text": "Built."}])
    server, reached = held_job()
    async with CheckpointStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        async with Hub({"fs": fs.build_server([tmp_path]), "job": server}) as hub:
            session = Session("s_test", tmp_path, model, hub, log)
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.run, "wait for the build")
                    await reached.wait()  # three rounds done (noticed at the third), the fourth in progress
                    session.stopping = "Loom is shutting down"
                    tg.cancel_scope.cancel()
            (run_id,) = {e.run_id for e in await store.read_events("s_test") if isinstance(e, RunFinished)}
        # Loom starts again: the job's server is back, and the run is resumed from the store.
        async with Hub({"fs": fs.build_server([tmp_path]), "job": job_server(["building: 10%"])}) as hub:
            resumed = Session(
                "s_test", tmp_path, model, hub, log, history=rebuild_history(await store.read_events("s_test"))
            )
            result = await resumed.resume(run_id)
            events = await store.read_events("s_test")

    # The fourth round ran again on resume (read-only), and the model's next poll was the fifth: stopped.
    assert (result.status, result.steps) == ("failed", 5), result
    assert result.reason.startswith("loop: job__status({}) repeated 5 times")
    assert [(e.action, e.repeats) for e in events if isinstance(e, LoopDetected)] == [("notice", 3), ("stop", 5)]
    assert len(model.sent) == 5


async def test_a_notice_given_just_before_an_interruption_is_shown_again_on_resume(tmp_path: Path) -> None:
    from servers import fs

    (tmp_path / "notes.txt").write_text("nothing new here\n")
    turns = reading(8)
    turns[3] = {**turns[3], "delay_s": 60}  # the model call after the third round (and its notice) never answers
    model = Recorded(turns)
    async with CheckpointStore(tmp_path / "loom.db") as store:
        log = EventLog(store)
        async with Hub({"fs": fs.build_server([tmp_path])}) as hub:
            session = Session("s_test", tmp_path, model, hub, log)
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.run, "read notes.txt until it changes")
                    await model.until_sent(4)
                    session.stopping = "Loom is shutting down"
                    tg.cancel_scope.cancel()
            (run_id,) = {e.run_id for e in await store.read_events("s_test") if isinstance(e, RunFinished)}
        async with Hub({"fs": fs.build_server([tmp_path])}) as hub:
            history = rebuild_history(await store.read_events("s_test"))
            resumed = Session("s_test", tmp_path, model, hub, log, history=history)
            result = await resumed.resume(run_id)
            events = await store.read_events("s_test")
            in_memory = list(resumed.history)

    # The first request after the resume: the third round's results, its loop notice, then the interruption note.
    after = model.sent[4][-1].content
    assert [type(b).__name__ for b in after] == ["ToolResultBlock", "TextBlock", "TextBlock"]
    assert isinstance(after[1], TextBlock) and after[1].text.startswith(NOTICE) and "3 times" in after[1].text
    assert isinstance(after[2], TextBlock) and "interrupted" in after[2].text
    # The count went on: rounds four (noticed) and five (stopped) came after the resume.
    assert (result.status, result.steps) == ("failed", 5), result
    assert [(e.action, e.repeats) for e in events if isinstance(e, LoopDetected)] == [
        ("notice", 3),
        ("notice", 4),
        ("stop", 5),
    ]
    assert rebuild_history(events) == in_memory


async def test_a_batch_of_calls_that_repeats_is_named_whole_in_the_reason(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A\n")
    (tmp_path / "b.txt").write_text("B\n")
    both = {"tool_calls": [{"name": "fs__read", "arguments": {"path": p}} for p in ("a.txt", "b.txt")]}
    model = Recorded([both] * 6)
    async with session_for(tmp_path, model, LoopSettings(notice_after=2, stop_after=3)) as session:
        result = await session.run("read both")

    assert (result.status, result.steps) == ("failed", 3), result
    assert result.reason == (
        'loop: fs__read({"path":"a.txt"}), fs__read({"path":"b.txt"}) repeated 3 times in a row with the same results'
    )
    assert "made the same 2 calls, with the same results, 2 times in a row" in texts_after_results(model.sent[2])[0]
