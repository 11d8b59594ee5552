"""A path the policy cannot resolve is asked about (every mode but bypass), never a crash and never allowed.

Three real ways ``os.path.realpath`` fails on Python 3.11: a NUL byte (``ValueError``), a chain of symlinks
deeper than the recursion limit (``RecursionError``, a ``RuntimeError``), and a relative path when the process's
working directory was deleted (``FileNotFoundError`` from ``os.getcwd``). A too-long name (``ENAMETOOLONG``) does
not make it raise in non-strict mode, so it is not one of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import types as mt

from orchestrator.policy import MODES, Rule, decide
from orchestrator.policy.paths import argument_paths, path_arguments
from orchestrator.policy.protected import Protected

FS_EDIT = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
READ_ONLY = mt.ToolAnnotations(read_only_hint=True)
ALLOW_ALL = [Rule("allow", "*"), Rule("allow", "fs__*", path="**")]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The head of a chain of 1,100 symlinks (realpath recurses once per link), as an absolute path."""
    links = tmp_path_factory.mktemp("chain")
    for i in range(1100):
        (links / f"l{i}").symlink_to(f"l{i + 1}")
    return str(links / "l0")


@pytest.fixture
def deleted_cwd(tmp_path: Path) -> Iterator[str]:
    """The process's working directory, deleted: a relative session cwd then cannot be resolved."""
    gone = tmp_path / "gone"
    gone.mkdir()
    before = os.getcwd()
    os.chdir(gone)
    gone.rmdir()
    try:
        yield "."
    finally:
        os.chdir(before)


def test_realpath_really_fails_on_these(chain: str, work: Path) -> None:
    with pytest.raises(ValueError):
        os.path.realpath("a\x00b")
    with pytest.raises(RecursionError):
        os.path.realpath(chain)
    assert os.path.realpath("/" + "x" * 5000)  # ENAMETOOLONG: no error in non-strict mode


@pytest.mark.parametrize("kind", ["nul", "chain"])
@pytest.mark.parametrize("mode", ["ask", "accept-edits", "plan"])
@pytest.mark.parametrize("tool,annotations", [("fs__write", FS_EDIT), ("fs__read", READ_ONLY)])
def test_an_unresolvable_path_is_asked_about(
    kind: str, mode: str, tool: str, annotations: mt.ToolAnnotations, work: Path, chain: str
) -> None:
    path = {"nul": "a\x00b", "chain": chain}[kind]
    decision = decide(mode, tool, annotations, {"path": path}, ALLOW_ALL, str(work))
    if mode == "plan" and tool == "fs__write":
        assert decision.verdict == "deny"  # plan mode still denies what is not read-only
        return
    assert decision.verdict == "ask", decision
    assert "cannot be resolved" in decision.reason
    # Possibly Loom's own configuration when it could change something; "approve for the session" must not cover it.
    assert decision.protected is (tool == "fs__write")


def test_an_unresolvable_path_in_accept_edits_is_not_a_workspace_edit(work: Path, chain: str) -> None:
    decision = decide("accept-edits", "fs__write", FS_EDIT, {"path": chain}, [], str(work))
    assert decision.verdict == "ask" and "too many symbolic links" in decision.reason


def test_a_deleted_working_directory_is_asked_about(deleted_cwd: str) -> None:
    for mode in ("ask", "accept-edits"):
        decision = decide(mode, "fs__write", FS_EDIT, {"path": "a.txt"}, ALLOW_ALL, deleted_cwd)
        assert decision.verdict == "ask" and "cannot be resolved" in decision.reason, decision
    shell = decide("ask", "shell__run", FS_EDIT, {"command": "ls"}, [Rule("allow", "shell__run")], deleted_cwd)
    assert shell.verdict == "allow"  # no path argument: nothing to resolve


def test_a_deleted_working_directory_with_protection(deleted_cwd: str, tmp_path: Path) -> None:
    protected = Protected(tmp_path / "home", (tmp_path,))
    decision = decide("accept-edits", "fs__edit", FS_EDIT, {"path": "AGENTS.md"}, [], deleted_cwd, protected)
    assert decision.verdict == "ask" and decision.protected


def test_bypass_runs_it_unless_a_deny_path_rule_cannot_be_checked(work: Path, chain: str) -> None:
    assert decide("bypass", "fs__write", FS_EDIT, {"path": chain}, [], str(work)).verdict == "allow"
    deny = [Rule("deny", "fs__*", path="secrets/**")]
    decision = decide("bypass", "fs__write", FS_EDIT, {"path": chain}, deny, str(work))
    assert decision.verdict == "ask" and "cannot be checked against the deny rule" in decision.reason


def test_every_mode_answers(work: Path, chain: str) -> None:
    for mode in MODES:
        for path in ("a\x00b", chain):
            decide(mode, "fs__write", FS_EDIT, {"path": path}, ALLOW_ALL, str(work))  # no exception


def test_argument_paths_keeps_the_reason(work: Path, chain: str) -> None:
    paths = argument_paths({"path": "ok.txt", "files": ["a\x00b", chain], "other": "x"}, str(work))
    assert paths.resolved == (str(work.resolve() / "ok.txt"),)
    assert [raw for raw, _ in paths.unresolved] == ["a\x00b", chain]
    assert "null byte" in paths.unresolved[0][1] and paths.unresolved[1][1] == "too many symbolic links"
    # The old list form still has one entry per path.
    assert len(path_arguments({"path": "ok.txt", "file": chain}, str(work))) == 2
