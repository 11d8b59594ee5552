"""Exit codes and messages of ``loom`` for bad usage and bad configuration (exit 2), before any run starts."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from pathlib import Path

import anyio
import pytest

from orchestrator.store.checkpoints import CheckpointStore
from tests.clients.cli_support import assert_nothing_recorded, make_project, run_loom, write_script


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--bogus", "explore"], "unrecognized arguments: --bogus"),
        (["run"], "the following arguments are required: goal"),
        (["run", "--max-steps", "0", "explore"], "argument --max-steps: must be at least 1"),
        (["run", "--max-steps", "many", "explore"], "argument --max-steps: invalid int value: 'many'"),
        (["frobnicate"], "invalid choice"),
    ],
    ids=["unknown-flag", "missing-goal", "zero-max-steps", "non-integer-max-steps", "unknown-command"],
)
def test_bad_usage_exits_2(args: list[str], expected: str, project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_loom(*args, cwd=project, home=home)

    assert result.returncode == 2, result
    assert expected in result.stderr, result
    assert "usage: loom" in result.stderr, result
    assert_nothing_recorded(home, result.stdout)


def test_run_usage_errors_show_the_run_usage(project: Path, tmp_path: Path) -> None:
    # An error about a ``run`` option should print ``loom run``'s usage, not the top-level one.
    result = run_loom("run", "--max-steps", "0", "explore", cwd=project, home=tmp_path / "home")

    assert result.returncode == 2, result
    assert "usage: loom run " in result.stderr, result
    assert "loom run: error:" in result.stderr, result


def test_malformed_config_names_the_file_and_line(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    bad = project / "bad.json"
    bad.write_text('{\n  "model": "scripted:demo",\n  "mcpServers": {,\n}\n', encoding="utf-8")

    result = run_loom("run", "--config", "bad.json", "explore", cwd=project, home=home)

    assert result.returncode == 2, result
    assert "bad.json:3:" in result.stderr, result  # file and line of the syntax error
    assert "invalid JSON" in result.stderr, result
    assert "Traceback" not in result.stderr, result
    assert_nothing_recorded(home, result.stdout)


def test_invalid_server_entry_names_the_file_and_entry(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (project / "servers.json").write_text('{"mcpServers": {"tools": {"args": ["x"]}}}', encoding="utf-8")

    result = run_loom("run", "--config", "servers.json", "explore", cwd=project, home=home)

    assert result.returncode == 2, result
    assert "servers.json" in result.stderr and "mcpServers.tools" in result.stderr, result
    assert_nothing_recorded(home, result.stdout)


def test_missing_config_file_exits_2(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_loom("run", "--config", "nowhere.json", "explore", cwd=project, home=home)

    assert result.returncode == 2, result
    assert "nowhere.json" in result.stderr, result
    assert_nothing_recorded(home, result.stdout)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("foo:bar", "unknown model provider 'foo'"),
        ("claude", "must look like PROVIDER:NAME"),
        ("scripted:missing.json", "missing.json"),
    ],
    ids=["unknown-provider", "no-provider", "missing-script"],
)
def test_unusable_model_exits_2(model: str, expected: str, project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_loom("run", "--model", model, "explore", cwd=project, home=home)

    assert result.returncode == 2, result
    assert expected in result.stderr, result
    assert "Traceback" not in result.stderr, result
    assert_nothing_recorded(home, result.stdout)


def test_model_from_environment_is_validated_too(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_loom("run", "explore", cwd=project, home=home, env={"LOOM_MODEL": "nope:x"})

    assert result.returncode == 2, result
    assert "unknown model provider 'nope'" in result.stderr, result


def test_missing_cwd_exits_2(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_loom("run", "--cwd", str(tmp_path / "absent"), "explore", cwd=project, home=home)

    assert result.returncode == 2, result
    assert "not a directory" in result.stderr, result
    assert_nothing_recorded(home, result.stdout)


def test_no_command_prints_help(project: Path, tmp_path: Path) -> None:
    result = run_loom(cwd=project, home=tmp_path / "home")

    assert result.returncode == 0, result
    assert "usage: loom" in result.stdout
    assert "exit codes" in result.stdout


def test_database_failure_during_a_run_is_reported_plainly(project: Path, tmp_path: Path) -> None:
    # A store that starts failing mid-run (disk full, say): simulated by a trigger that rejects the
    # first assistant message. loom must say what failed, not dump an exception group.
    home = tmp_path / "home"

    async def create_schema() -> None:
        async with CheckpointStore(home / "loom.db"):
            pass

    home.mkdir()
    anyio.run(create_schema)
    with contextlib.closing(sqlite3.connect(home / "loom.db")) as db:
        db.execute(
            "CREATE TRIGGER fail_assistant BEFORE INSERT ON events WHEN NEW.type = 'assistant_message' "
            "BEGIN SELECT RAISE(ABORT, 'simulated disk failure'); END"
        )
        db.commit()
    write_script(project / "hello.json", [{"text": "Hello."}])

    result = run_loom("run", "--model", "scripted:hello.json", "hi", cwd=project, home=home)

    assert result.returncode == 1, result
    assert re.search(r"^loom: error: could not write to the Loom database at .*simulated disk failure", result.stderr,
                     re.MULTILINE), result  # fmt: skip
    assert "Traceback" not in result.stderr, result
