"""Completion of the face's prompt and template arguments with known values, in both eras."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.types import PromptReference, ResourceTemplateReference

from tests.mcp_calls import call
from tests.orchestrator.face.test_face_prompts import skill
from tests.orchestrator.face.test_face_resources import ERAS, loom_face

pytestmark = pytest.mark.anyio

TRANSCRIPT = ResourceTemplateReference(type="ref/resource", uri="loom://sessions/{session_id}/transcript{?before_seq}")
DELEGATE = PromptReference(type="ref/prompt", name="delegate_task")


async def values(client: Client, ref: PromptReference | ResourceTemplateReference, name: str, value: str) -> list[str]:
    return (await client.complete(ref, {"name": name, "value": value})).completion.values


@pytest.mark.parametrize("mode", ERAS)
async def test_session_ids_models_modes_and_skill_names_complete_by_prefix(tmp_path: Path, mode: str) -> None:
    skill(tmp_path / "home" / "skills", "notes", "Notes.")
    skill(tmp_path / "home" / "skills", "news", "News.")
    skill(tmp_path / "home" / "skills", "review", "Review.")
    async with loom_face(tmp_path) as (_, face), Client(face, mode=mode) as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo"))["session_id"]
        sessions = await values(client, TRANSCRIPT, "session_id", sid[:4])
        none = await values(client, TRANSCRIPT, "session_id", "zz")
        modes = await values(client, DELEGATE, "mode", "a")
        models = await values(client, DELEGATE, "model", "")
        skills = await values(
            client, ResourceTemplateReference(type="ref/resource", uri="loom://skills/{name}"), "name", "ne"
        )
        prompt_session = await values(client, PromptReference(type="ref/prompt", name="notes"), "session_id", "")
        unknown = await values(client, DELEGATE, "task", "f")
    assert sessions == [sid] and none == []
    assert modes == ["ask", "accept-edits"]
    assert models[0] == "scripted:demo" and {"anthropic:", "openai:", "scripted:"} <= set(models)
    assert skills == ["news"]
    assert prompt_session == [sid]
    assert unknown == []
