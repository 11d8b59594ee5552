"""The policy as a table: mode x annotations x rules x arguments -> verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import types as mt

from orchestrator.policy import MODES, Rule, decide

READ_ONLY = mt.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
FS_EDIT = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
SHELL = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
OPEN_WORLD = mt.ToolAnnotations(read_only_hint=False, open_world_hint=True)
MEMORY_SET = mt.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
NO_HINTS = mt.ToolAnnotations()  # present but silent: readOnlyHint defaults to false
NONE = None  # an external tool that declares no annotations at all

ALLOW_GIT_STATUS = Rule("allow", "shell__run", command="git status")
DENY_RM = Rule("deny", "shell__run", command="rm *")
ASK_PUSH = Rule("ask", "shell__run", command="git push")
ALLOW_SHELL = Rule("allow", "shell__run")
DENY_SECRETS = Rule("deny", "fs__*", path="secrets/**")
ALLOW_DOCS = Rule("allow", "fs__*", path="docs/**")
ASK_GITHUB = Rule("ask", "github__*")
ALLOW_GITHUB = Rule("allow", "github__*")
DENY_GITHUB_MERGE = Rule("deny", "github__merge*")
ALLOW_ALL = Rule("allow", "*")


@dataclass(frozen=True)
class Row:
    name: str
    mode: str
    tool: str
    annotations: mt.ToolAnnotations | None
    arguments: dict[str, Any]
    rules: list[Rule] = field(default_factory=list)
    expected: str = "allow"
    reason: str = ""
    """A fragment the reason must contain."""


ROWS = [
    # defaults from annotations, mode ask
    Row("ask: read-only runs", "ask", "fs__read", READ_ONLY, {"path": "a.txt"}, expected="allow"),
    Row("ask: fs write asks", "ask", "fs__write", FS_EDIT, {"path": "a.txt"}, expected="ask", reason="read-only"),
    Row("ask: shell asks", "ask", "shell__run", SHELL, {"command": "ls"}, expected="ask"),
    Row(
        "ask: no annotations is side-effecting",
        "ask",
        "github__get_issue",
        NONE,
        {},
        expected="ask",
        reason="no MCP annotations",
    ),
    Row("ask: silent annotations ask", "ask", "github__get_issue", NO_HINTS, {}, expected="ask"),
    Row("ask: external read-only runs", "ask", "github__get_issue", READ_ONLY, {}, expected="allow"),
    # accept-edits
    Row("edits: fs write in workspace runs", "accept-edits", "fs__write", FS_EDIT, {"path": "src/a.py"}),
    Row("edits: fs edit in workspace runs", "accept-edits", "fs__edit", FS_EDIT, {"path": "./src/../b.py"}),
    Row("edits: fs write outside asks", "accept-edits", "fs__write", FS_EDIT, {"path": "/etc/x"}, expected="ask"),
    Row("edits: .. escape asks", "accept-edits", "fs__write", FS_EDIT, {"path": "../outside.txt"}, expected="ask"),
    Row("edits: symlink escape asks", "accept-edits", "fs__write", FS_EDIT, {"path": "escape/x"}, expected="ask"),
    Row("edits: shell asks", "accept-edits", "shell__run", SHELL, {"command": "ls"}, expected="ask"),
    Row("edits: external side effect asks", "accept-edits", "github__create_issue", OPEN_WORLD, {}, expected="ask"),
    Row("edits: unannotated fs-like tool asks", "accept-edits", "fs__write", NONE, {"path": "a"}, expected="ask"),
    Row("edits: other server's write asks", "accept-edits", "files__write", FS_EDIT, {"path": "a"}, expected="ask"),
    Row("edits: read-only runs", "accept-edits", "fs__grep", READ_ONLY, {"path": "."}),
    Row("edits: saving a memory note runs", "accept-edits", "memory__set", MEMORY_SET, {"key": "k"}),
    Row("edits: deleting a note asks", "accept-edits", "memory__delete", FS_EDIT, {"key": "k"}, expected="ask"),
    Row("ask: saving a memory note asks", "ask", "memory__set", MEMORY_SET, {"key": "k"}, expected="ask"),
    Row("plan: saving a memory note denied", "plan", "memory__set", MEMORY_SET, {"key": "k"}, expected="deny"),
    # plan
    Row("plan: read-only runs", "plan", "fs__read", READ_ONLY, {"path": "a"}),
    Row("plan: write denied", "plan", "fs__write", FS_EDIT, {"path": "a"}, expected="deny", reason="plan mode"),
    Row("plan: shell denied", "plan", "shell__run", SHELL, {"command": "ls"}, expected="deny", reason="read-only"),
    Row("plan: unannotated denied", "plan", "github__x", NONE, {}, expected="deny"),
    Row(
        "plan: allow rule does not make a writer read-only",
        "plan",
        "shell__run",
        SHELL,
        {"command": "git status"},
        [ALLOW_GIT_STATUS],
        "deny",
    ),
    Row("plan: ask rule on a reader asks", "plan", "github__get", READ_ONLY, {}, [ASK_GITHUB], "ask"),
    # bypass
    Row("bypass: shell runs", "bypass", "shell__run", SHELL, {"command": "rm -rf build"}),
    Row("bypass: unannotated runs", "bypass", "github__merge", NONE, {}),
    Row("bypass: ask rule ignored", "bypass", "github__create", OPEN_WORLD, {}, [ASK_GITHUB]),
    Row(
        "bypass: deny rule wins",
        "bypass",
        "shell__run",
        SHELL,
        {"command": "rm -rf ~"},
        [DENY_RM],
        "deny",
        "rm *",
    ),
    Row("bypass: deny path wins", "bypass", "fs__write", FS_EDIT, {"path": "secrets/key"}, [DENY_SECRETS], "deny"),
    Row(
        "bypass: complex line vs deny rule asks",
        "bypass",
        "shell__run",
        SHELL,
        {"command": "bash -c 'rm -rf ~'"},
        [DENY_RM],
        "ask",
        "cannot be checked",
    ),
    Row("bypass: complex line, no deny rules, runs", "bypass", "shell__run", SHELL, {"command": "a | b"}),
    # allow rules
    Row("rule: allow git status", "ask", "shell__run", SHELL, {"command": "git status"}, [ALLOW_GIT_STATUS]),
    Row(
        "rule: allow git status not git status; rm",
        "ask",
        "shell__run",
        SHELL,
        {"command": "git status; rm x"},
        [ALLOW_GIT_STATUS],
        "ask",
    ),
    Row(
        "rule: allow git status not git push",
        "ask",
        "shell__run",
        SHELL,
        {"command": "git push"},
        [ALLOW_GIT_STATUS],
        "ask",
    ),
    Row(
        "rule: tool-wide allow still not complex",
        "ask",
        "shell__run",
        SHELL,
        {"command": "ls $(x)"},
        [ALLOW_SHELL],
        "ask",
    ),
    Row("rule: tool-wide allow plain", "ask", "shell__run", SHELL, {"command": "make test"}, [ALLOW_SHELL]),
    Row("rule: allow docs path", "ask", "fs__write", FS_EDIT, {"path": "docs/a.md"}, [ALLOW_DOCS]),
    Row("rule: allow docs not src", "ask", "fs__write", FS_EDIT, {"path": "src/a.py"}, [ALLOW_DOCS], "ask"),
    Row(
        "rule: allow docs not .. out of docs",
        "ask",
        "fs__write",
        FS_EDIT,
        {"path": "docs/../src/a.py"},
        [ALLOW_DOCS],
        "ask",
    ),
    Row("rule: path rule needs a path", "ask", "fs__write", FS_EDIT, {}, [ALLOW_DOCS], "ask"),
    Row("rule: allow unannotated external", "ask", "github__create", NONE, {}, [ALLOW_GITHUB]),
    Row("rule: glob must match tool", "ask", "gitlab__create", NONE, {}, [ALLOW_GITHUB], "ask"),
    # precedence: deny > ask > allow
    Row("prec: deny beats allow", "ask", "github__merge_pr", NONE, {}, [ALLOW_GITHUB, DENY_GITHUB_MERGE], "deny"),
    Row(
        "prec: deny beats allow-all", "accept-edits", "github__merge", NONE, {}, [ALLOW_ALL, DENY_GITHUB_MERGE], "deny"
    ),
    Row("prec: ask beats allow", "ask", "github__create", NONE, {}, [ALLOW_GITHUB, ASK_GITHUB], "ask"),
    Row(
        "prec: ask beats tool-wide allow",
        "ask",
        "shell__run",
        SHELL,
        {"command": "git push origin"},
        [ALLOW_SHELL, ASK_PUSH],
        "ask",
        "git push",
    ),
    Row(
        "prec: deny sees any command of a list",
        "ask",
        "shell__run",
        SHELL,
        {"command": "git status && rm -rf ~"},
        [ALLOW_SHELL, DENY_RM],
        "deny",
    ),
    Row("prec: deny beats read-only", "ask", "fs__read", READ_ONLY, {"path": "secrets/k"}, [DENY_SECRETS], "deny"),
    Row("prec: ask rule on read-only asks", "ask", "github__get", READ_ONLY, {}, [ASK_GITHUB], "ask"),
    Row(
        "prec: deny beats accept-edits",
        "accept-edits",
        "fs__write",
        FS_EDIT,
        {"path": "secrets/../secrets/k"},
        [DENY_SECRETS],
        "deny",
    ),
    Row(
        "prec: deny path through symlink",
        "ask",
        "fs__read",
        READ_ONLY,
        {"path": "hidden/k"},
        [DENY_SECRETS],
        "deny",
    ),
    Row(
        "prec: deny any of several paths",
        "bypass",
        "fs__move",
        FS_EDIT,
        {"source": "docs/a", "destination": "secrets/a"},
        [DENY_SECRETS, ALLOW_DOCS],
        "deny",
    ),
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    for sub in ("src", "docs", "secrets"):
        (work / sub).mkdir(parents=True)
    (work / "escape").symlink_to(tmp_path)  # a way out of the workspace
    (work / "hidden").symlink_to(work / "secrets")  # another way into secrets
    return work


def test_table_is_large_enough() -> None:
    assert len(ROWS) >= 30
    assert {row.mode for row in ROWS} == set(MODES)


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_policy_table(row: Row, workspace: Path) -> None:
    decision = decide(row.mode, row.tool, row.annotations, row.arguments, row.rules, str(workspace))
    assert decision.verdict == row.expected, decision
    assert row.reason in decision.reason
    if row.expected != "allow":
        assert decision.reason  # the model or a person is always told why


def test_unknown_mode_is_an_error(workspace: Path) -> None:
    with pytest.raises(ValueError, match="unknown policy mode 'yolo'"):
        decide("yolo", "fs__read", READ_ONLY, {}, [], str(workspace))


def test_nul_in_path_does_not_crash(workspace: Path) -> None:
    decision = decide("accept-edits", "fs__write", FS_EDIT, {"path": "a\x00b"}, [ALLOW_DOCS], str(workspace))
    assert decision.verdict == "ask"
