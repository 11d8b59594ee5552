"""The ``loop`` config key: what a user writes, the errors for mistakes, and what an untrusted project may not do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from orchestrator.config import ConfigError, LoopSettings, load_config, load_config_file
from orchestrator.events import Notice
from orchestrator.face.server import build_face
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost
from orchestrator.trust import read_project, trust
from tests.mcp_calls import call

pytestmark = pytest.mark.anyio


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"noticeAfter": 2, "stopAfter": 4}, LoopSettings(notice_after=2, stop_after=4)),
        ({"stopAfter": 10}, LoopSettings(notice_after=3, stop_after=10)),
        ({"noticeAfter": 4}, LoopSettings(notice_after=4, stop_after=5)),
        ({}, LoopSettings()),
        (True, LoopSettings()),
        (False, LoopSettings(enabled=False)),
    ],
)
def test_the_loop_key_takes_counts_or_a_switch(tmp_path: Path, value: object, expected: LoopSettings) -> None:
    assert load_config_file(write(tmp_path / "c.json", {"loop": value})).loop == expected


def test_without_the_key_the_defaults_apply(tmp_path: Path) -> None:
    assert load_config_file(write(tmp_path / "c.json", {})).loop is None
    assert LoopSettings() == LoopSettings(enabled=True, notice_after=3, stop_after=5)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("off", r'loop must be an object like \{"noticeAfter": 3, "stopAfter": 5\}, or false to turn loop detection'),
        (5, r"loop must be an object like"),
        (
            {"noticeAfter": 3, "stopAftr": 5},
            r"loop: unknown key 'stopAftr'; the keys are 'noticeAfter' and 'stopAfter'",
        ),
        ({"noticeAfter": 0}, r"loop\.noticeAfter must be a whole number of repeats, at least 2, not 0 \(to turn loop"),
        ({"stopAfter": False}, r"loop\.stopAfter must be a whole number of repeats, at least 2, not false \(to turn"),
        ({"noticeAfter": 1}, r"loop\.noticeAfter must be a whole number of repeats, at least 2, not 1$"),
        ({"noticeAfter": 2.5}, r"loop\.noticeAfter must be a whole number of repeats, at least 2, not 2\.5"),
        ({"noticeAfter": "3"}, r'loop\.noticeAfter must be a whole number of repeats, at least 2, not "3"'),
        ({"noticeAfter": 4, "stopAfter": 4}, r"loop\.stopAfter \(4\) must be more than noticeAfter \(4\)"),
        ({"stopAfter": 3}, r"loop\.stopAfter \(3\) must be more than noticeAfter \(3, the default\)"),
        ({"noticeAfter": 6}, r"loop\.stopAfter \(5, the default\) must be more than noticeAfter \(6\)"),
    ],
)
def test_a_bad_loop_value_names_the_file_and_the_problem(tmp_path: Path, value: object, message: str) -> None:
    path = write(tmp_path / "c.json", {"loop": value})
    with pytest.raises(ConfigError, match=message) as info:
        load_config_file(path)
    assert str(path) in str(info.value)


def test_an_untrusted_project_may_make_loop_detection_stricter_but_never_turn_it_off_or_loosen_it(
    tmp_path: Path,
) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    project_config = project / ".loom" / "config.json"
    write(project_config, {"loop": False})
    off = load_config(home, project)
    assert off.loop is None  # the defaults, as if the project had said nothing
    assert any("ignoring its loop settings (off)" in note and "loom trust" in note for note in off.ignored)
    for looser in ({"noticeAfter": 10, "stopAfter": 1000}, {"stopAfter": 6}, {"noticeAfter": 4, "stopAfter": 5}):
        write(project_config, {"loop": looser})
        assert load_config(home, project).loop is None, looser
    write(home / "config.json", {"loop": {"noticeAfter": 2, "stopAfter": 3}})
    write(project_config, {"loop": {"noticeAfter": 3, "stopAfter": 5}})
    assert load_config(home, project).loop == LoopSettings(notice_after=2, stop_after=3)  # the user's stricter
    write(project_config, {"loop": {"noticeAfter": 2, "stopAfter": 3}})
    assert load_config(home, project).ignored == ()  # as strict as the user's: nothing to say
    write(home / "config.json", {})
    write(project_config, {"loop": {"noticeAfter": 2, "stopAfter": 4}})
    stricter = load_config(home, project)
    assert stricter.loop == LoopSettings(notice_after=2, stop_after=4) and stricter.ignored == ()
    write(project_config, {"loop": False})
    trust(home, project, read_project(project).digest)
    assert load_config(home, project).loop == LoopSettings(enabled=False)  # trusted: the project's choice


def test_a_user_who_turned_it_off_lets_an_untrusted_project_turn_it_on(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    write(home / "config.json", {"loop": False})
    write(project / ".loom" / "config.json", {"loop": {"stopAfter": 8}})
    config = load_config(home, project)
    assert config.loop == LoopSettings(stop_after=8) and config.ignored == ()


async def test_the_config_reaches_every_session_of_the_runtime(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    write(home / "config.json", {"loop": {"noticeAfter": 2, "stopAfter": 3}})
    project.mkdir()
    (project / "notes.txt").write_text("the same\n")
    read = {"tool_calls": [{"name": "fs__read", "arguments": {"path": "notes.txt"}}]}
    model = ScriptedModel.from_turns([read] * 6)
    config = load_config(home, project)
    async with embedded_runtime(home, config=config) as runtime, runtime.open_session(project, model) as session:
        result = await session.run("read notes.txt")
    assert (result.status, result.steps) == ("failed", 3) and result.reason.startswith("loop: fs__read(")


async def test_a_child_session_is_held_to_the_same_loop_settings(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    write(home / "config.json", {"loop": {"noticeAfter": 2, "stopAfter": 3}})
    project.mkdir()
    (project / "notes.txt").write_text("the same\n")
    read = {"tool_calls": [{"name": "fs__read", "arguments": {"path": "notes.txt"}}]}
    script = write(tmp_path / "child.json", {"turns": [read] * 6})
    config = load_config(home, project)
    async with (
        embedded_runtime(home, config=config) as runtime,
        SessionHost(runtime) as host,
        Client(build_face(host)) as client,
    ):
        sid = (await call(client, "create_session", cwd=str(project), model=f"scripted:{script}"))["session_id"]
        cid = (await call(client, "create_session", cwd="", parent_session_id=sid, model=f"scripted:{script}"))[
            "session_id"
        ]
        ran = await call(client, "send_message", session_id=cid, text="read notes.txt", wait_s=20)
        events = (await call(client, "read_events", session_id=cid, limit=1000))["events"]
    assert ran["status"] == "failed" and ran["reason"].startswith('loop: fs__read({"path":"notes.txt"}) repeated 3'), (
        ran
    )
    assert [(e["action"], e["repeats"]) for e in events if e["type"] == "loop_detected"] == [("notice", 2), ("stop", 3)]


async def test_an_untrusted_project_that_turns_loop_detection_off_still_has_its_loops_stopped(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    write(project / ".loom" / "config.json", {"loop": False})
    (project / "notes.txt").write_text("the same\n")
    read = {"tool_calls": [{"name": "fs__read", "arguments": {"path": "notes.txt"}}]}
    model = ScriptedModel.from_turns([read] * 8)
    config = load_config(home, project)
    async with embedded_runtime(home, config=config) as runtime, runtime.open_session(project, model) as session:
        result = await session.run("read notes.txt")
        events = await runtime.log.store.read_events(session.id)
    assert (result.status, result.steps) == ("failed", 5) and result.reason.startswith("loop: fs__read(")
    warnings = [e.text for e in events if isinstance(e, Notice)]
    assert any("ignoring its loop settings (off)" in w for w in warnings), warnings
