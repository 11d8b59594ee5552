"""``engine_host``: the same face over either engine, so one test checks that both behave alike.

Parametrised ``embedded`` (one process, the home's SQLite store: the face drives its runs) and ``dbos`` (the face
over a fresh Postgres database, with one in-process worker (:func:`orchestrator.engine.worker.serving`) over the
same database driving the runs). A test opens the face with :meth:`Engine.face` (an MCP client over
:func:`~orchestrator.face.server.build_face`), and may close it and open it again: that is a face's restart, while
the dbos worker stays up for the whole test.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from orchestrator.config import LoomConfig
from orchestrator.engine.settings import EngineSettings
from orchestrator.engine.worker import serving
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost


@dataclass
class Face:
    """An open face: its host, and an MCP client connected to it."""

    host: SessionHost
    client: Client


@dataclass
class Engine:
    """One engine's setup for a test: its kind, the face's home and config, and a work directory."""

    kind: str
    home: Path
    work: Path
    config: LoomConfig
    scripts: Path

    @contextlib.asynccontextmanager
    async def face(self) -> AsyncIterator[Face]:
        """The face as ``loom serve`` opens it (the config chooses the engine), with an MCP client on it."""
        async with embedded_runtime(self.home, config=self.config) as runtime, SessionHost(runtime) as host:
            async with Client(build_face(host)) as client:
                yield Face(host, client)

    def script(self, name: str, turns: Sequence[Mapping[str, Any]]) -> str:
        """A ``scripted:`` model spec answering by the conversation, so any process (face or worker) plays it alike."""
        path = self.scripts / f"{name}.json"
        path.write_text(json.dumps({"by_history": True, "turns": list(turns)}))
        return f"scripted:{path}"


@pytest.fixture(params=["embedded", "dbos"])
def engine_config(request: pytest.FixtureRequest) -> LoomConfig:
    """The face's config: the default (embedded) engine, or the dbos engine over a fresh database."""
    if request.param == "embedded":
        return LoomConfig()
    url: str = request.getfixturevalue("fresh_database")
    return LoomConfig(engine=EngineSettings(kind="dbos", database=url, heartbeat_s=0.5, takeover_after_s=3))


@pytest.fixture
async def engine_host(engine_config: LoomConfig, tmp_path: Path) -> AsyncIterator[Engine]:
    """An :class:`Engine`; on the dbos engine one worker takes runs while the test goes on."""
    home, work, scripts = tmp_path / "home", tmp_path / "work", tmp_path / "scripts"
    for directory in (home, work, scripts):
        directory.mkdir()
    settings = engine_config.engine
    if settings is None or not settings.distributed:
        yield Engine("embedded", home, work, engine_config, scripts)
        return
    # The worker's own home: it shares nothing with the face but the database, as on another machine.
    worker_home = tmp_path / "worker-home"
    worker_home.mkdir()
    async with serving(settings, worker_home, engine_config, worker_id="w1"):
        yield Engine("dbos", home, work, engine_config, scripts)
