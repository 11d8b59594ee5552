"""The checkpoints server's event reads: a result schema the client checks in constant time, the same events."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from servers.checkpoints import build_server
from servers.checkpoints._server import StoreLocation
from tests.servers._support import call_ok

pytestmark = pytest.mark.anyio


async def test_event_reads_declare_an_array_of_texts_that_a_client_need_not_walk(store_location: StoreLocation) -> None:
    async with Client(build_server(store_location)) as client:
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


class TestReadingBackwards:
    """``before_seq``: the newest ``limit`` events before it, oldest first, so a client can open at the end."""

    @staticmethod
    async def _filled(client: Client, count: int) -> None:
        events = [{"session_id": "s", "type": "notice", "ts": 1.0 + i, "text": f"n{i}"} for i in range(count)]
        if events:
            await call_ok(client, "append_events", {"events": events})

    @staticmethod
    async def _seqs(client: Client, **arguments: object) -> list[int]:
        found = await call_ok(client, "read_events", {"session_id": "s", **arguments})
        return [json.loads(body)["seq"] for body in found["events"]]

    @pytest.mark.parametrize("limit", [1, 3, 7, 25])
    async def test_backward_pages_put_together_are_the_forward_read(
        self, store_location: StoreLocation, limit: int
    ) -> None:
        async with Client(build_server(store_location)) as client:
            await self._filled(client, 23)
            forward = await self._seqs(client)
            pages: list[list[int]] = []
            before = 10**9  # past the newest: the first page is the end
            while page := await self._seqs(client, before_seq=before, limit=limit):
                pages.append(page)
                before = page[0]
        assert all(len(p) == limit for p in pages[:-1])
        assert [seq for page in reversed(pages) for seq in page] == forward == list(range(1, 24))
        assert pages[0][-1] == 23 and all(p == sorted(p) for p in pages)

    async def test_a_window_between_two_cursors(self, store_location: StoreLocation) -> None:
        async with Client(build_server(store_location)) as client:
            await self._filled(client, 10)
            assert await self._seqs(client, after_seq=3, before_seq=9, limit=2) == [7, 8]
            assert await self._seqs(client, after_seq=3, before_seq=9) == [4, 5, 6, 7, 8]
            assert await self._seqs(client, after_seq=3, before_seq=4) == []
            assert await self._seqs(client, before_seq=1) == []

    async def test_an_empty_session_reads_nothing(self, store_location: StoreLocation) -> None:
        async with Client(build_server(store_location)) as client:
            assert await self._seqs(client, before_seq=5, limit=3) == []
