"""``loom handoff`` and ``loom memory archive`` as a user runs them: real subprocesses, a fresh home, scripts."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchestrator.context.handoff import BLOCKS
from tests.clients.cli_support import clean_env, loom_command, run_loom
from tests.mcp_calls import call
from tests.orchestrator.daemon.daemon_process import mcp_client, running_daemon

GOAL = 'Tidy the README; never touch "setup.py".'


def handoff_text(*, without: str = "") -> str:
    blocks = dict.fromkeys(BLOCKS, "none")
    blocks["Goal and constraints"] = f'- "{GOAL}"'
    blocks["Work done"] = "- saved the build command as a session note (memory__set result seen)"
    return "\n\n".join(f"## {name}\n{body}" for name, body in blocks.items() if name != without)


def ran(tmp_path: Path, summaries: list[dict[str, Any]]) -> tuple[Path, Path, str]:
    """A finished `loom run` that saved a session note: (home, working directory, session id)."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    note = {"namespace": "session", "key": "build", "body": "make test runs the suite"}
    script = tmp_path / "script.json"
    turns = [{"text": "Noting.", "tool_calls": [{"name": "memory__set", "arguments": note}]}, {"text": "Noted."}]
    script.write_text(json.dumps({"turns": turns, "summaries": summaries}), encoding="utf-8")
    done = run_loom("run", "--json", "--mode", "bypass", "--model", f"scripted:{script}", GOAL, cwd=work, home=home)
    assert done.returncode == 0, done
    return home, work, done.events()[0].session_id


def test_handoff_prints_the_new_session_shows_the_handoff_and_promotes_the_notes(tmp_path: Path) -> None:
    home, work, sid = ran(tmp_path, [{"text": handoff_text()}])

    done = run_loom("handoff", sid[:6], "--instructions", "Begin with the badges.", cwd=work, home=home)
    assert done.returncode == 0, done
    new_id = done.stdout.strip()
    assert new_id.startswith("s") and new_id != sid
    assert f"continues {sid}" in done.stderr and f"loom handoff --show {new_id}" in done.stderr
    assert "promoted 1 note to the project: build" in done.stderr

    for shown_by in (new_id, sid):
        shown = run_loom("handoff", "--show", shown_by, cwd=work, home=home)
        assert shown.returncode == 0, shown
        assert f'"{GOAL}"' in shown.stdout and "## Warnings" in shown.stdout

    events = run_loom("attach", new_id, "--no-follow", "--json", cwd=work, home=home)
    opening = [json.loads(line) for line in events.stdout.splitlines()]
    assert opening[0]["type"] == "session_created" and opening[0]["handoff_from"] == sid
    copy = next(e for e in opening if e["type"] == "handoff_written")
    assert (
        copy["from_session_id"] == sid and copy["extra"] == "Begin with the badges." and copy["instructions"] == [GOAL]
    )

    listed = run_loom("sessions", cwd=work, home=home)
    assert new_id in listed.stdout and sid not in listed.stdout  # archived: hidden, not gone
    again = run_loom("handoff", sid, cwd=work, home=home)
    assert again.returncode == 2 and f"already handed off to '{new_id}'" in again.stderr
    archived = run_loom("memory", "archive", sid, cwd=work, home=home)
    assert archived.returncode == 0 and "already in the project: build" in archived.stdout, archived


def test_a_handoff_that_fails_its_checks_twice_exits_1_and_changes_nothing(tmp_path: Path) -> None:
    bad = {"text": handoff_text(without="Next step")}
    home, work, sid = ran(tmp_path, [bad, bad])

    done = run_loom("handoff", sid, cwd=work, home=home)
    assert done.returncode == 1, done
    assert done.stdout == "" and "no handoff was written" in done.stderr and '"## Next step"' in done.stderr
    listed = run_loom("sessions", "--all", cwd=work, home=home)
    rows = listed.stdout.splitlines()[1:]  # under the header: the one session, not archived, no fresh one
    assert len(rows) == 1 and sid in rows[0] and "(archived)" not in rows[0], listed.stdout
    shown = run_loom("handoff", "--show", sid, cwd=work, home=home)
    assert shown.returncode == 2 and "has no handoff" in shown.stderr
    kept = run_loom("memory", "archive", sid, "--json", cwd=work, home=home)
    assert kept.returncode == 0 and json.loads(kept.stdout)["keys"] == ["build"]  # the notes were still there


