"""``loom server subagents --parent P``: the same tools over stdio, on a running daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from clients.loom import open_client
from tests.clients.cli_support import clean_env, loom_command, make_project, run_loom, write_script
from tests.orchestrator.daemon.daemon_process import running_daemon, start_daemon

pytestmark = pytest.mark.anyio


async def test_on_a_daemon_the_standalone_server_starts_children_of_the_parent(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "child.json", [{"text": "Done: nothing to change.\nShould I also check the docs?"}])
    write_script(project / "parent.json", [{"text": "parent"}])
    with running_daemon(home, tmp_path):
        async with open_client(home, require_daemon=True) as loom:
            parent = await loom.create_session(str(project), model="scripted:parent.json", mode="ask")
            command, *args = loom_command()
            params = StdioServerParameters(
                command=command,
                args=[*args, "server", "subagents", "--parent", parent.session_id],
                cwd=str(project),
                env=clean_env(home),
            )
            async with Client(params) as client:
                spawned = await client.call_tool("spawn", {"goal": "check it", "model": "scripted:child.json"})
                assert spawned.structured_content is not None, spawned.content
                waited = await client.call_tool("wait", {"timeout_s": 30})
            child = await loom.get_session(spawned.structured_content["child_id"])
        bad_parent = await anyio.to_thread.run_sync(
            lambda: run_loom("server", "subagents", "--parent", "s_nope", cwd=project, home=home)
        )

    assert waited.structured_content is not None, waited.content
    finished: list[dict[str, Any]] = waited.structured_content["finished"]
    (result,) = finished
    assert result["status"] == "completed"
    assert result["summary"]["open_questions"] == ["Should I also check the docs?"]
    assert child.parent_session_id == parent.session_id  # a child of the daemon's session, seen by every client
    assert bad_parent.returncode == 2 and "s_nope" in bad_parent.stderr


async def test_after_the_daemon_restarts_the_standalone_server_reconnects(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    write_script(project / "child.json", [{"text": "Done."}])
    write_script(project / "parent.json", [{"text": "parent"}])
    daemon = start_daemon(home, tmp_path, log_name="first")
    try:
        async with open_client(home, require_daemon=True) as loom:
            parent = await loom.create_session(str(project), model="scripted:parent.json", mode="ask")
        command, *args = loom_command()
        params = StdioServerParameters(
            command=command,
            args=[*args, "server", "subagents", "--parent", parent.session_id],
            cwd=str(project),
            env=clean_env(home),
        )
        async with Client(params) as client:
            spawned = await client.call_tool("spawn", {"goal": "check it", "model": "scripted:child.json"})
            assert spawned.structured_content is not None, spawned.content
            child_id = spawned.structured_content["child_id"]
            await client.call_tool("wait", {"timeout_s": 30})
            daemon.stop()
            daemon = start_daemon(home, tmp_path, log_name="second")
            answers = [await client.call_tool("result", {"child_id": child_id})]
            if answers[0].is_error:  # the held connection was the old daemon's: this call says so
                answers.append(await client.call_tool("result", {"child_id": child_id}))
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()

    assert len(answers) <= 2
    if len(answers) == 2:
        assert "try again" in str(answers[0].content)
    final = answers[-1].structured_content
    assert final is not None and final["status"] == "completed", answers[-1].content
