"""The system prompt is kept between runs, yet every change to what it is made of shows in the next run.

Real parts: a runtime over the checkpoints store on SQLite, sessions with their real memory servers (one memory
file in the home), instruction and skill files on disk, and a function model that records the system prompt of
every conversation request. A file changed less than ``RACY_S`` ago is read again anyway, so the files are first
made to look settled (their modification times set back) and the changes keep sizes and modification times
where they can: the case a cache keyed on them could miss.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.context.prompt_cache import RACY_S, FileInputs, take_fingerprint
from orchestrator.models.base import ModelRequest
from orchestrator.models.scripted import FunctionModel
from orchestrator.runtime.runtime import Runtime, Session
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog

pytestmark = pytest.mark.anyio


class Recorder:
    """A model that answers at once and keeps the system prompt of each conversation request."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, request: ModelRequest) -> dict[str, Any]:
        self.prompts.append(request.system)
        return {"text": "Done."}


@contextlib.asynccontextmanager
async def runtime_on(home: Path) -> AsyncIterator[Runtime]:
    async with CheckpointStore(home / "loom.db") as store:
        yield Runtime(EventLog(store), home=home)


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, cwd = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (cwd / ".git").mkdir(parents=True)
    return home, cwd


def settle(*paths: Path) -> None:
    """Make ``paths`` look last modified long ago (beyond the racy window)."""
    for path in paths:
        if path.exists():
            old = os.stat(path).st_mtime - 10 * RACY_S
            os.utime(path, (old, old))


def rewrite_keeping_times(path: Path, text: str) -> None:
    """Replace ``path``'s text and set its modification time back to what it was (as a copy keeping times does)."""
    before = os.stat(path)
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


async def prompt_after_run(session: Session, model: Recorder) -> str:
    result = await session.run("Go on.")
    assert result.status == "completed", result.reason
    return model.prompts[-1]


async def test_changed_instruction_and_skill_files_show_in_the_next_run(tmp_path: Path) -> None:
    home, cwd = dirs(tmp_path)
    agents = cwd / "AGENTS.md"
    agents.write_text("Use tabs.\n")
    skill = home / "skills" / "deploy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: deploy\ndescription: Ship the site.\n---\nSteps.\n")
    settle(agents, skill, skill.parent, skill.parent.parent)
    model = Recorder()
    async with runtime_on(home) as runtime, runtime.open_session(cwd, FunctionModel(model)) as session:
        first = await prompt_after_run(session, model)
        assert "Use tabs." in first and "Ship the site." in first
        assert await prompt_after_run(session, model) == first  # nothing changed: the same prompt

        rewrite_keeping_times(agents, "Use TABS.\n")  # same size, same modification time
        assert "Use TABS." in await prompt_after_run(session, model)
        rewrite_keeping_times(skill, "---\nname: deploy\ndescription: Ship the app.\n---\nSteps.\n")
        assert "Ship the app." in await prompt_after_run(session, model)

        settle(agents, skill)
        await prompt_after_run(session, model)
        (home / "LOOM.md").write_text("Answer in French.\n")  # a file that did not exist
        settle(home / "LOOM.md")
        assert "Answer in French." in await prompt_after_run(session, model)

        other = home / "skills" / "review" / "SKILL.md"
        other.parent.mkdir()
        other.write_text("---\nname: review\ndescription: Read the diff.\n---\nSteps.\n")
        settle(other, other.parent, other.parent.parent)
        assert "Read the diff." in await prompt_after_run(session, model)

        agents.unlink()
        assert "Use TABS." not in await prompt_after_run(session, model)


