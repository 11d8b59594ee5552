"""Live text in the CLI on a daemon: ``loom attach`` prints it as it is written, ``loom run --json`` as without one."""

from __future__ import annotations

import itertools
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.events import AssistantMessage, Event, TextDelta
from tests.clients.cli_support import clean_env, loom_command, make_project, run_loom, write_script
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import Daemon, mcp_client, running_daemon

pytestmark = pytest.mark.timeout(120)

LONG = " ".join(f"piece{i}" for i in range(300))
"""About 2,400 characters in 150 pieces of 16, one every 20 ms: some 3 s of writing."""


class Output:
    """A subprocess's stdout, read as it comes (bounded waits)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self.text = ""

    def wait_for(self, needle: str, timeout_s: float = 30.0) -> float:
        """Read until ``needle`` is in the output; the wall-clock time it was."""
        deadline = time.monotonic() + timeout_s
        while needle not in self.text:
            left = deadline - time.monotonic()
            assert left > 0, f"{needle[:40]!r} did not appear; output so far: {self.text[-500:]!r}"
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready:
                chunk = os.read(self._fd, 65536)
                assert chunk, f"stdout ended before {needle[:40]!r}: {self.text[-500:]!r}"
                self.text += chunk.decode("utf-8")
        return time.time()


async def stored(daemon: Daemon, session_id: str, kind: str) -> list[dict[str, object]]:
    async with mcp_client(daemon, "auto") as client:
        page = await call(client, "read_events", session_id=session_id)
    return [e for e in page["events"] if e["type"] == kind]


async def create(daemon: Daemon, project: Path, model: str) -> str:
    async with mcp_client(daemon, "auto") as client:
        session = await call(client, "create_session", cwd=str(project), model=model, mode="bypass")
        await call(client, "send_message", session_id=session["session_id"], text="ready?", wait_s=10)
    return str(session["session_id"])


async def send(daemon: Daemon, session_id: str, text: str) -> None:
    async with mcp_client(daemon, "auto") as client:
        await call(client, "send_message", session_id=session_id, text=text)


def test_attach_on_a_daemon_prints_the_text_before_the_step_ends(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    script = write_script(
        tmp_path / "s.json", [{"text": "ready."}, {"text": LONG, "chunk_chars": 16, "chunk_delay_s": 0.02}]
    )
    with running_daemon(home, tmp_path) as daemon:
        sid = anyio.run(create, daemon, project, f"scripted:{script}")
        attach = subprocess.Popen(
            [*loom_command(), "attach", sid],
            cwd=project,
            env=clean_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            out = Output(attach)
            out.wait_for("ready.")  # it is attached and following
            anyio.run(send, daemon, sid, "write a lot")
            out.wait_for(LONG[:200])
            messages_then = anyio.run(stored, daemon, sid, "assistant_message")
            out.wait_for(LONG)
            out.wait_for("\n", timeout_s=10)  # the line ends once the message is stored
        finally:
            attach.send_signal(signal.SIGINT)
            attach.wait(timeout=15)
            assert attach.stdout is not None
            attach.stdout.close()
    assert len(messages_then) == 1, "the step had ended before attach printed its text"
    assert out.text.count(LONG) == 1 and out.text.startswith("ready.\n")


def _collapsed(events: list[Event]) -> list[str]:
    """Event types in order, each run of text_delta counted once (how finely text is cut is not fixed)."""
    return [kind for kind, _ in itertools.groupby(e.type for e in events)]


def _streamed_text(events: list[Event]) -> dict[int, tuple[str, str]]:
    deltas: dict[int, str] = {}
    for e in events:
        if isinstance(e, TextDelta):
            deltas[e.step] = deltas.get(e.step, "") + e.text
    return {e.step: (deltas.get(e.step, ""), e.message.text) for e in events if isinstance(e, AssistantMessage)}


def test_run_json_prints_the_same_event_types_with_and_without_a_daemon(tmp_path: Path) -> None:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    turns: list[dict[str, Any]] = [
        {"text": "Looking at the readme.", "tool_calls": [{"name": "fs__read", "arguments": {"path": "README.md"}}]},
        {"text": LONG[:600], "chunk_chars": 16, "chunk_delay_s": 0.01},
    ]
    script = write_script(tmp_path / "s.json", turns)
    alone = run_loom("run", "--json", "--model", f"scripted:{script}", "read it", cwd=project, home=home)
    with running_daemon(home, tmp_path):
        served = run_loom("run", "--json", "--model", f"scripted:{script}", "read it", cwd=project, home=home)
    assert alone.returncode == 0, alone
    assert served.returncode == 0, served
    assert _collapsed(served.events()) == _collapsed(alone.events())
    assert "text_delta" in _collapsed(served.events())
    for events in (alone.events(), served.events()):
        texts = _streamed_text(events)
        assert sorted(texts) == [1, 2] and all(streamed == message for streamed, message in texts.values())
