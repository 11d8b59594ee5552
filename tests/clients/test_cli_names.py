"""File names that are not UTF-8 through the real ``loom`` command: listed, globbed, grepped, read, resumed.

Such a name reaches Python with lone surrogates, which no JSON encoder, SQLite or model API accepts. It used
to fail the run at its next store write ("surrogates not allowed") and leave it ``running`` for ever.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import anyio
import pytest

from orchestrator.events import RunFinished, ToolCallFinished
from tests.clients.cli_support import make_project, run_loom, write_script
from tests.clients.test_cli_resume import crash_during
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.anyio

BAD = b"bad\xff-name.txt"
SHOWN = "bad\\xff-name.txt"


def plant(work: Path) -> None:
    fd = os.open(os.fsencode(work) + b"/" + BAD, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"the needle is here\n")
    os.close(fd)


LOOK = {
    "tool_calls": [
        {"id": "ls", "name": "fs__list", "arguments": {"path": "."}},
        {"id": "glob", "name": "fs__glob", "arguments": {"pattern": "*.txt"}},
        {"id": "grep", "name": "fs__grep", "arguments": {"pattern": "needle"}},
    ]
}


def test_a_run_lists_globs_and_greps_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    plant(project)
    write_script(project / "names.json", [LOOK, {"text": "saw {{result:ls}}"}])
    result = run_loom("run", "--json", "--model", "scripted:names.json", "look", cwd=project, home=tmp_path / "home")
    assert result.returncode == 0, result
    events = result.events()
    finished = {e.tool: e for e in events if isinstance(e, ToolCallFinished)}
    assert set(finished) == {"fs__list", "fs__glob", "fs__grep"}
    for call in finished.values():
        assert not call.is_error, call
        assert SHOWN in call.content, call  # the undecodable byte is shown as an escape, not dropped or replaced
    assert re.search(r"needle", finished["fs__grep"].content)
    final = events[-1]
    assert isinstance(final, RunFinished) and final.status == "completed", final


async def test_a_run_that_saw_such_a_name_resumes_after_a_crash(tmp_path: Path) -> None:
    crashed = await crash_during(tmp_path, "lookup", before=[LOOK], setup=plant)
    with running_daemon(crashed.home, tmp_path, log_name="second"):
        done = await anyio.to_thread.run_sync(
            lambda: run_loom("resume", crashed.run_id, "--json", cwd=tmp_path, home=crashed.home)
        )
    assert done.returncode == 0, done
    final = done.events()[-1]
    assert isinstance(final, RunFinished) and (final.run_id, final.status) == (crashed.run_id, "completed"), final
