"""The model's plan (``loom__todo``) in real sessions: written and marked, refused with reasons, recorded on the
session's stream, in every policy mode, and each session's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.events import Event, ToolCallFinished
from orchestrator.events_long import TodoUpdated
from orchestrator.loop.approvals import MODES
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.todo import MAX_ITEMS, MAX_TEXT_CHARS

pytestmark = pytest.mark.anyio

PLAN = [
    {"text": "Read the failing test", "status": "completed"},
    {"text": "Fix parse_date() for 'YYYY-MM-DD'", "status": "in_progress"},
    {"text": "Run the suite", "status": "pending"},
]


def todo(**arguments: Any) -> dict[str, Any]:
    return {"name": "loom__todo", "arguments": arguments}


def results(events: list[Event]) -> list[ToolCallFinished]:
    return [e for e in events if isinstance(e, ToolCallFinished)]


def plans(events: list[Event]) -> list[list[tuple[str, str]]]:
    return [[(i.text, i.status) for i in e.items] for e in events if isinstance(e, TodoUpdated)]


async def test_the_model_writes_its_plan_then_marks_items_without_sending_it_again(tmp_path: Path) -> None:
    model = ScriptedModel.from_turns(
        [
            {"tool_calls": [todo(items=PLAN)]},
            {"tool_calls": [todo(marks=[{"item": 2, "status": "completed"}, {"item": 3, "status": "in_progress"}])]},
            {"tool_calls": [todo()]},
            {"text": "fixed"},
        ]
    )
    async with embedded_runtime(tmp_path / "home") as runtime, runtime.open_session(tmp_path, model) as session:
        result = await session.run("fix the date parser")
        events = await runtime.log.store.read_events(session.id)
        in_memory = session.plan.items
    assert result.status == "completed"
    wrote, marked, read = (json.loads(r.content) for r in results(events))
    assert [i["text"] for i in wrote["items"]] == [p["text"] for p in PLAN]
    assert [i["status"] for i in marked["items"]] == ["completed", "completed", "in_progress"]
    assert marked["progress"] == "2 of 3 completed; in progress: 3. Run the suite"
    assert read == marked  # no arguments: the plan as it stands, nothing recorded
    assert plans(events) == [
        [(p["text"], p["status"]) for p in PLAN],
        [(PLAN[0]["text"], "completed"), (PLAN[1]["text"], "completed"), (PLAN[2]["text"], "in_progress")],
    ]
    updates = [e for e in events if isinstance(e, TodoUpdated)]
    assert all(u.run_id == result.run_id and not u.carried for u in updates)
    assert [(i.text, i.status) for i in in_memory] == plans(events)[-1]


BAD: list[tuple[dict[str, Any], str]] = [
    ({"items": PLAN, "marks": [{"item": 1, "status": "pending"}]}, "give either items"),
    ({"items": [{"text": "x"}] * (MAX_ITEMS + 1)}, f"at most {MAX_ITEMS}"),
    ({"items": [{"text": "   "}]}, "item 1 has no text"),
    ({"items": [{"text": "ok"}, {"text": "y" * (MAX_TEXT_CHARS + 1)}]}, f"item 2 is {MAX_TEXT_CHARS + 1} characters"),
    ({"items": [{"text": "one\ntwo"}]}, "item 1 is more than one line"),
    ({"items": [{"text": "evil \x1b[2J\u202e"}]}, "control or formatting characters"),
    (
        {"items": [{"text": "a", "status": "in_progress"}, {"text": "b", "status": "in_progress"}]},
        "items 1, 2 are all in_progress",
    ),
    ({"items": [{"text": "a", "status": "done"}]}, "'done' is not one of ['pending', 'in_progress', 'completed']"),
    ({"marks": [{"item": 4, "status": "completed"}]}, "there is no item 4: the plan has 3 items, numbered from 1"),
    ({"marks": [{"item": 0, "status": "completed"}]}, "there is no item 0"),
    ({"marks": [{"item": 1, "status": "pending"}, {"item": 1, "status": "completed"}]}, "item 1 is marked twice"),
    ({"marks": []}, "marks is empty"),
    ({"marks": [{"item": 3, "status": "in_progress"}]}, "item 2 is still in_progress"),
]


async def test_bad_plans_and_marks_are_refused_with_what_to_change_and_change_nothing(tmp_path: Path) -> None:
    calls = [todo(**arguments) for arguments, _ in BAD]
    empty = ScriptedModel.from_turns([{"tool_calls": [todo(marks=[{"item": 1, "status": "completed"}])]}, {}])
    model = ScriptedModel.from_turns([{"tool_calls": [todo(items=PLAN)]}, {"tool_calls": calls}, {"text": "ok"}])
    async with embedded_runtime(tmp_path / "home") as runtime:
        async with runtime.open_session(tmp_path, empty) as fresh:
            await fresh.run("mark before writing")
            (nothing,) = results(await runtime.log.store.read_events(fresh.id))
        async with runtime.open_session(tmp_path, model) as session:
            await session.run("plan badly")
            events = await runtime.log.store.read_events(session.id)
            kept = session.plan.items
    assert nothing.is_error and "there is no plan to mark yet: write it first with items" in nothing.content
    by_call = {r.call_id: r for r in results(events)}  # calls of one batch run together and finish in any order
    refused = [by_call[f"toolu_0001_{k}"] for k in range(len(BAD))]
    for finished, (arguments, expected) in zip(refused, BAD, strict=True):
        assert finished.is_error, arguments
        assert expected in finished.content, (arguments, finished.content)
    assert len(plans(events)) == 1  # only the first, good, plan was recorded
    assert [(i.text, i.status) for i in kept] == [(p["text"], p["status"]) for p in PLAN]


async def test_the_plan_runs_in_every_policy_mode_even_headless_and_read_only(tmp_path: Path) -> None:
    async with embedded_runtime(tmp_path / "home") as runtime:
        for mode in MODES:
            model = ScriptedModel.from_turns([{"tool_calls": [todo(items=PLAN)]}, {"text": "planned"}])
            async with runtime.open_session(tmp_path, model, mode=mode, headless=True) as session:
                result = await session.run("plan it")
                events = await runtime.log.store.read_events(session.id)
            (finished,) = results(events)
            assert (mode, result.status, finished.is_error) == (mode, "completed", False), finished.content
            assert len(plans(events)) == 1, mode


async def test_a_model_cannot_write_another_sessions_plan(tmp_path: Path) -> None:
    mine = [{"text": "my own step", "status": "in_progress"}]
    async with embedded_runtime(tmp_path / "home") as runtime:
        other = ScriptedModel.from_turns([{"tool_calls": [todo(items=PLAN)]}, {"text": "planned"}])
        async with runtime.open_session(tmp_path, other) as victim:
            await victim.run("plan")
            # The hostile session names the victim in every way an argument could; the tool has no such argument.
            attack = todo(items=mine, session_id=victim.id, session=victim.id)
            hostile = ScriptedModel.from_turns([{"tool_calls": [attack]}, {}])
            async with runtime.open_session(tmp_path, hostile) as attacker:
                await attacker.run("write theirs")
                own = await runtime.log.store.read_events(attacker.id)
                attacker_plan = attacker.plan.items
                (spec,) = [t.spec for t in attacker.hub.tools if t.spec.name == "loom__todo"]
            victim_events = await runtime.log.store.read_events(victim.id)
            victim_plan = victim.plan.items
    assert set(spec.input_schema["properties"]) == {"items", "marks"}  # nothing names a session
    (written,) = results(own)
    assert json.loads(written.content)["items"] == mine  # what it wrote is its own plan, and it is told so
    assert [(i.text, i.status) for i in attacker_plan] == [("my own step", "in_progress")]
    assert plans(own) == [[("my own step", "in_progress")]]
    assert [(i.text, i.status) for i in victim_plan] == [(p["text"], p["status"]) for p in PLAN]
    assert plans(victim_events) == [[(p["text"], p["status"]) for p in PLAN]]