def test_unknown_sessions_and_bad_combinations_are_refused_in_cli_terms(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    unknown = run_loom("handoff", "s_nope", cwd=work, home=home)
    assert unknown.returncode == 2 and "no session 's_nope'; `loom sessions` lists them" in unknown.stderr
    mixed = run_loom("handoff", "--show", "s_nope", "--keep-memory", cwd=work, home=home)
    assert mixed.returncode == 2 and "--show only prints a handoff" in mixed.stderr
    memory = run_loom("memory", "archive", "s_nope", cwd=work, home=home)
    assert memory.returncode == 2 and "no session 's_nope'" in memory.stderr


@pytest.mark.anyio
async def test_on_the_daemon_a_busy_session_is_refused_then_handed_off_by_the_daemon(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    script = tmp_path / "slow.json"
    turns = [{"text": "thinking", "delay_s": 60}]
    script.write_text(json.dumps({"turns": turns, "summaries": [{"text": handoff_text()}]}), encoding="utf-8")
    with running_daemon(home, tmp_path) as daemon:
        async with mcp_client(daemon, "auto") as client:
            made = await call(client, "create_session", cwd=str(work), model=f"scripted:{script}", mode="bypass")
            sid = made["session_id"]
            run = await call(client, "send_message", session_id=sid, text=GOAL)
            busy = run_loom("handoff", sid, cwd=work, home=home)
            await call(client, "cancel_run", run_id=run["run_id"])
            done = run_loom("handoff", sid, "--keep-memory", "--json", cwd=work, home=home)
            shown = await call(client, "get_handoff", session_id=sid)
    assert busy.returncode == 2 and "is busy" in busy.stderr and "cancel it" in busy.stderr
    assert done.returncode == 0, done
    report = json.loads(done.stdout)
    assert report["session_id"] == sid and report["memory"] is None and report["instructions"] == [GOAL]
    assert shown["new_session_id"] == report["new_session_id"]  # the daemon's own record of it


def test_the_daemon_killed_while_the_handoff_is_written_leaves_the_session_as_it_was(tmp_path: Path) -> None:
    slow = {"text": handoff_text(), "delay_s": 60}
    home, work, sid = ran(tmp_path, [slow])
    with running_daemon(home, tmp_path) as daemon:
        proc = subprocess.Popen(
            [*loom_command(), "handoff", sid],
            cwd=work,
            env=clean_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            encoding="utf-8",
        )
        try:
            # The handoff takes a minute to write; whenever the kill lands before it is stored, nothing may change.
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=3)
            daemon.stop(signal.SIGKILL)
            # The client hears of it at once and says so in CLI terms, without a traceback.
            _, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 1, err
    assert "loom: error: the connection to the Loom daemon broke while this command ran" in err, err
    assert "loom serve" in err and "Traceback" not in err
    listed = run_loom("sessions", "--all", cwd=work, home=home)
    rows = listed.stdout.splitlines()[1:]
    assert len(rows) == 1 and sid in rows[0] and "(archived)" not in rows[0], listed.stdout
    shown = run_loom("handoff", "--show", sid, cwd=work, home=home)
    assert shown.returncode == 2 and "has no handoff" in shown.stderr
    # Started again (here, without the daemon), the same handoff goes through.
    script = tmp_path / "script.json"
    data = json.loads(script.read_text(encoding="utf-8"))
    data["summaries"] = [{"text": handoff_text()}]
    script.write_text(json.dumps(data), encoding="utf-8")
    done = run_loom("handoff", sid, cwd=work, home=home)
    assert done.returncode == 0, done
