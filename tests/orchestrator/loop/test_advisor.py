"""The advisor reviews a batch of tool calls between the model and policy: real Hub, real servers, real SQLite.

Both the agent and the advisor are scripted models; what is asserted is what a user would notice: what ran, what
the agent's model was told, and the ``advisor_reviewed`` events on the session's stream.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import AdvisorSettings
from orchestrator.context.history import rebuild_history
from orchestrator.events import AdvisorReviewed, ApprovalRequested, Event, RunStarted, ToolCallFinished, UserMessage
from orchestrator.hub.pool import Hub
from orchestrator.loop.advisor import Advisor, advisor_for
from orchestrator.loop.approvals import Approvals
from orchestrator.loop.loop import LoopResult, RunContext, run_loop
from orchestrator.messages import Message, TextBlock, ToolResultBlock
from orchestrator.models import resolve_model
from orchestrator.models.base import Model
from orchestrator.models.scripted import ScriptedModel
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

pytestmark = pytest.mark.anyio

GOAL = "tidy the build directory"


def verdict(kind: str, *reasons: str) -> dict[str, Any]:
    """An advisor turn answering ``kind`` with ``reasons``."""
    return {"text": json.dumps({"verdict": kind, "reasons": list(reasons)})}


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


class World:
    """One session's parts: a store, its log, a hub with Loom's fs and shell servers, in ``tmp_path``."""

    def __init__(self, tmp_path: Path, log: EventLog, hub: Hub) -> None:
        self.cwd = tmp_path
        self.log = log
        self.hub = hub

    async def run(
        self, agent: Model, advisor: Advisor | None, *, mode: str = "bypass", headless: bool = True
    ) -> LoopResult:
        """Start a run with :data:`GOAL` (as a session does) and loop until it ends."""
        await self.log.append(
            RunStarted(session_id="s", run_id="r", model=agent.name, max_steps=10),
            UserMessage(session_id="s", run_id="r", text=GOAL),
        )
        ctx = self.context(agent, advisor, mode=mode, headless=headless)
        ctx.history.append(Message(role="user", content=[TextBlock(text=GOAL)]))
        result = await run_loop(ctx)
        if ctx.unstored:
            await self.log.append(*ctx.unstored)
        self.history = ctx.history
        return result

    def context(self, agent: Model, advisor: Advisor | None, *, mode: str, headless: bool) -> RunContext:
        approvals = Approvals.top_level("s", self.log, mode, cwd=str(self.cwd), headless=headless)
        return RunContext(
            session_id="s",
            run_id="r",
            model=agent,
            hub=self.hub,
            log=self.log,
            system="",
            history=[],
            max_steps=10,
            approvals=approvals,
            advisor=advisor,
        )

    async def events(self) -> list[Event]:
        return await self.log.store.read_events("s")

    async def reviews(self) -> list[AdvisorReviewed]:
        return [e for e in await self.events() if isinstance(e, AdvisorReviewed)]


@contextlib.asynccontextmanager
async def world(tmp_path: Path) -> AsyncIterator[World]:
    from servers import fs, shell

    async with CheckpointStore(tmp_path / "loom.db") as store:
        servers = {"fs": fs.build_server([tmp_path]), "shell": shell.build_server(tmp_path, sandbox="off")}
        async with Hub(servers) as hub:
            yield World(tmp_path, EventLog(store), hub)


def results_turn(model: ScriptedModel) -> Message:
    """The turn that answered the model's first batch (requests share the live history, so it is found by place)."""
    return model.requests[1].messages[2]


def results_shown(model: ScriptedModel) -> list[ToolResultBlock]:
    return [b for b in results_turn(model).content if isinstance(b, ToolResultBlock)]


def notes_shown(model: ScriptedModel) -> list[str]:
    return [b.text for b in results_turn(model).content if isinstance(b, TextBlock)]


def cleanup_agent() -> ScriptedModel:
    return ScriptedModel.from_turns(
        [{"text": "Cleaning.", "tool_calls": [call("shell__run", {"command": "rm -rf build"})]}, {"text": "Done."}]
    )


def build_dir(tmp_path: Path) -> Path:
    build = tmp_path / "build"
    build.mkdir()
    (build / "out.o").write_text("object")
    return build


