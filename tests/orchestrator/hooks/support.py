"""What the hooks tests share: hook scripts written to disk, a hooks file, a real runtime with a session on it."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.config import LoomConfig, ShellOptions
from orchestrator.events import Event
from orchestrator.events_long import HookRan
from orchestrator.models.base import Model
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.runtime import Runtime, Session


def script(tmp: Path, name: str, body: str) -> str:
    """A hook command that runs ``body`` as a Python script (no jq, no shell tricks)."""
    path = tmp / "hooks" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return f"{sys.executable} {path}"


def handler(command: str, **more: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **more}


def write_hooks(where: Path, hooks: Mapping[str, Any], **top: Any) -> Path:
    """A hooks file at ``where`` (a file path) in Claude Code's shape."""
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(json.dumps({**top, "hooks": hooks}), encoding="utf-8")
    return where


def turns(*steps: Mapping[str, Any]) -> ScriptedModel:
    return ScriptedModel.from_turns(list(steps))


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@contextlib.asynccontextmanager
async def opened(
    home: Path, cwd: Path, model: Model, *, mode: str = "bypass", headless: bool = True
) -> AsyncIterator[tuple[Runtime, Session]]:
    """A real embedded runtime on ``home`` and a session in ``cwd`` (the shell unsandboxed: tests need no bwrap)."""
    config = LoomConfig(shell=ShellOptions(sandbox="off"))
    async with embedded_runtime(home, config=config) as runtime:
        async with runtime.open_session(cwd, model, mode=mode, headless=headless) as session:
            yield runtime, session


def hook_runs(events: Sequence[Event]) -> list[HookRan]:
    return [e for e in events if isinstance(e, HookRan)]
