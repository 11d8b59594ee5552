"""A real Loom for goal tests: a runtime over SQLite, the face in-process, scripted work sessions and grader.

The work sessions all run one script and the graders another, as a model would be the same from session to session:
what changes between attempts is the working tree. Each work session runs a shell command that counts the sessions
(``n.txt``) and copies ``verdicts/N.json`` to ``verdict.json``; each grader reads ``verdict.json`` and answers with
it. So a test decides attempt N's verdict by writing ``verdicts/N.json``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from clients.loom import LoomClient
from orchestrator.agents.roles import BUILTIN_DIR
from orchestrator.events import Event
from orchestrator.events_long import GoalSessionStarted
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost

COUNT = (
    "n=$(cat n.txt 2>/dev/null || echo 0); n=$((n+1)); echo $n > n.txt; "
    "cp verdicts/$n.json verdict.json; echo session $n"
)
WORK_TURNS: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "shell__run", "arguments": {"command": COUNT}}]},
    {"tool_calls": [{"name": "fs__write", "arguments": {"path": "out.txt", "content": "work"}}]},
    {"text": "Ran the counter and wrote out.txt."},
]
GRADER_TURNS: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "v", "name": "fs__read", "arguments": {"path": "verdict.json"}}]},
    {"text": "{{result:v}}"},
]


def verdict(*passed: bool, reason: str = "") -> str:
    """A grader's JSON verdict: criterion N passed or not, with a reason naming it."""
    return json.dumps(
        {
            "criteria": [
                {"id": n, "passed": ok, "reason": reason or f"criterion {n} {'holds' if ok else 'is not met yet'}"}
                for n, ok in enumerate(passed, 1)
            ]
        }
    )


def write_script(path: Path, turns: Sequence[Mapping[str, Any]]) -> str:
    path.write_text(json.dumps({"turns": list(turns)}))
    return f"scripted:{path}"


def prepare(tmp_path: Path, verdicts: Sequence[str], *, work: Sequence[Mapping[str, Any]] = WORK_TURNS) -> str:
    """The home (grader on its script), the work tree (the verdicts), and the work sessions' model spec."""
    home = tmp_path / "home"
    (home / "agents").mkdir(parents=True, exist_ok=True)
    grader = write_script(tmp_path / "grader.json", GRADER_TURNS)
    shipped = (BUILTIN_DIR / "grader.md").read_text()
    (home / "agents" / "grader.md").write_text(shipped.replace("mode: plan\n", f"mode: plan\nmodel: {grader}\n"))
    tree = tmp_path / "work" / "verdicts"
    tree.mkdir(parents=True, exist_ok=True)
    for n, text in enumerate(verdicts, 1):
        (tree / f"{n}.json").write_text(text)
    return write_script(tmp_path / "work.json", work)


@contextlib.asynccontextmanager
async def loom(tmp_path: Path) -> AsyncIterator[tuple[SessionHost, LoomClient]]:
    """A host on ``tmp_path/home`` and a client of its face."""
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as client:
            yield host, LoomClient(client, on_daemon=False)


async def event_in(face: LoomClient, session_id: str, wanted: Callable[[Event], bool], within_s: float = 30) -> Event:
    """The first event of the session that ``wanted`` picks, long-polling its stream (bounded)."""
    after = 0
    with anyio.fail_after(within_s):
        while True:
            page = await face.read_events(session_id, after_seq=after, wait_s=5)
            for event in page.events:
                if wanted(event):
                    return event
            after = page.next_after_seq


def work_session(attempt: int) -> Callable[[Event], bool]:
    """Picks the goal's ``goal_session_started`` of that attempt."""
    return lambda e: isinstance(e, GoalSessionStarted) and e.attempt == attempt


def of_type(kind: str) -> Callable[[Event], bool]:
    return lambda e: e.type == kind


async def work_started(face: LoomClient, goal_session_id: str, attempt: int) -> GoalSessionStarted:
    """The goal's ``goal_session_started`` of that attempt, once it is on the goal session's stream."""
    event = await event_in(face, goal_session_id, work_session(attempt))
    assert isinstance(event, GoalSessionStarted)
    return event