async def test_an_approved_batch_runs_and_the_advisor_saw_goal_calls_and_cwd(tmp_path: Path) -> None:
    build = build_dir(tmp_path)
    agent, adviser = cleanup_agent(), ScriptedModel.from_turns([verdict("approve")])
    async with world(tmp_path) as w:
        result = await w.run(agent, Advisor(adviser, "full", cwd=str(tmp_path)))
        reviews = await w.reviews()
    assert result.status == "completed" and not build.exists()
    prompt = adviser.requests[0].messages[0].text
    assert GOAL in prompt and "rm -rf build" in prompt and str(tmp_path) in prompt and "shell__run" in prompt
    assert [(r.verdict, r.reasons, r.model) for r in reviews] == [("approve", [], "scripted:inline")]
    assert reviews[0].call_ids == [agent.requests[1].messages[1].tool_uses[0].id]
    assert not results_shown(agent)[0].is_error and notes_shown(agent) == []


async def test_warnings_reach_the_model_after_the_results_and_survive_a_rebuild(tmp_path: Path) -> None:
    build = build_dir(tmp_path)
    agent = cleanup_agent()
    adviser = ScriptedModel.from_turns([verdict("warn", "build/ may hold the only copy of the release notes")])
    async with world(tmp_path) as w:
        result = await w.run(agent, Advisor(adviser, "lightweight", cwd=str(tmp_path)))
        events = await w.events()
    assert result.status == "completed" and not build.exists()
    assert not results_shown(agent)[0].is_error
    (note,) = notes_shown(agent)
    assert "warnings" in note and "build/ may hold the only copy of the release notes" in note
    # A session reopened tomorrow rebuilds the same conversation, warnings included.
    assert rebuild_history(events) == w.history


async def test_a_rejected_batch_runs_nothing_tells_the_model_why_and_policy_is_not_asked(tmp_path: Path) -> None:
    build = build_dir(tmp_path)
    (tmp_path / "notes.txt").write_text("keep me")
    agent = ScriptedModel.from_turns(
        [
            {
                "tool_calls": [
                    call("shell__run", {"command": "rm -rf build"}),
                    call("fs__write", {"path": "notes.txt", "content": "gone"}),
                ]
            },
            {"text": "I will ask the user."},
        ]
    )
    adviser = ScriptedModel.from_turns([verdict("reject", "the goal is to tidy build/, not to delete it")])
    async with world(tmp_path) as w:
        # Interactive, mode ask: had policy been asked, both calls would wait for an approval.
        result = await w.run(agent, Advisor(adviser, "lightweight", cwd=str(tmp_path)), mode="ask", headless=False)
        events = await w.events()
    assert result.status == "completed" and build.exists() and (tmp_path / "notes.txt").read_text() == "keep me"
    assert not [e for e in events if isinstance(e, ApprovalRequested)]
    shown = results_shown(agent)
    assert len(shown) == 2 and all(r.is_error for r in shown)
    assert all("advisor" in r.content and "not to delete it" in r.content for r in shown)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.failure for e in finished] == ["denied", "denied"]
    assert [e.type for e in events if e.type.startswith("tool_call")] == ["tool_call_finished"] * 2  # none started
    (review,) = [e for e in events if isinstance(e, AdvisorReviewed)]
    assert review.verdict == "reject" and len(review.call_ids) == 2


@pytest.mark.parametrize(
    ("turn", "why"),
    [
        ({"error": "permanent:advisor endpoint refused the request"}, "advisor endpoint refused"),
        ({"text": "Looks fine to me!"}, "not JSON"),
        (verdict("maybe", "hmm"), "'maybe'"),
        ({"text": json.dumps({"verdict": "reject"})}, "without a reason"),
        ({"text": json.dumps({"verdict": "warn", "reasons": "be careful"})}, "not a list"),
        ({"text": json.dumps(["approve"])}, "not a JSON object"),
        ({"text": verdict("approve")["text"], "delay_s": 30}, "within 0.2 s"),
    ],
    ids=["fails", "prose", "unknown-verdict", "reject-without-reason", "reasons-not-list", "not-object", "timeout"],
)
async def test_an_advisor_that_fails_lets_the_batch_go_on_to_policy_and_says_so(
    tmp_path: Path, turn: dict[str, Any], why: str
) -> None:
    build = build_dir(tmp_path)
    agent = cleanup_agent()
    adviser = ScriptedModel.from_turns([turn])
    async with world(tmp_path) as w:
        result = await w.run(agent, Advisor(adviser, "full", cwd=str(tmp_path), timeout_s=0.2))
        reviews = await w.reviews()
    assert result.status == "completed" and not build.exists()  # fail-open: policy (bypass) let it run
    assert not results_shown(agent)[0].is_error and notes_shown(agent) == []
    (review,) = reviews
    assert review.verdict == "error" and why in review.reasons[0]


