"""The orchestrator's store on Postgres: several processes share one store, and a wrong URL is a clear error."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters

from orchestrator.events import Event, Notice, SessionCreated
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.interface import StoreError

pytestmark = pytest.mark.anyio

REPO_ROOT = Path(__file__).resolve().parents[3]


async def test_processes_appending_to_one_session_at_once_lose_nothing_and_share_one_numbering(
    fresh_database: str,
) -> None:
    # A checkpoints server in a process of its own (as a worker has) and two in this process, each its own connection.
    def in_subprocess() -> StdioServerParameters:
        args = ["-m", "servers.checkpoints", "--db", fresh_database]
        return StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO_ROOT))

    stores = [CheckpointStore(fresh_database, target=in_subprocess()), CheckpointStore(fresh_database)]
    stores.append(CheckpointStore(fresh_database))
    sent: dict[int, list[Event]] = {n: [] for n in range(len(stores))}

    async def writer(n: int, store: CheckpointStore) -> None:
        async with store:
            for i in range(30):
                batch: list[Event] = [Notice(session_id="s", text=f"{n}:{i}:{k}") for k in range(1 + i % 2)]
                await store.append(batch)
                sent[n] += batch

    async with CheckpointStore(fresh_database) as reader:
        await reader.append([SessionCreated(session_id="s", cwd="/x", model="m")])
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for n, store in enumerate(stores):
                    tg.start_soon(writer, n, store)
        stored = await reader.read_events("s")
        session = await reader.get_session("s")
    total = 1 + sum(len(batch) for batch in sent.values())
    assert [e.seq for e in stored] == list(range(1, total + 1))
    assert session is not None and session.last_seq == total
    for n, events in sent.items():  # every writer's events, with the seqs it was told, in its order
        assert [e for e in stored if isinstance(e, Notice) and e.text.startswith(f"{n}:")] == events


async def test_a_wrong_url_is_a_store_error_that_says_what_to_do_without_the_password() -> None:
    store = CheckpointStore("postgresql://loom:s3cret-pw@127.0.0.1:1/loom")
    assert store.path == "postgresql://loom:***@127.0.0.1:1/loom"
    with pytest.raises(StoreError) as caught:
        async with store:
            pass
    message = str(caught.value)
    assert message.startswith("cannot open the Loom database at postgresql://loom:***@127.0.0.1:1/loom: ")
    assert "Start it, or fix the host and port in the URL" in message and "s3cret-pw" not in message


async def test_a_store_on_postgres_reopens_where_it_left_off(fresh_database: str) -> None:
    async with CheckpointStore(fresh_database) as store:
        await store.append([SessionCreated(session_id="s", cwd="/x", model="m"), Notice(session_id="s", text="one")])
    async with CheckpointStore(fresh_database, read_only=True) as store:
        with pytest.raises(StoreError, match="read-only"):
            await store.append([Notice(session_id="s", text="lost")])
        assert [e.seq for e in await store.read_events("s")] == [1, 2]
        [listed] = await store.list_sessions()
    assert (listed.id, listed.last_seq) == ("s", 2)
