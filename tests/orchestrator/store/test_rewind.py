"""Rewind through the MCP face: files back byte for byte, the conversation branched, the old branch kept."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio

BINARY = bytes(range(256)) * 4
"""A file no text tool could have written back: only a byte-exact snapshot restores it."""


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


TURNS: list[dict[str, Any]] = [
    # run 1
    {
        "text": "first",
        "tool_calls": [
            _call("fs__write", path="a.txt", content="one"),
            _call("fs__edit", path="keep.txt", old="original", new="changed1"),
        ],
    },
    {"text": "run 1 done"},
    # run 2
    {
        "text": "second",
        "tool_calls": [
            _call("fs__write", path="a.txt", content="two"),
            _call("fs__write", path="sub/new.txt", content="new"),
            _call("fs__delete", path="data.bin"),
            _call("fs__edit", path="keep.txt", old="changed1", new="changed2"),
            _call("shell__run", command="echo x > shell.txt"),
        ],
    },
    {"text": "run 2 done"},
]


@contextlib.asynccontextmanager
async def face(tmp_path: Path) -> AsyncIterator[Client]:
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            yield client


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def test_rewind_restores_edits_creations_and_deletions_and_branches(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_bytes(b"original\r\nline two\r\n")
    (work / "data.bin").write_bytes(BINARY)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": TURNS}))
    before_run_1 = tree(work)
    async with face(tmp_path) as client:
        session = await call(client, "create_session", cwd=str(work), model=f"scripted:{script}", mode="bypass")
        sid = session["session_id"]
        run1 = await call(client, "send_message", session_id=sid, text="do one", wait_s=20)
        before_run_2 = tree(work)
        run2 = await call(client, "send_message", session_id=sid, text="do two", wait_s=20)
        assert (run1["status"], run2["status"]) == ("completed", "completed")
        assert not (work / "data.bin").exists() and (work / "shell.txt").exists()

        listed = await call(client, "list_checkpoints", session_id=sid)
        assert [c["run_id"] for c in listed["checkpoints"]] == [run1["run_id"], run2["run_id"]]
        assert sorted(Path(p).name for p in listed["checkpoints"][1]["files_changed"]) == [
            "a.txt",
            "data.bin",
            "keep.txt",
            "new.txt",
        ]

        done = await call(client, "rewind_session", session_id=sid, to_run_id=run2["run_id"])
        after_rewind_2 = tree(work)
        branch = done["session_id"]
        old_events = (await call(client, "read_events", session_id=sid))["events"]

        again = await call(client, "rewind_session", session_id=sid, to_run_id=run1["run_id"])
        after_rewind_1 = tree(work)
        unknown = await client.call_tool("rewind_session", {"session_id": sid, "to_run_id": "r_nope"})

        # Last, since its (restarted) script changes files again: the branch takes new messages.
        more = await call(client, "send_message", session_id=branch, text="continue", wait_s=20)
        branch_events = (await call(client, "read_events", session_id=branch))["events"]

    # Byte for byte as before run 2, apart from what the shell did, which is reported, not undone.
    assert after_rewind_2 == {**before_run_2, "shell.txt": b"x\n"}
    assert after_rewind_2["data.bin"] == BINARY
    assert {f["path"]: f["action"] for f in done["files"]} == {
        "a.txt": "restored",
        "data.bin": "recreated",
        "keep.txt": "restored",
        "sub/new.txt": "deleted",
    }
    assert done["not_rewound"] == ["shell__run 'echo x > shell.txt'"]
    # The branch holds the conversation up to run 2 and goes on from there; the old session is kept.
    assert branch != sid and more["status"] == "completed"
    texts = [e.get("text") for e in branch_events if e["type"] == "user_message"]
    assert texts == ["do one", "continue"]
    assert [e["type"] for e in old_events].count("assistant_message") == 4
    assert old_events[-1]["type"] == "notice" and branch in old_events[-1]["text"]
    # Rewinding further back, to before run 1, restores the workspace as it first was (shell aside).
    assert after_rewind_1 == {**before_run_1, "shell.txt": b"x\n"}
    assert {f["path"] for f in again["files"]} == {"a.txt", "data.bin", "keep.txt"}
    assert unknown.is_error and "r_nope" in str(unknown.content)
