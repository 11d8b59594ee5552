"""``read_events(before_seq=...)``: a session read from its end, page by page, through the real MCP client."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from clients.loom import LiveFollower, LoomClient
from clients.loom.follow import read_older
from orchestrator.events import Notice, RunStarted, SessionCreated
from orchestrator.face.server import build_face
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio


async def _backwards(client: Client, session_id: str, limit: int) -> tuple[list[list[int]], list[dict[str, object]]]:
    """Every page read backwards from the end: their seqs (newest page first) and the pages themselves."""
    pages: list[dict[str, object]] = []
    before = 10**9
    while True:
        page = await call(client, "read_events", session_id=session_id, before_seq=before, limit=limit)
        pages.append(page)
        events = page["events"]
        if not page["more_before"]:
            break
        assert events, "a page that says more remain holds something"
        before = events[0]["seq"]
    return [[e["seq"] for e in p["events"]] for p in pages], pages  # type: ignore[attr-defined]


@pytest.mark.parametrize("limit", [1, 4, 200])
async def test_pages_read_from_the_end_are_the_session_without_gap_or_duplicate(tmp_path: Path, limit: int) -> None:
    (tmp_path / "work").mkdir()
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with runtime.open_session(tmp_path / "work", ScriptedModel.from_turns([])) as session:
            session_id = session.id
        await runtime.log.append(*[Notice(session_id=session_id, text=f"n{i}") for i in range(9)])
        async with Client(build_face(host)) as client:
            forward = await call(client, "read_events", session_id=session_id)
            seqs, pages = await _backwards(client, session_id, limit)
            beyond = await call(client, "read_events", session_id=session_id, before_seq=3, limit=5)
    assert [s for page in reversed(seqs) for s in page] == [e["seq"] for e in forward["events"]] == list(range(1, 11))
    assert all(len(p) == limit for p in seqs[:-1]) and all(p == sorted(p) for p in seqs)
    # The first page read is the end: a client follows forward from its next_after_seq.
    assert pages[0]["next_after_seq"] == 10 and pages[0]["live"] is None
    assert [p["more_before"] for p in pages] == [True] * (len(pages) - 1) + [False]
    assert [e["seq"] for e in beyond["events"]] == [1, 2] and beyond["more_before"] is False


async def test_a_page_read_forward_never_says_more_before(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with runtime.open_session(tmp_path / "work", ScriptedModel.from_turns([])) as session:
            session_id = session.id
        async with Client(build_face(host)) as client:
            page = await call(client, "read_events", session_id=session_id, after_seq=0, limit=1)
            empty = await call(client, "read_events", session_id=session_id, after_seq=1, before_seq=2)
    assert page["more_before"] is False and len(page["events"]) == 1
    assert empty == {**empty, "events": [], "next_after_seq": 1, "more_before": False}


async def test_a_follower_opens_at_the_start_of_a_run_and_reads_older_runs_whole(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with runtime.open_session(tmp_path / "work", ScriptedModel.from_turns([])) as session:
            session_id = session.id
        for run in range(6):  # runs of 1 + run events (1, 2, ... 6 notices): pages begin inside runs
            run_id = f"r_{run}"
            await runtime.log.append(
                RunStarted(session_id=session_id, run_id=run_id, model="scripted:x", max_steps=1),
                *[Notice(session_id=session_id, text=f"{run}.{i}") for i in range(run + 1)],
            )
        async with Client(build_face(host)) as client:
            loom = LoomClient(client, on_daemon=False)
            forward = (await loom.read_events(session_id)).events
            follower = LiveFollower(session_id)
            tail = await follower.open_at_end(loom, limit=4)
            runs = [tail]
            while follower.older is not None:
                older, more = await read_older(loom, session_id, follower.older, limit=4)
                runs.append(older)
                follower.older = older[0].seq if more else None
    assert isinstance(tail[0], RunStarted) and tail[0].run_id == "r_5" and len(tail) == 7  # a run longer than a page
    assert follower.cursor == forward[-1].seq  # following goes on from the newest event
    assert all(isinstance(r[0], RunStarted | SessionCreated) for r in runs)
    assert [e.seq for r in reversed(runs) for e in r] == [e.seq for e in forward]


@pytest.mark.parametrize(
    "cursor", [{"before_seq": 2**63}, {"after_seq": 2**63}, {"before_seq": 10**30}, {"after_seq": 10**30}]
)
async def test_a_cursor_past_the_stores_integers_is_refused_as_bad_input(
    tmp_path: Path, cursor: dict[str, int]
) -> None:
    # A seq no 64-bit integer holds once reached SQLite and came back as "Error executing tool read_events".
    (tmp_path / "work").mkdir()
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with runtime.open_session(tmp_path / "work", ScriptedModel.from_turns([])) as session:
            session_id = session.id
        async with Client(build_face(host)) as client:
            result = await client.call_tool("read_events", {"session_id": session_id, **cursor})
            fine = await call(client, "read_events", session_id=session_id, before_seq=2**63 - 1)
    assert result.is_error
    text = result.content[0].text if result.content and result.content[0].type == "text" else ""
    assert f"less than or equal to {2**63 - 1}" in text and next(iter(cursor)) in text
    assert [e["type"] for e in fine["events"]] == ["session_created"]
