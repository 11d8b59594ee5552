"""Sessions opened in one process share their built-in tools' schemas, and nothing of one another's confinement."""

from __future__ import annotations

import contextlib
from pathlib import Path

import jsonschema
import pytest

from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.session import Session
from servers._tools import template_count
from tests.servers._tool_builds import count_builds

pytestmark = pytest.mark.anyio


def workspace(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / "mine.txt").write_text(f"I am {name}\n")
    return root


async def test_two_sessions_in_one_process_cannot_reach_each_others_roots(tmp_path: Path) -> None:
    one, two = workspace(tmp_path, "one"), workspace(tmp_path, "two")
    async with (
        embedded_runtime(tmp_path / "home") as runtime,
        runtime.open_session(one, ScriptedModel.from_turns([])) as first,
        runtime.open_session(two, ScriptedModel.from_turns([])) as second,
    ):
        for session, own, other in ((first, one, two), (second, two, one), (first, one, two)):
            read = await session.hub.call("fs__read", {"path": "mine.txt"})
            assert not read.is_error and f"I am {own.name}" in read.content
            refused = await session.hub.call("fs__read", {"path": str(other / "mine.txt")})
            assert refused.is_error and "outside the allowed roots" in refused.content
            escaped = await session.hub.call("fs__list", {"path": f"../{other.name}"})
            assert escaped.is_error
            ran = await session.hub.call("shell__run", {"command": "pwd -P; cat mine.txt"})
            assert not ran.is_error and ran.structured is not None
            assert ran.structured["stdout"] == f"{own.resolve()}\nI am {own.name}\n"
            outside = await session.hub.call("shell__run", {"command": "pwd", "cwd": str(other)})
            assert outside.is_error and "outside the allowed root" in outside.content
            noted = await session.hub.call(
                "memory__set", {"namespace": "session", "key": "whoami", "body": f"session {session.id}"}
            )
            assert not noted.is_error
        for session in (first, second):
            notes = await session.hub.call("memory__list", {"namespace": "session"})
            assert notes.structured is not None
            assert [n["summary"] for n in notes.structured["notes"]] == [f"session {session.id}"]
            output = await session.hub.call("loom__tool_output", {"call_id": "nope"})
            assert output.is_error and "in this session" in output.content


async def test_opening_sessions_builds_the_built_in_tool_schemas_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = workspace(tmp_path, "work")
    async with embedded_runtime(tmp_path / "home") as runtime:
        async with runtime.open_session(cwd, ScriptedModel.from_turns([])) as session:
            first = {tool.name: tool for tool in session.hub.tools}
        templates = template_count()
        built = count_builds(monkeypatch)
        async with contextlib.AsyncExitStack() as stack:
            sessions: list[Session] = [
                await stack.enter_async_context(runtime.open_session(cwd, ScriptedModel.from_turns([])))
                for _ in range(10)
            ]
            for session in sessions:
                tools = {tool.name: tool for tool in session.hub.tools}
                assert set(tools) == set(first)
                for name, tool in tools.items():
                    # The hub's compiled argument check is the process's, not rebuilt per session.
                    assert tool.validator is first[name].validator, name
                    assert tool.input_schema == first[name].input_schema
    assert built == []
    assert template_count() == templates
    assert {"fs__read", "shell__run", "memory__list", "loom__skill"} <= set(first)


async def test_calls_in_new_sessions_compile_no_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = workspace(tmp_path, "work")
    calls = [
        ("memory__list", {"namespace": "user"}),
        ("fs__read", {"path": "mine.txt"}),
        ("shell__run", {"command": "true"}),
        ("loom__skill", {"name": "none"}),
    ]
    async with embedded_runtime(tmp_path / "home") as runtime:
        async with runtime.open_session(cwd, ScriptedModel.from_turns([])) as session:
            for name, arguments in calls:
                await session.hub.call(name, arguments)
        # From here on, the hub's argument checks and the MCP client's result checks must all be the process's.
        checked: list[object] = []
        real = jsonschema.Draft202012Validator.check_schema

        def recording(cls: type[jsonschema.Draft202012Validator], schema: object) -> None:
            checked.append(schema)
            real(schema)  # type: ignore[arg-type]

        monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(recording))
        for _ in range(3):
            async with runtime.open_session(cwd, ScriptedModel.from_turns([])) as session:
                for name, arguments in calls:
                    outcome = await session.hub.call(name, arguments)
                    assert name == "loom__skill" or not outcome.is_error, outcome.content
    assert checked == []
