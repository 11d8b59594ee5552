"""The listing commands (``loom runs``, ``trace``, ``export``) on a real store: fast, headed, pipe-safe, in CLI terms.

Fast means they read the database without importing the MCP SDK (``loom runs`` was 1.4 s, nearly all of it
the SDK and an in-process checkpoints server); that is checked through ``PYTHONPROFILEIMPORTTIME``, which is
exact where a timing would be noisy. ``benchmarks/startup.py`` measures the time itself.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic import BaseModel

from clients.cli.errors import cli_message
from clients.loom import FaceError, LoomClient
from orchestrator.events import RunFinished
from orchestrator.face.server import build_face
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from orchestrator.store import peek
from servers.checkpoints import SCHEMA_VERSION
from tests.clients.cli_support import RUN_TIMEOUT_S, CliResult, clean_env, loom_command, run_loom, write_script
from tests.clients.daemon_like import daemon_like, face_of

TURNS: list[dict[str, Any]] = [
    {"text": "looking", "tool_calls": [{"name": "fs__list", "arguments": {"path": "."}}]},
    {"text": "done"},
]


class Store:
    """A home holding one finished run, and the directory it ran in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        script = write_script(root / "s.json", TURNS)
        ran = run_loom("run", "--json", "--model", f"scripted:{script}", "go", cwd=root, home=self.home)
        assert ran.returncode == 0, ran
        finished = ran.events()[-1]
        assert isinstance(finished, RunFinished)
        self.run_id = finished.run_id

    def loom(self, *args: str, env: dict[str, str] | None = None) -> CliResult:
        return run_loom(*args, cwd=self.root, home=self.home, env=env)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return Store(tmp_path_factory.mktemp("listing"))


def test_runs_has_column_headers(store: Store) -> None:
    result = store.loom("runs")

    assert result.returncode == 0, result
    header, row = result.stdout.splitlines()
    assert header.split() == ["RUN", "STARTED", "STATUS", "MODEL", "REASON"]
    assert row.startswith(store.run_id) and "completed" in row and "scripted:" in row
    assert row.index("completed") == header.index("STATUS")  # aligned under its header


def test_runs_of_an_empty_home_prints_no_header_and_says_so(tmp_path: Path) -> None:
    result = run_loom("runs", cwd=tmp_path, home=tmp_path / "home")

    assert (result.returncode, result.stdout) == (0, "")
    assert "no runs yet" in result.stderr
    assert not (tmp_path / "home" / "loom.db").exists()  # reading does not create the store


@pytest.mark.parametrize("args", [["runs"], ["sessions"], ["trace", "RUN"], ["export", "RUN"]])
def test_a_reader_that_closed_the_pipe_is_no_error(store: Store, args: list[str]) -> None:
    # The reader is gone before loom writes (as `| head -1` is, once it has its line): a real pipe, closed.
    argv = [*loom_command(), *[store.run_id if a == "RUN" else a for a in args]]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            argv, cwd=store.root, env=clean_env(store.home), stdin=subprocess.DEVNULL, stdout=write_end,
            stderr=subprocess.PIPE, encoding="utf-8", timeout=RUN_TIMEOUT_S, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)

    assert done.returncode == 0, done.stderr
    assert "BrokenPipeError" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_runs_piped_into_head(store: Store) -> None:
    shell = shutil.which("sh")
    assert shell is not None
    command = f"{shlex.join([*loom_command(), 'runs'])} | head -1"

    done = subprocess.run(
        [shell, "-c", command], cwd=store.root, env=clean_env(store.home), capture_output=True,
        encoding="utf-8", timeout=RUN_TIMEOUT_S, check=False,
    )  # fmt: skip

    assert done.returncode == 0 and done.stdout.split() == ["RUN", "STARTED", "STATUS", "MODEL", "REASON"], done
    assert done.stderr == ""


def _imported(result: CliResult) -> set[str]:
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("args", [["runs"], ["sessions"], ["trace", "RUN"], ["export", "RUN"]])
def test_listings_do_not_import_the_mcp_sdk(store: Store, args: list[str]) -> None:
    result = store.loom(*[store.run_id if a == "RUN" else a for a in args], env={"PYTHONPROFILEIMPORTTIME": "1"})

    assert result.returncode == 0, result
    modules = _imported(result)
    assert "clients.cli.main" in modules  # the profile did record this command's imports
    sdk = sorted(m for m in modules if m.split(".")[0] in ("mcp", "mcp_types", "aiosqlite", "servers"))
    assert sdk == [], sdk


