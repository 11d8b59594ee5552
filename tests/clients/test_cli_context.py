"""Context through the public faces: layered instructions, skills and memory on a real daemon, and the CLI.

The daemon is a real ``loom serve`` subprocess; the model is the real ``anthropic`` SDK talking to the
fake Anthropic API (real uvicorn on 127.0.0.1), which records every request, so the tests read the
system prompt exactly as the provider received it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clients.cli_support import run_loom
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon
from tests.orchestrator.models.fake_anthropic import FakeAnthropic
from tests.orchestrator.models.fake_common import Reply, Text, ToolCall

pytestmark = pytest.mark.anyio


def skill(root: Path, name: str, description: str, body: str) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A Loom home and a project with instructions at every layer and a skill in each place."""
    home, project = tmp_path / "home", tmp_path / "project"
    sub = project / "service"
    sub.mkdir(parents=True)
    home.mkdir()
    (project / ".git").mkdir()
    (home / "AGENTS.md").write_text("USER LAYER: the user prefers short answers.\n")
    (project / "AGENTS.md").write_text("PROJECT LAYER: run the tests with make test.\n")
    (project / "LOOM.md").write_text("PROJECT LOOM: never push to main.\n")
    (sub / "LOOM.md").write_text("DIRECTORY LAYER: this service is written in Go.\n")
    skill(home / "skills", "deploy", "How to deploy a service to staging", "1. make image\n2. make push-staging")
    skill(project / ".loom" / "skills", "release-notes", "Write release notes from the git log", "Group by type.")
    return home, sub


def system_of(fake: FakeAnthropic, index: int) -> str:
    system = fake.requests[index].body["system"]
    return system if isinstance(system, str) else "".join(block["text"] for block in system)


def tool_results(fake: FakeAnthropic, index: int) -> list[str]:
    found: list[str] = []
    for message in fake.requests[index].body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                inner = block["content"]
                found.append(inner if isinstance(inner, str) else "".join(b.get("text", "") for b in inner))
    return found


async def test_instructions_skills_and_memory_reach_the_model_and_memory_survives_a_restart(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    home, cwd = layout(tmp_path)
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake_anthropic.base_url}
    fake_anthropic.script(
        Reply([ToolCall("loom__skill", {"name": "deploy"})], input_tokens=1200, output_tokens=30),
        Reply(
            [ToolCall("memory__set", {"namespace": "project", "key": "style", "body": "Tabs, not spaces.\nAlways."})],
            input_tokens=1300,
            output_tokens=40,
        ),
        Reply([Text("Noted: deploy steps read, style saved.")], input_tokens=1400, output_tokens=12),
    )
    with running_daemon(home, tmp_path, env=env) as daemon:
        async with mcp_client(daemon, "auto") as client:
            session = await call(
                client, "create_session", cwd=str(cwd), model="anthropic:claude-test", mode="accept-edits"
            )
            run = await call(client, "send_message", session_id=session["session_id"], text="deploy", wait_s=30)
            info = await call(client, "get_session", session_id=session["session_id"])
    assert run["status"] == "completed", run

    system = system_of(fake_anthropic, 0)
    layers = ["USER LAYER", "PROJECT LAYER", "PROJECT LOOM", "DIRECTORY LAYER"]
    positions = [system.index(layer) for layer in layers]
    assert positions == sorted(positions), "user, then project (AGENTS.md, LOOM.md), then directory"
    assert "deploy: How to deploy a service to staging" in system
    assert "release-notes: Write release notes from the git log" in system
    assert "make push-staging" not in system  # the body only when asked for
    assert any("make push-staging" in r for r in tool_results(fake_anthropic, 1))
    assert "## Memory" not in system  # nothing remembered yet

    # The watermark is the provider's own count after the last call, as session state on the face.
    assert (info["context_used"], info["context_window"]) == (1412, 200_000)
    assert info["context_ratio"] == round(1412 / 200_000, 4)

    # A new daemon on the same home: a new session in the same project gets the note's index, not its body.
    fake_anthropic.script(
        Reply([ToolCall("memory__get", {"namespace": "project", "key": "style"})]), Reply([Text("Using tabs.")])
    )
    with running_daemon(home, tmp_path, log_name="daemon2", env=env) as daemon:
        async with mcp_client(daemon, "auto") as client:
            session = await call(client, "create_session", cwd=str(cwd), model="anthropic:claude-test")
            run = await call(client, "send_message", session_id=session["session_id"], text="indent", wait_s=30)
    assert run["status"] == "completed", run
    system = system_of(fake_anthropic, 3)
    assert "## Memory" in system and "project/style: Tabs, not spaces." in system
    assert "Always." not in system
    assert any("Always." in r for r in tool_results(fake_anthropic, 4))


