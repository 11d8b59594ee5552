"""A writer process for the feed's tests: ``python -m tests.orchestrator.engine._feed_writer URL SESSION``.

It opens its own store and event log on the database, with a live publisher, and for each line it reads on stdin
does one thing, then prints ``ok``: ``notice TEXT`` appends a notice to the session, ``delta TEXT`` streams a text
delta of step 1 of run ``r``. An empty line (or the end of stdin) ends it.
"""

from __future__ import annotations

import sys

import anyio

from orchestrator.engine.feed import LivePublisher
from orchestrator.events import Notice, TextDelta
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog


async def main(url: str, session_id: str) -> None:
    """Do what stdin says, line by line."""
    async with CheckpointStore(url) as store:
        log = EventLog(store)
        async with LivePublisher(url, log):
            stdin = anyio.wrap_file(sys.stdin)
            while line := (await stdin.readline()).rstrip("\n"):
                verb, _, text = line.partition(" ")
                if verb == "notice":
                    await log.append(Notice(session_id=session_id, text=text))
                elif verb == "delta":
                    log.publish_live(TextDelta(session_id=session_id, run_id="r", step=1, text=text))
                print("ok", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