async def test_a_memory_write_shows_in_the_next_run_of_every_session(tmp_path: Path) -> None:
    home, cwd = dirs(tmp_path)
    memory = home / "memory.db"
    log = home / "memory.db-wal"
    model = Recorder()
    async with (
        runtime_on(home) as runtime,
        runtime.open_session(cwd, FunctionModel(model)) as writer,
        runtime.open_session(cwd, FunctionModel(model)) as other,
    ):
        assert "## Memory" not in await prompt_after_run(writer, model)
        assert memory.exists()  # listed through the memory server, which creates its file, as every run did

        written = await writer.hub.call("memory__set", {"namespace": "user", "key": "style", "body": "Be brief."})
        assert not written.is_error, written.content
        settle(memory, log)
        assert "user/style: Be brief." in await prompt_after_run(writer, model)
        assert "user/style: Be brief." in await prompt_after_run(other, model)  # another session's write

        # A write that leaves the log's modification time as it was: its size tells.
        before = os.stat(log)
        await writer.hub.call("memory__set", {"namespace": "user", "key": "style", "body": "Be terse."})
        os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert "user/style: Be terse." in await prompt_after_run(other, model)
        assert "user/style: Be terse." in await prompt_after_run(writer, model)

        await writer.hub.call("memory__set", {"namespace": "session", "key": "todo", "body": "Check the tests."})
        settle(memory, log)
        assert "session/todo: Check the tests." in await prompt_after_run(writer, model)
        assert "session/todo" not in await prompt_after_run(other, model)  # not its session


def test_a_fresh_change_is_not_trusted(tmp_path: Path) -> None:
    home, cwd = dirs(tmp_path)
    agents = cwd / "AGENTS.md"
    agents.write_text("Use tabs.\n")
    inputs = FileInputs(home, cwd)
    now = time.time_ns()
    os.utime(agents, ns=(now, now))  # changed "just now", however long the test took to get here
    assert take_fingerprint(inputs, home / "memory.db").racy  # the same tick may change it again
    settle(agents)
    settled = take_fingerprint(inputs, home / "memory.db")
    assert not settled.racy
    assert settled == take_fingerprint(inputs, home / "memory.db")


async def test_opening_the_memory_database_again_keeps_the_listings(tmp_path: Path) -> None:
    """SQLite run as root ``fchown``s the write-ahead log on every open: only its change time moves.

    Were that taken for a write, each new session's memory server opening the file would make the next session
    list every namespace again (it did: two in-process MCP calls and a server built on every first run).
    """
    home, cwd = dirs(tmp_path)
    memory, log = home / "memory.db", home / "memory.db-wal"
    model = Recorder()
    async with runtime_on(home) as runtime, runtime.open_session(cwd, FunctionModel(model)) as writer:
        written = await writer.hub.call("memory__set", {"namespace": "user", "key": "style", "body": "Be brief."})
        assert not written.is_error, written.content
        settle(memory, log)
        inputs = FileInputs(home, cwd)
        before = take_fingerprint(inputs, memory)
        assert not before.racy
        for path in (memory, log):
            found = os.stat(path)
            os.chown(path, found.st_uid, found.st_gid)  # what SQLite does as root: the same owner, a new ctime
            os.chmod(path, found.st_mode & 0o7777)
        assert take_fingerprint(inputs, memory) == before
        await writer.hub.call("memory__set", {"namespace": "user", "key": "style", "body": "Be terse."})
        settle(memory, log)
        assert take_fingerprint(inputs, memory) != before  # a write still shows
        assert "user/style: Be terse." in await prompt_after_run(writer, model)


@pytest.fixture
def shallow_dir() -> Iterator[Path]:
    """A new directory two levels below the root (``/tmp/loom-depth-…``)."""
    if not os.path.isdir("/tmp"):
        pytest.skip("no /tmp to make a directory two levels below the root in")
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="loom-depth-"))
    assert len(Path(os.path.realpath(path)).parts) == 3
    yield path
    shutil.rmtree(path)


async def test_a_session_runs_two_levels_below_the_root(
    tmp_path: Path, shallow_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outside the user's home the project markers are looked for up to `/`, two per directory: a working directory
    # such as /srv/app or /tmp/x has six. The markers' kinds once passed for a file's signature when there were
    # exactly six, and every run there failed with a TypeError.
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    home = tmp_path / "home"
    home.mkdir()
    model = Recorder()
    async with runtime_on(home) as runtime, runtime.open_session(shallow_dir, FunctionModel(model)) as session:
        await prompt_after_run(session, model)
        await prompt_after_run(session, model)  # the second run compares fingerprints