def test_trace_and_export_read_the_same_events_as_before(store: Store) -> None:
    traced = store.loom("trace", store.run_id)
    exported = store.loom("export", store.run_id[:8])  # a unique prefix

    assert traced.returncode == 0 and traced.stdout.startswith(f"run {store.run_id}  session s_"), traced
    assert "status completed" in traced.stdout.splitlines()[0]
    assert "fs__list" in traced.stdout
    events = exported.events()
    assert {e.run_id for e in events if hasattr(e, "run_id")} == {store.run_id}
    assert events[0].type == "run_started" and events[-1].type == "run_finished"


def test_an_unknown_run_points_at_loom_runs(store: Store) -> None:
    for command in ("trace", "export"):
        result = store.loom(command, "r_nosuchrun")
        assert result.returncode == 2, result
        assert "no run 'r_nosuchrun'" in result.stderr and "`loom runs` lists them" in result.stderr, result
        assert "read_events" not in result.stderr and "list_sessions" not in result.stderr, result


def test_with_a_daemon_trace_asks_its_face_and_speaks_in_cli_terms(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "home"
    shutil.copytree(store.home, home)
    with daemon_like(home, face_of(home)):
        known = run_loom("trace", store.run_id, cwd=tmp_path, home=home)
        unknown = run_loom("trace", "r_nosuchrun", cwd=tmp_path, home=home)

    assert known.returncode == 0 and known.stdout.startswith(f"run {store.run_id}"), known
    assert unknown.returncode == 2, unknown
    assert unknown.stderr == "loom: error: no run 'r_nosuchrun'; `loom runs` lists them\n", unknown


@pytest.mark.anyio
async def test_the_faces_pointers_to_its_tools_become_cli_commands(tmp_path: Path) -> None:
    async with embedded_runtime(tmp_path / "home") as runtime, SessionHost(runtime) as host:
        async with Client(build_face(host)) as session:
            client = LoomClient(session, on_daemon=False)
            said: dict[str, str] = {}
            for tool, arguments in (
                ("get_run", {"run_id": "r_nope"}),
                ("get_session", {"session_id": "s_nope"}),
                ("decide_approval", {"approval_id": "ap_nope", "decision": "approve_once"}),
            ):
                with pytest.raises(FaceError) as caught:
                    await client.call(tool, BaseModel, **arguments)
                said[tool] = cli_message(str(caught.value))

    assert said["get_run"] == "no run 'r_nope'; `loom runs` lists them"
    assert said["get_session"] == "no session 's_nope'; `loom sessions` lists them"
    assert said["decide_approval"].endswith("; `loom approvals` lists the pending ones")


def test_a_store_the_peek_does_not_know_is_read_by_the_server(tmp_path: Path, store: Store) -> None:
    home = tmp_path / "home"
    shutil.copytree(store.home, home)
    with sqlite3.connect(home / peek.DB_NAME) as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    conn.close()

    listed = run_loom("runs", cwd=tmp_path, home=home)
    traced = run_loom("trace", store.run_id, cwd=tmp_path, home=home)

    for result in (listed, traced):  # the checkpoints server's own answer, not the peek's guess
        assert result.returncode == 1, result
        assert "written by a newer Loom" in result.stderr and "Traceback" not in result.stderr, result


def test_sessions_from_the_peek_are_the_faces_sessions(tmp_path: Path, store: Store) -> None:
    peeked = store.loom("sessions")
    with daemon_like(store.home, face_of(store.home)):  # the same listing, through a face
        faced = store.loom("sessions")

    assert peeked.returncode == faced.returncode == 0, (peeked, faced)
    assert peeked.stdout == faced.stdout
    header, row = peeked.stdout.splitlines()
    assert header.split() == ["SESSION", "STATUS", "MODE", "MODEL", "CTX", "CWD"] and row.endswith(str(store.root))


def test_the_peek_knows_the_servers_schema() -> None:
    # A schema change must come with a look at the peek's queries (orchestrator/store/peek.py), then this line.
    assert max(peek.KNOWN_SCHEMAS) == SCHEMA_VERSION


def test_a_run_whose_process_is_gone_shows_as_interrupted(store: Store) -> None:
    (row,) = peek.recent_runs(store.home, 1)
    dead = row._replace(status="running", owner="999999999:1")
    alive = row._replace(status="running", owner=f"{os.getpid()}")

    assert (dead.shown_status, alive.shown_status, row.shown_status) == ("interrupted", "running", "completed")
    assert f"`loom resume {row.id}`" in dead.shown_reason
