"""The real `loom tui` in a real terminal (tmux): it starts the daemon, streams text, shows tool blocks and a card.

No daemon runs when it opens, so this is also the test of starting ``loom serve`` in the background; the
daemon outlives the TUI (Ctrl-Q leaves its runs alone) and is stopped here by its pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clients.loom import daemon_running
from orchestrator.daemon.discovery import read_discovery
from tests.clients.cli_support import clean_env, loom_command, make_project, write_script

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Terminal:
    """One tmux server of our own (its own socket), 80×24, running one command."""

    def __init__(self, socket: str, env: dict[str, str]) -> None:
        self.socket, self.env = socket, env

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "loom")

    def wait_for(self, predicate: Callable[[str], bool], what: str, timeout_s: float = 30) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            shown = self.screen()
            if predicate(shown):
                return shown
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; the screen:\n{self.screen()}")

    def alive(self) -> bool:
        return "loom" in self.tmux("list-sessions", "-F", "#{session_name}")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[Terminal, Path, Path]]:
    project, home = make_project(tmp_path / "p"), tmp_path / "home"
    env = clean_env(home, {"LOOM_PORT": "0", "TERM": "xterm-256color"})
    term = Terminal(f"loom-test-{os.getpid()}-{tmp_path.name}", env)
    try:
        yield term, project, home
    finally:
        term.tmux("kill-server")
        found = read_discovery(home)
        if found is not None:
            os.kill(found.pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while daemon_running(home) and time.monotonic() < deadline:
                time.sleep(0.1)


def test_loom_tui_in_a_terminal_starts_the_daemon_streams_text_shows_a_tool_block_and_takes_an_approval(
    terminal: tuple[Terminal, Path, Path], tmp_path: Path
) -> None:
    term, project, home = terminal
    script = write_script(
        tmp_path / "s.json",
        [
            {"text": "Listing the project.", "tool_calls": [{"name": "fs__list", "arguments": {"path": "."}}]},
            {
                "text": "Writing the notes.",
                "tool_calls": [{"name": "fs__write", "arguments": {"path": "notes.txt", "content": "seen"}}],
            },
            {"text": "All done here: " + " ".join(f"w{i}" for i in range(30)), "chunk_chars": 8, "chunk_delay_s": 0.02},
        ],
    )
    command = " ".join([*loom_command(), "tui", "--model", f"scripted:{script}"])
    term.tmux("new-session", "-d", "-s", "loom", "-x", "80", "-y", "24", "-c", str(project), command)
    term.wait_for(lambda s: "connected" in s, "the TUI to start the daemon and connect")
    assert daemon_running(home)

    term.tmux("send-keys", "-t", "loom", "look around", "Enter")
    # A write waits in ask mode: its card takes the keys (the prompt is empty), and `a` approves it once.
    shown = term.wait_for(lambda s: "[a] approve once" in s, "the approval card")
    assert "fs__write" in shown and "awaiting approval" in shown, shown
    assert not (project / "notes.txt").exists()
    term.tmux("send-keys", "-t", "loom", "a")
    shown = term.wait_for(lambda s: "All done here" in s and "w29" in s, "the streamed answer")
    # The footer (once the "daemon started" toast has gone) says the run completed and counts its tokens.
    shown = term.wait_for(lambda s: "completed" in s and " tok " in s, "the footer to say the run completed")
    assert "approved once by tui" in shown, shown
    assert (project / "notes.txt").read_text() == "seen"

    term.tmux("send-keys", "-t", "loom", "C-q")
    deadline = time.monotonic() + 10
    while term.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not term.alive(), "Ctrl-Q did not quit"
    assert daemon_running(home), "quitting the TUI stopped the daemon"
