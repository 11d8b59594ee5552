from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.events import RunStarted, SessionCreated
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.owner import owner_alive, this_process


def finished_process_owner() -> str:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import os; print(open(f'/proc/{os.getpid()}/stat').read())"],
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=30)
    fields = out[out.rfind(")") + 2 :].split()
    return f"{proc.pid}:{fields[19]}"


def test_this_process_is_alive_and_others_are_told_apart() -> None:
    me = this_process()
    pid, _, start = me.partition(":")
    assert owner_alive(me)
    assert not owner_alive(f"{pid}:{int(start) + 1}")  # same pid, another start time: a recycled pid
    assert not owner_alive(finished_process_owner())
    assert not owner_alive("") and not owner_alive("garbage")


@pytest.mark.anyio
async def test_only_runs_of_dead_processes_are_marked_interrupted(tmp_path: Path) -> None:
    dead = finished_process_owner()
    async with embedded_runtime(tmp_path) as runtime:
        await runtime.log.append(
            SessionCreated(session_id="s", cwd=str(tmp_path), model="m"),
            RunStarted(session_id="s", run_id="r_live", model="m", max_steps=1, owner=this_process()),
            RunStarted(session_id="s", run_id="r_dead", model="m", max_steps=1, owner=dead),
            RunStarted(session_id="s", run_id="r_old", model="m", max_steps=1),
        )
        marked = await runtime.mark_interrupted()
        live = await runtime.log.store.get_run("r_live")
    assert sorted(marked) == ["r_dead", "r_old"]
    assert live is not None and live.status == "running"
