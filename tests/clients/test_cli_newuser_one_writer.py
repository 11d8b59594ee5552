"""Issue 12, what a new user hit: two ``loom mcp`` processes without a daemon ran one session at once.

Their events interleaved and a run failed with ``UNIQUE constraint failed: events.session_id,
events.seq``, left ``running``. Now one process at a time runs sessions on a ``LOOM_HOME``: a second
embedded ``loom mcp`` answers every call with the reason and says to start ``loom serve``, ``loom run``
exits 2 saying so, and the daemon holds the same lock (while ``loom run`` still attaches to it).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from orchestrator.events import RunFinished
from orchestrator.runtime.embedded import embedded_runtime, find_run
from orchestrator.runtime.lock import HomeInUse
from tests.clients.cli_support import run_loom
from tests.clients.test_cli_mcp import loom_mcp, scripted
from tests.clients.test_cli_newuser_model import TEST_TIMEOUT_S, text_of
from tests.orchestrator.daemon.daemon_process import running_daemon

pytestmark = pytest.mark.anyio


async def test_a_second_embedded_loom_mcp_refuses_and_says_to_start_loom_serve(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = scripted(tmp_path / "script.json", [{"text": "one"}, {"text": "two"}])
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path, name="first") as first:
            session = await first.call("create_session", cwd=str(tmp_path), model=model)
            async with loom_mcp(home, tmp_path, name="second") as second:
                tools = {t.name for t in (await second.client.list_tools()).tools}
                created = await second.client.call_tool("create_session", {"cwd": str(tmp_path), "model": model})
                sent = await second.client.call_tool(
                    "send_message", {"session_id": session["session_id"], "text": "from the second", "wait_s": 5}
                )
            run = await first.call("send_message", session_id=session["session_id"], text="hi", wait_s=20)
            page = await first.call("read_events", session_id=session["session_id"])
    assert {"create_session", "send_message"} <= tools
    for refused in (created, sent):
        assert refused.is_error, text_of(refused)
        assert "`loom serve`" in text_of(refused) and "`loom mcp`" in text_of(refused), text_of(refused)
    assert "`loom serve`" in second.stderr() and "Traceback" not in second.stderr()
    assert (run["status"], run["final_text"]) == ("completed", "one")
    assert [e["seq"] for e in page["events"]] == list(range(1, len(page["events"]) + 1))
    assert not any("from the second" in str(e) for e in page["events"])


async def test_loom_run_beside_an_embedded_loom_mcp_exits_2_and_says_to_start_loom_serve(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = scripted(tmp_path / "script.json", [{"text": "never"}])
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path) as face:
            await face.call("list_sessions")
            ran = await anyio.to_thread.run_sync(
                lambda: run_loom("run", "hi", "--model", model, cwd=tmp_path, home=home)
            )
    assert ran.returncode == 2, ran
    assert "`loom serve`" in ran.stderr and "`loom mcp`" in ran.stderr and "Traceback" not in ran.stderr


async def test_the_daemon_holds_the_lock_and_loom_run_still_attaches_to_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = scripted(tmp_path / "script.json", [{"text": "ran on the daemon"}])
    with running_daemon(home, tmp_path) as daemon:
        with pytest.raises(HomeInUse) as refused:
            async with embedded_runtime(home):
                pass
        ran = await anyio.to_thread.run_sync(
            lambda: run_loom("run", "hi", "--model", model, "--json", cwd=tmp_path, home=home)
        )
    assert refused.value.pid == daemon.proc.pid and refused.value.command == "loom serve"
    assert "`loom serve`" in str(refused.value)
    assert ran.returncode == 0, ran
    [finished] = [e for e in ran.events() if isinstance(e, RunFinished)]
    found = await find_run(home, finished.run_id)
    assert found is not None and found[0].status == "completed" and found[0].final_text == "ran on the daemon"


async def test_loom_serve_refuses_to_start_while_an_embedded_loom_mcp_runs_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with loom_mcp(home, tmp_path) as face:
            await face.call("list_sessions")
            served = await anyio.to_thread.run_sync(
                lambda: run_loom("serve", "--port", "0", cwd=tmp_path, home=home, timeout_s=20)
            )
            still = await face.call("list_sessions")
    assert served.returncode == 2, served
    assert "`loom mcp`" in served.stderr and "Traceback" not in served.stderr
    assert not (home / "daemon.json").exists()
    assert still == {"sessions": []}


def test_several_loom_runs_share_a_home_without_a_daemon(tmp_path: Path) -> None:
    # Each `loom run` writes only the session it creates, so they hold the home's lock shared.
    from concurrent.futures import ThreadPoolExecutor

    from tests.clients.cli_support import write_script

    home = tmp_path / "home"
    script = write_script(tmp_path / "s.json", [{"text": "done"}])

    def one(i: int) -> int:
        work = tmp_path / f"w{i}"
        work.mkdir()
        return run_loom("run", "--model", f"scripted:{script}", "go", cwd=work, home=home).returncode

    with ThreadPoolExecutor(3) as pool:
        assert list(pool.map(one, range(3))) == [0, 0, 0]