@pytest.mark.parametrize(
    ("turn", "expected"), [({"text": "no idea"}, "error"), (verdict("approve"), "approve")], ids=["error", "approve"]
)
async def test_policy_still_decides_what_the_advisor_let_through(
    tmp_path: Path, turn: dict[str, Any], expected: str
) -> None:
    build = build_dir(tmp_path)
    agent, adviser = cleanup_agent(), ScriptedModel.from_turns([turn])
    async with world(tmp_path) as w:
        await w.run(agent, Advisor(adviser, "full", cwd=str(tmp_path)), mode="ask", headless=True)
        reviews = await w.reviews()
    (shown,) = results_shown(agent)
    assert build.exists() and shown.is_error and "denied by policy" in shown.content
    assert [r.verdict for r in reviews] == [expected]


async def test_lightweight_skips_a_harmless_batch_without_calling_the_advisor(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("hello")
    agent = ScriptedModel.from_turns(
        [
            {
                "tool_calls": [
                    call("fs__read", {"path": "README.md"}),
                    call("fs__write", {"path": "notes.txt", "content": "inside the workspace"}),
                    call("shell__run", {"command": "ls -la"}),
                ]
            },
            {"text": "Read it."},
        ]
    )
    adviser = ScriptedModel.from_turns([verdict("reject", "should not be asked")])
    async with world(tmp_path) as w:
        result = await w.run(agent, Advisor(adviser, "lightweight", cwd=str(tmp_path)))
        reviews = await w.reviews()
    assert result.status == "completed" and (tmp_path / "notes.txt").read_text() == "inside the workspace"
    assert adviser.requests == [] and reviews == []
    assert not any(r.is_error for r in results_shown(agent))


@pytest.mark.parametrize(
    "arguments",
    [
        {"command": "rm -rf build"},
        {"command": "sudo ls"},
        {"command": "env FOO=1 nice rm build/out.o"},
        {"command": "git reset --hard HEAD~3"},
        {"command": "find . -name '*.o' -delete"},
        {"command": "echo hi > ../outside.txt"},
        {"command": "ls", "cwd": "/"},
    ],
    ids=["rm", "sudo", "wrapped-rm", "git-reset-hard", "find-delete", "redirection", "cwd-outside"],
)
async def test_lightweight_reviews_a_destructive_shell_command_in_any_form(
    tmp_path: Path, arguments: dict[str, Any]
) -> None:
    agent = ScriptedModel.from_turns([{"tool_calls": [call("shell__run", arguments)]}, {"text": "ok"}])
    adviser = ScriptedModel.from_turns([verdict("reject", "not needed for the goal")])
    async with world(tmp_path) as w:
        await w.run(agent, Advisor(adviser, "lightweight", cwd=str(tmp_path)))
        reviews = await w.reviews()
    assert [r.verdict for r in reviews] == ["reject"] and len(adviser.requests) == 1
    assert "Loom flagged" in adviser.requests[0].messages[0].text


async def test_lightweight_reviews_a_write_outside_the_working_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    agent = ScriptedModel.from_turns(
        [{"tool_calls": [call("fs__write", {"path": str(tmp_path / "elsewhere.txt"), "content": "x"})]}, {"text": "ok"}]
    )
    adviser = ScriptedModel.from_turns([verdict("reject", "outside the project")])
    async with world(tmp_path) as w:
        await w.run(agent, Advisor(adviser, "lightweight", cwd=str(work)))
        reviews = await w.reviews()
    assert not (tmp_path / "elsewhere.txt").exists() and [r.verdict for r in reviews] == ["reject"]
    assert "outside the working directory" in adviser.requests[0].messages[0].text


async def test_an_advisor_from_settings_uses_a_scripted_file_and_off_means_none(tmp_path: Path) -> None:
    script = tmp_path / "advisor.json"
    script.write_text(json.dumps({"turns": [verdict("warn", "from the file")]}))
    build = build_dir(tmp_path)
    agent = cleanup_agent()

    def resolve(spec: str) -> Model:
        return resolve_model(spec, base_dir=tmp_path)

    settings = AdvisorSettings(mode="lightweight", model="scripted:advisor.json")
    assert advisor_for(settings, resolve, agent, cwd=str(tmp_path), mode="off") is None
    assert advisor_for(None, resolve, agent, cwd=str(tmp_path)) is None
    advisor = advisor_for(settings, resolve, agent, cwd=str(tmp_path))
    assert advisor is not None and advisor.mode == "lightweight"
    async with world(tmp_path) as w:
        await w.run(agent, advisor)
        reviews = await w.reviews()
    assert not build.exists() and [(r.verdict, r.model) for r in reviews] == [("warn", "scripted:advisor.json")]
    assert any("from the file" in n for n in notes_shown(agent))
