"""Skills as the face's prompts (and resources), and delegate_task, in both eras."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, TextContent

from tests.mcp_calls import call
from tests.orchestrator.face.test_face_resources import ERAS, loom_face, text_of

pytestmark = pytest.mark.anyio


def skill(root: Path, name: str, body: str, description: str = "A skill.") -> None:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


async def prompt_text(client: Client, name: str, arguments: dict[str, str]) -> str:
    (message,) = (await client.get_prompt(name, arguments)).messages
    assert message.role == "user" and isinstance(message.content, TextContent)
    return message.content.text


@pytest.mark.parametrize("mode", ERAS)
async def test_a_skill_is_a_prompt_with_its_arguments_filled(tmp_path: Path, mode: str) -> None:
    skill(tmp_path / "home" / "skills", "notes", "Write notes about $ARGUMENTS, briefly.", "Take notes.")
    skill(tmp_path / "home" / "skills", "review", "Review the change carefully.")
    async with loom_face(tmp_path) as (_, face), Client(face, mode=mode) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        filled = await prompt_text(client, "notes", {"arguments": "the meeting"})
        appended = await prompt_text(client, "review", {"arguments": "PR 12"})
        bare = await prompt_text(client, "review", {})
        as_resource = await text_of(client, "loom://skills/notes")
    assert {"notes", "review", "delegate_task"} <= set(prompts)
    assert prompts["notes"].description == "Take notes."
    assert [a.name for a in prompts["notes"].arguments or []] == ["arguments", "session_id"]
    assert filled == "Write notes about the meeting, briefly."
    assert appended == "Review the change carefully.\n\n## Task\n\nPR 12"
    assert bare == "Review the change carefully."
    assert as_resource == "Write notes about $ARGUMENTS, briefly."


async def test_a_project_skill_is_found_through_its_session(tmp_path: Path) -> None:
    project = tmp_path / "project"
    skill(project / ".loom" / "skills", "deploy", "Deploy $ARGUMENTS with make deploy.")
    async with loom_face(tmp_path) as (_, face), Client(face) as client:
        sid = (await call(client, "create_session", cwd=str(project), model="scripted:demo"))["session_id"]
        text = await prompt_text(client, "deploy", {"arguments": "staging", "session_id": sid})
        with pytest.raises(MCPError) as without:
            await client.get_prompt("deploy", {"arguments": "staging"})
    assert text == "Deploy staging with make deploy."
    assert without.value.error.code == INVALID_PARAMS and "session_id" in without.value.error.message


@pytest.mark.parametrize("mode", ERAS)
async def test_delegate_task_names_the_tools_to_call_and_refuses_a_bad_mode(tmp_path: Path, mode: str) -> None:
    async with loom_face(tmp_path) as (_, face), Client(face, mode=mode) as client:
        text = await prompt_text(
            client, "delegate_task", {"task": "fix the tests", "cwd": "/src/app", "mode": "plan", "model": "openai:m"}
        )
        errors = []
        for name, arguments in [("delegate_task", {"task": "x", "cwd": "/a", "mode": "yolo"}), ("nope", {})]:
            with pytest.raises(MCPError) as caught:
                await client.get_prompt(name, arguments)
            errors.append(caught.value.error)
    assert "create_session(cwd='/src/app', mode='plan', model='openai:m')" in text
    assert text.endswith("Task:\nfix the tests")
    assert [e.code for e in errors] == [INVALID_PARAMS, INVALID_PARAMS]
    assert "yolo" in errors[0].message and "prompts/list" in errors[1].message
