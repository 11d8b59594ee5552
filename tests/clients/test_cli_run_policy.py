"""``loom run`` is headless: the session's policy decides every call, and nothing waits for a person.

Each scenario is a real ``loom run`` process on a scripted model; they run at the same time to keep
the suite quick.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.events import ApprovalRequested, AssistantMessage, SessionCreated, ToolCallFinished
from tests.clients.cli_support import CliResult, run_loom, write_script

WRITE_THEN_SHELL: list[dict[str, Any]] = [
    {
        "text": "writing and running",
        "tool_calls": [
            {"id": "w", "name": "fs__write", "arguments": {"path": "written.txt", "content": "w"}},
            {"id": "s", "name": "shell__run", "arguments": {"command": "touch ran.txt"}},
        ],
    },
    {"text": "write said: {{result:w}} | shell said: {{result:s}}"},
]

ALLOW_TOUCH = '[[rules]]\naction = "allow"\ntool = "shell__run"\ncommand = "touch"\n'
ASK_WRITES = '[[rules]]\naction = "ask"\ntool = "fs__write"\n'


@dataclass(frozen=True)
class Scenario:
    flags: tuple[str, ...]
    policy: str | None


SCENARIOS = {
    "default": Scenario((), None),
    "ask-rule": Scenario((), ASK_WRITES),
    "allow-rule": Scenario((), ALLOW_TOUCH),
    "plan": Scenario(("--mode", "plan"), None),
    "ask": Scenario(("--mode", "ask"), None),
    "bypass": Scenario(("--mode", "bypass"), None),
}


@dataclass(frozen=True)
class Outcome:
    project: Path
    result: CliResult
    seconds: float

    def finished(self, tool: str) -> ToolCallFinished:
        (done,) = [e for e in self.result.events() if isinstance(e, ToolCallFinished) and e.tool == tool]
        return done


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    base = tmp_path_factory.mktemp("headless")

    def one(name: str) -> Outcome:
        scenario = SCENARIOS[name]
        project = base / name
        (project / ".loom").mkdir(parents=True)
        if scenario.policy is not None:
            (project / ".loom" / "policy.toml").write_text(scenario.policy, encoding="utf-8")
            if 'action = "allow"' in scenario.policy:  # a project's allow rules apply once a person trusts them
                assert run_loom("trust", cwd=project, home=base / "home").returncode == 0
        script = write_script(project / "script.json", WRITE_THEN_SHELL)
        started = time.monotonic()
        result = run_loom(
            "run", "--json", *scenario.flags, "--model", f"scripted:{script}", "go", cwd=project, home=base / "home"
        )
        return Outcome(project, result, time.monotonic() - started)

    with ThreadPoolExecutor(3) as pool:
        return dict(zip(SCENARIOS, pool.map(one, SCENARIOS), strict=True))


def test_every_headless_run_finishes_without_asking_anyone(outcomes: dict[str, Outcome]) -> None:
    for name, outcome in outcomes.items():
        assert outcome.result.returncode == 0, (name, outcome.result)
        assert outcome.seconds < 60, (name, outcome.seconds)
        assert not any(isinstance(e, ApprovalRequested) for e in outcome.result.events()), name


def test_default_mode_runs_edits_and_denies_the_shell_telling_the_model(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["default"]
    created = outcome.result.events()[0]
    assert isinstance(created, SessionCreated) and created.mode == "accept-edits" and created.headless
    assert (outcome.project / "written.txt").read_text() == "w"
    assert not (outcome.project / "ran.txt").exists()
    shell = outcome.finished("shell__run")
    assert shell.failure == "denied" and "headless" in shell.content and "policy.toml" in shell.content
    last = [e for e in outcome.result.events() if isinstance(e, AssistantMessage)][-1]
    assert "shell said: denied by policy" in last.message.text


def test_an_ask_rule_is_a_denial_in_a_headless_run(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["ask-rule"]
    write = outcome.finished("fs__write")
    assert write.failure == "denied" and "policy rule says to ask" in write.content, write
    assert not (outcome.project / "written.txt").exists()


def test_an_allow_rule_lets_a_plain_command_run(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["allow-rule"]
    assert outcome.finished("shell__run").failure is None
    assert (outcome.project / "ran.txt").exists() and (outcome.project / "written.txt").exists()


def test_plan_mode_denies_every_change(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["plan"]
    for tool in ("fs__write", "shell__run"):
        done = outcome.finished(tool)
        assert done.failure == "denied" and "plan mode is read-only" in done.content, done
    assert not (outcome.project / "written.txt").exists() and not (outcome.project / "ran.txt").exists()


def test_ask_mode_denies_edits_and_commands(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["ask"]
    assert outcome.finished("fs__write").failure == "denied"
    assert outcome.finished("shell__run").failure == "denied"
    assert not (outcome.project / "written.txt").exists()


def test_bypass_is_explicit_recorded_and_runs_everything(outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes["bypass"]
    created = outcome.result.events()[0]
    assert isinstance(created, SessionCreated) and created.mode == "bypass"
    assert "mode bypass" in outcome.result.stderr
    assert (outcome.project / "ran.txt").exists() and (outcome.project / "written.txt").exists()
