"""The checkpoints server's event reads: a result schema the client checks in constant time, the same events."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from servers.checkpoints import build_server
from tests.servers._support import call_ok

pytestmark = pytest.mark.anyio


async def test_event_reads_declare_an_array_of_texts_that_a_client_need_not_walk(tmp_path: Path) -> None:
    async with Client(build_server(tmp_path / "loom.db")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("read_events", "read_context"):
            schema = tools[name].output_schema
            assert schema is not None and schema["required"] == ["events"]
            # No ``items``: jsonschema would walk every event of a long session to check it is a string.
            assert schema["properties"]["events"]["type"] == "array"
            assert "items" not in schema["properties"]["events"]
        events = [{"session_id": "s", "type": "notice", "ts": 1.0 + i, "text": f"n{i}"} for i in range(3)]
        await call_ok(client, "append_events", {"events": events})
        read = await call_ok(client, "read_events", {"session_id": "s", "after_seq": 1})
        context = await call_ok(client, "read_context", {"session_id": "s"})
    assert [type(e) for e in read["events"]] == [str, str]
    assert read["events"] == context["events"][1:]
    assert '"seq":3' in read["events"][-1]