NOTES = "".join(f"note {i:03d}: keep the widgets blue\n" for i in range(120))  # ~900 tokens


def long_script(path: Path, reads: int) -> Path:
    turns: list[dict[str, Any]] = [
        {"text": f"Pass {i}.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "notes.txt"}}]}
        for i in range(reads)
    ]
    turns.append({"text": "All read."})
    # A window three reads fill to about two thirds of, below the threshold, with every built-in server's tools listed.
    path.write_text(json.dumps({"context_window": 10_000, "turns": turns}), encoding="utf-8")
    return path


def ran_session(tmp_path: Path) -> tuple[Path, Path, str]:
    """A `loom run` of three reads in a fresh home: (home, working directory, session id)."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text(NOTES)
    home.mkdir()
    (home / "config.json").write_text('{"loop": false}')  # the same read three times fills the window: no notice
    script = long_script(tmp_path / "script.json", 3)
    ran = run_loom("run", "--json", "--model", f"scripted:{script}", "Read notes.txt three times.", cwd=work, home=home)
    assert ran.returncode == 0, ran
    return home, work, ran.events()[0].session_id


def test_cli_compacts_on_request_with_a_preview_first_and_switches_to_a_smaller_model(tmp_path: Path) -> None:
    home, work, sid = ran_session(tmp_path)

    listed = run_loom("sessions", cwd=work, home=home)
    assert listed.returncode == 0, listed
    assert sid in listed.stdout and "%" in listed.stdout

    preview = run_loom("compact", sid, "--preview", cwd=work, home=home)
    assert preview.returncode == 0, preview
    assert preview.stdout.startswith("preview: compacting would replace") and "→" in preview.stdout

    done = run_loom("compact", sid, "--focus", "the widget colour", "--show-summary", cwd=work, home=home)
    assert done.returncode == 0, done
    assert done.stdout.startswith("compacted: replaced")
    assert "## Goal and constraints" in done.stdout and '"Read notes.txt three times."' in done.stdout

    # A model whose window the history would crowd: the current model compacts again first.
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"context_window": 6500, "turns": [{"text": "ok"}]}), encoding="utf-8")
    switched = run_loom("model", sid, f"scripted:{small}", cwd=work, home=home)
    assert switched.returncode == 0, switched
    assert switched.stdout.startswith("compacted: replaced"), switched.stdout
    assert f"now uses scripted:{small}" in switched.stdout and "window 6,500 tokens" in switched.stdout

    exported = run_loom("attach", sid, "--no-follow", "--json", cwd=work, home=home)
    kinds = [json.loads(line)["type"] for line in exported.stdout.splitlines()]
    assert kinds.count("context_compacted") == 2 and kinds.count("tool_call_finished") == 3
    assert kinds[-2:] == ["model_switched", "context_watermark"]
    listed = run_loom("sessions", cwd=work, home=home)
    assert f"scripted:{small}"[:28] in listed.stdout
    mark = json.loads(exported.stdout.splitlines()[-1])
    assert mark["window"] == 6500 and mark["used_tokens"] < 6500
