"""Running the ``loom`` CLI as a real subprocess, the way a user runs it.

Every run gets its own ``LOOM_HOME`` and an environment stripped of model credentials, Loom settings
and proxies, so that nothing from the developer's machine leaks in and nothing reaches the internet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.events import EVENT_ADAPTER, Event

REPO_ROOT = Path(__file__).resolve().parents[2]
STDIO_TEST_SERVER = REPO_ROOT / "tests" / "orchestrator" / "stdio_test_server.py"

RUN_TIMEOUT_S = 30.0
"""Upper bound for one CLI invocation; a healthy one takes a few seconds at most."""

_DROPPED_PREFIXES = ("ANTHROPIC_", "OPENAI_", "LOOM_")
_PROXY_VARS = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})


def loom_command() -> list[str]:
    """The installed ``loom`` console script next to this interpreter, else ``python -m clients.cli.main``."""
    script = Path(sys.executable).with_name("loom")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "clients.cli.main"]


def clean_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without credentials, Loom settings or proxies, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_DROPPED_PREFIXES) and key.lower() not in _PROXY_VARS
    }
    env["LOOM_HOME"] = str(home)
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class CliResult:
    """What one ``loom`` invocation printed and how it exited."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def events(self) -> list[Event]:
        """Stdout parsed as NDJSON events (``--json`` and ``export`` output)."""
        return parse_events(self.stdout)

    def __str__(self) -> str:
        command = " ".join(["loom", *self.args])
        return f"{command} -> exit {self.returncode}\n--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"


def run_loom(
    *args: str,
    cwd: Path,
    home: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float = RUN_TIMEOUT_S,
) -> CliResult:
    """Run ``loom ARGS`` in ``cwd`` with ``LOOM_HOME=home`` and wait (bounded) for it to exit."""
    done = subprocess.run(
        [*loom_command(), *args],
        cwd=cwd,
        env=clean_env(home, env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        encoding="utf-8",
        timeout=timeout_s,
        check=False,
    )
    return CliResult(tuple(args), done.returncode, done.stdout, done.stderr)


def parse_events(text: str) -> list[Event]:
    """Every line of ``text`` validated as one event; raises on any line that is not one."""
    assert text.endswith("\n"), f"NDJSON output must end with a newline: {text[-200:]!r}"
    return [EVENT_ADAPTER.validate_json(line) for line in text.splitlines()]


def write_script(path: Path, turns: Sequence[Mapping[str, Any]]) -> Path:
    """Write a scripted-model file (the ``scripted:PATH`` format) and return its path."""
    path.write_text(json.dumps({"turns": list(turns)}, indent=2), encoding="utf-8")
    return path


def write_config(path: Path, servers: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write a config file with the standard ``mcpServers`` block and return its path."""
    path.write_text(json.dumps({"mcpServers": servers}, indent=2), encoding="utf-8")
    return path


def stdio_test_server(**env: str) -> dict[str, Any]:
    """An ``mcpServers`` entry that runs ``tests/orchestrator/stdio_test_server.py`` with ``env``."""
    return {
        "command": sys.executable,
        "args": [str(STDIO_TEST_SERVER)],
        "env": {"PYTHONPATH": str(REPO_ROOT), **env},
    }


def make_project(root: Path) -> Path:
    """A small project directory: a README, a couple of Python files (one with a TODO), a subdirectory."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(
        "# Acme Widget Toolkit\n\nTools for building widgets.\nSee docs/ for more.\n", encoding="utf-8"
    )
    (root / "main.py").write_text(
        "def main() -> None:\n    # TODO: handle the blue widgets\n    print('widgets')\n", encoding="utf-8"
    )
    (root / "pkg").mkdir(exist_ok=True)
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "gears.py").write_text("TEETH = 12\n", encoding="utf-8")
    return root


def processes_matching(marker: str) -> dict[int, str]:
    """Processes whose command line contains ``marker``, as {pid: state letter from /proc/PID/stat}.

    A zombie's command line reads as empty, so zombies (which hold nothing, and which PID 1 here may
    never reap) normally do not match; callers should still treat state ``Z``/``X`` as dead.
    """
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # exited while we looked
        if marker in cmdline:
            # The command name in parentheses may contain spaces; the state is the first field after it.
            found[int(entry.name)] = stat[stat.rfind(")") + 2 :].split()[0]
    return found


def assert_nothing_recorded(home: Path, stdout: str) -> None:
    """A refused command printed nothing on stdout and recorded no event (the store may have been opened)."""
    import contextlib
    import sqlite3

    assert stdout == ""
    if (home / "loom.db").exists():  # the face refused it: the store was opened, and nothing was recorded
        with contextlib.closing(sqlite3.connect(home / "loom.db")) as db:
            assert db.execute("SELECT count(*) FROM events").fetchone() == (0,), "a refused command recorded events"
