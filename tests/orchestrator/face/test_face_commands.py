"""The face's command tools: set_mode (a person's control over policy), list_skills, list_models."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from orchestrator.face.server import build_face
from orchestrator.policy import decide
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call, error_of
from tests.orchestrator.face.test_face import face_client, script

pytestmark = pytest.mark.anyio

WRITE = {"name": "fs__write", "arguments": {"path": "a.txt", "content": "A"}}
WRITE_B = {"name": "fs__write", "arguments": {"path": "b.txt", "content": "B"}}


async def pending(client: Client, sid: str) -> list[dict[str, object]]:
    with anyio.fail_after(10):
        while True:
            found = (await call(client, "list_approvals", session_id=sid))["approvals"]
            if found:
                return list(found)
            await anyio.sleep(0.05)


async def test_a_mode_change_decides_the_next_tool_call_of_the_run_that_is_going(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    model = script(tmp_path, [{"tool_calls": [WRITE]}, {"tool_calls": [WRITE_B]}, {"text": "done"}])
    async with face_client(tmp_path, "auto") as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model=model, mode="ask"))["session_id"]
        run = await call(client, "send_message", session_id=sid, text="go")
        (first,) = await pending(client, sid)  # ask mode: the first write waits for a person
        changed = await call(client, "set_mode", session_id=sid, mode="bypass", changed_by="tui")
        # The call already waiting still waits: the new mode decides the next call, not this one.
        assert [a["approval_id"] for a in await pending(client, sid)] == [first["approval_id"]]
        await call(client, "decide_approval", approval_id=first["approval_id"], decision="approve_once")
        done = await call(client, "get_run", run_id=run["run_id"], wait_s=10)
        events = (await call(client, "read_events", session_id=sid))["events"]
        info = await call(client, "get_session", session_id=sid)
        again = await call(client, "set_mode", session_id=sid, mode="bypass")
    assert changed == {"session_id": sid, "mode": "bypass", "previous": "ask", "changed": True}
    assert done["status"] == "completed" and (tmp_path / "w" / "b.txt").read_text() == "B"
    asked = [e for e in events if e["type"] == "approval_requested"]
    assert len(asked) == 1  # the second write ran under bypass without asking
    (mode_event,) = [e for e in events if e["type"] == "mode_changed"]
    assert (mode_event["mode"], mode_event["previous"], mode_event["changed_by"]) == ("bypass", "ask", "tui")
    assert info["mode"] == "bypass"
    assert again["changed"] is False


async def test_a_changed_mode_is_kept_when_the_session_is_reopened(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    model = script(tmp_path, [{"tool_calls": [WRITE]}, {"text": "denied, fine"}])
    async with face_client(tmp_path, "auto") as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path / "w"), model=model, mode="bypass"))["session_id"]
        await call(client, "set_mode", session_id=sid, mode="plan")
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            info = await call(client, "get_session", session_id=sid)
            run = await call(client, "send_message", session_id=sid, text="write", wait_s=10)
            events = (await call(client, "read_events", session_id=sid))["events"]
    assert info["mode"] == "plan"
    assert run["status"] == "completed" and not (tmp_path / "w" / "a.txt").exists()
    (finished,) = [e for e in events if e["type"] == "tool_call_finished"]
    assert finished["failure"] == "denied" and "plan mode" in finished["content"]


async def test_set_mode_refuses_an_unknown_mode_or_session(tmp_path: Path) -> None:
    async with face_client(tmp_path, "auto") as client:
        sid = (await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo"))["session_id"]
        bad = await error_of(client, "set_mode", session_id=sid, mode="yolo")
        unknown = await error_of(client, "set_mode", session_id="s_nope", mode="plan")
        info = await call(client, "get_session", session_id=sid)
    assert "unknown mode 'yolo'; use one of ask, accept-edits, plan, bypass" in bad
    assert "no session 's_nope'" in unknown
    assert info["mode"] == "ask"


async def test_a_model_cannot_widen_its_own_mode(tmp_path: Path) -> None:
    """The session's tools never include the face's; wired back in, set_mode is asked about or denied."""
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            sid = (await call(client, "create_session", cwd=str(tmp_path), model="scripted:demo"))["session_id"]
            tools = {t.name: t for t in (await client.list_tools()).tools}
            session = await host.session(sid)
            offered = [t.name for t in session.hub.tools]
    assert offered and not any("set_mode" in name for name in offered)
    annotations = tools["set_mode"].annotations
    args = {"session_id": sid, "mode": "bypass"}
    verdicts = {m: decide(m, "loom_face__set_mode", annotations, args, (), str(tmp_path)).verdict for m in MODES}
    assert verdicts == {"ask": "ask", "accept-edits": "ask", "plan": "deny", "bypass": "allow"}


MODES = ("ask", "accept-edits", "plan", "bypass")


def skill(root: Path, name: str, description: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nDo it.\n")


async def test_list_skills_names_the_users_and_the_projects_skills(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    skill(tmp_path / "home" / "skills", "release-notes", "Write release notes.")
    skill(tmp_path / "home" / "skills", "review", "User review.")
    skill(project / ".loom" / "skills", "review", "Project review.")
    (project / ".loom" / "skills" / "broken").mkdir()
    (project / ".loom" / "skills" / "broken" / "SKILL.md").write_text("no front matter\n")
    async with face_client(tmp_path, "auto") as client:
        sid = (await call(client, "create_session", cwd=str(project), model="scripted:demo"))["session_id"]
        found = await call(client, "list_skills", session_id=sid)
        unknown = await error_of(client, "list_skills", session_id="s_nope")
    by_name = {s["name"]: (s["source"], s["description"]) for s in found["skills"]}
    assert by_name == {"release-notes": ("user", "Write release notes."), "review": ("project", "Project review.")}
    assert any("broken" in p for p in found["problems"])
    assert "no session 's_nope'" in unknown


async def test_list_models_offers_the_providers_and_the_models_in_use(tmp_path: Path) -> None:
    model = script(tmp_path, [{"text": "hi"}])
    async with face_client(tmp_path, "auto") as client:
        await call(client, "create_session", cwd=str(tmp_path), model=model)
        found = await call(client, "list_models")
    assert found["providers"] == ["anthropic", "openai", "scripted"]
    assert model in found["models"] and found["default"] in found["models"]
