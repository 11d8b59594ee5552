"""The checkpoints server's context index (watermark, model switches) and its lookup of one tool result."""

from __future__ import annotations

import json
from typing import Any

import pytest

from servers.checkpoints._server import StoreLocation
from tests.mcp_calls import call
from tests.servers.test_checkpoints import connected, created, notice

pytestmark = pytest.mark.anyio


def watermark(sid: str, used: int, window: int, ts: float = 3.0) -> dict[str, Any]:
    return {
        "type": "context_watermark",
        "session_id": sid,
        "ts": ts,
        "run_id": "r_1",
        "step": 1,
        "model": "m",
        "used_tokens": used,
        "window": window,
        "ratio": used / window,
        "threshold": 0.8,
        "source": "provider",
    }


def switched(sid: str, model: str, window: int) -> dict[str, Any]:
    return {"type": "model_switched", "session_id": sid, "ts": 4.0, "model": model, "previous": "m", "window": window}


def started(sid: str, call_id: str) -> dict[str, Any]:
    return {
        "type": "tool_call_started",
        "session_id": sid,
        "ts": 2.0,
        "run_id": "r_1",
        "step": 1,
        "call_id": call_id,
        "tool": "fs__read",
        "arguments": {},
    }


def finished(sid: str, call_id: str, content: str) -> dict[str, Any]:
    return {
        "type": "tool_call_finished",
        "session_id": sid,
        "ts": 2.5,
        "run_id": "r_1",
        "step": 1,
        "call_id": call_id,
        "tool": "fs__read",
        "is_error": False,
        "content": content,
        "duration_ms": 1.0,
    }


def context_of(session: dict[str, Any]) -> tuple[Any, Any]:
    return session["context_used"], session["context_window"]


async def test_watermarks_set_the_session_context_and_the_latest_wins(store_location: StoreLocation) -> None:
    async with connected(store_location) as client:
        await call(client, "append_events", events=[created("a"), created("b", ts=2.0)])
        assert context_of((await call(client, "get_session", session_id="a"))["session"]) == (None, None)
        await call(client, "append_events", events=[notice("a", "x"), watermark("a", 1_000, 200_000)])
        assert context_of((await call(client, "get_session", session_id="a"))["session"]) == (1_000, 200_000)
        await call(client, "append_events", events=[watermark("a", 150_000, 200_000, ts=5.0)])
        listed = {s["id"]: context_of(s) for s in (await call(client, "list_sessions"))["sessions"]}
    assert listed == {"a": (150_000, 200_000), "b": (None, None)}


async def test_a_watermark_for_an_unknown_session_is_stored_and_indexes_nothing(store_location: StoreLocation) -> None:
    async with connected(store_location) as client:
        assert (await call(client, "append_events", events=[watermark("ghost", 5, 10)]))["seqs"] == [1]
        assert (await call(client, "get_session", session_id="ghost"))["session"] is None


async def test_a_model_switch_changes_the_model_a_reopened_session_uses(store_location: StoreLocation) -> None:
    path = store_location
    async with connected(path) as client:
        await call(client, "append_events", events=[created("s"), watermark("s", 20_000, 200_000)])
        await call(client, "append_events", events=[switched("s", "small", 32_000)])
    async with connected(path) as client:
        session = (await call(client, "get_session", session_id="s"))["session"]
    # the last usage stays until the next watermark measures it against the new window
    assert (session["model"], *context_of(session)) == ("small", 20_000, 32_000)


async def test_find_tool_result_finds_the_latest_finish_of_one_call(store_location: StoreLocation) -> None:
    events = [created("s"), created("t")]
    for n in range(300):
        events += [started("s", f"c{n}"), finished("s", f"c{n}", f"result {n}")]
    events += [started("s", "c7"), finished("s", "c7", "again after a resume"), finished("t", "only_t", "t's")]
    async with connected(store_location) as client:
        await call(client, "append_events", events=events)
        found = (await call(client, "find_tool_result", session_id="s", call_id="c123"))["event"]
        assert json.loads(found)["content"] == "result 123"
        latest = json.loads((await call(client, "find_tool_result", session_id="s", call_id="c7"))["event"])
        assert (latest["type"], latest["content"], latest["seq"]) == ("tool_call_finished", "again after a resume", 603)
        assert (await call(client, "find_tool_result", session_id="s", call_id="nope"))["event"] is None
        assert (await call(client, "find_tool_result", session_id="s", call_id="only_t"))["event"] is None
        # a call that started but never finished has no result
        await call(client, "append_events", events=[started("s", "open")])
        assert (await call(client, "find_tool_result", session_id="s", call_id="open"))["event"] is None


def compacted(sid: str, kept_from: int) -> dict[str, Any]:
    return {
        "type": "context_compacted",
        "session_id": sid,
        "ts": 5.0,
        "trigger": "auto",
        "summary": f"kept from {kept_from}",
        "kept_from_seq": kept_from,
        "dropped_from_seq": 1,
        "dropped_to_seq": kept_from - 1,
        "dropped_messages": 1,
        "dropped_tool_calls": 0,
        "tokens_before": 10,
        "tokens_after": 5,
    }


async def test_read_context_starts_at_the_latest_compactions_first_kept_event(store_location: StoreLocation) -> None:
    async with connected(store_location, "auto") as client:
        await call(client, "append_events", events=[created("s"), *(notice("s", f"n{i}") for i in range(2, 11))])
        whole = (await call(client, "read_context", session_id="s"))["events"]
        assert [json.loads(e)["seq"] for e in whole] == list(range(1, 11))  # never compacted: everything

        await call(client, "append_events", events=[compacted("s", 4), notice("s", "n12")])
        await call(client, "append_events", events=[notice("s", "n13"), compacted("s", 8), notice("s", "n15")])
        await call(client, "append_events", events=[created("other"), compacted("other", 1)])
        found = [json.loads(e) for e in (await call(client, "read_context", session_id="s"))["events"]]
    assert [e["seq"] for e in found] == list(range(8, 16))  # from the latest compaction's kept_from_seq
    # An earlier compaction inside the kept part comes along; the rebuild uses the latest one.
    assert [e["summary"] for e in found if e["type"] == "context_compacted"] == ["kept from 4", "kept from 8"]
