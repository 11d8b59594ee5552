"""Parsing one agent definition: Claude Code's format read unchanged, and hostile input refused clearly."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orchestrator.agents import AgentDefinition, AgentError, parse_definition
from orchestrator.agents.claude import loom_tool, model_spec
from orchestrator.policy import Rule

WHERE = Path("/p/.loom/agents/reviewer.md")

# As Claude Code's documentation shows one, with keys Loom does not use.
CLAUDE_REVIEWER = """---
name: code-reviewer
description: Expert code review specialist. Proactively reviews code for quality, security, and maintainability.
tools: Read, Grep, Glob, Bash
model: sonnet
color: cyan
skills: [testing]
---

You are a senior code reviewer ensuring high standards of code quality and security.

When invoked:
1. Run git diff to see recent changes
"""


def parse(front: str, body: str = "Do the work.") -> AgentDefinition:
    agent = parse_definition(f"---\n{front}---\n{body}\n", WHERE, "project")
    assert agent is not None
    return agent


def test_a_claude_code_definition_reads_unchanged() -> None:
    agent = parse_definition(CLAUDE_REVIEWER, WHERE, "project")
    assert agent is not None
    assert agent.name == "code-reviewer"
    assert agent.description.startswith("Expert code review specialist.")
    assert agent.tools == ("fs__read", "fs__grep", "fs__glob", "shell__run")
    assert agent.model == "sonnet"
    assert agent.mode is None and agent.max_steps is None and not agent.deny_asks
    assert agent.prompt.startswith("You are a senior code reviewer") and agent.prompt.endswith("recent changes")
    assert agent.notes == ()  # color and skills are ignored, as Claude Code ignores keys it does not use


def test_tools_as_a_list_with_mcp_and_loom_names() -> None:
    agent = parse(
        "name: triage\ndescription: Files issues.\n"
        "tools:\n  - Read\n  - mcp__github__create_issue\n  - mcp__linear\n  - fs__*\n  - WebFetch\n  - Read\n"
    )
    assert agent is not None
    assert agent.tools == ("fs__read", "github__create_issue", "linear__*", "fs__*")
    notes = agent.notes
    assert len(notes) == 1 and "'WebFetch' has no equivalent among Loom's tools" in notes[0]
    assert str(WHERE) in notes[0]


def test_no_tools_key_means_the_parents_tools_and_an_empty_list_means_none() -> None:
    everything = parse("name: a\ndescription: x\n")
    nothing = parse("name: a\ndescription: x\ntools: []\n")
    assert everything.tools is None
    assert nothing.tools == ()


def test_an_argument_pattern_in_tools_is_left_out_not_widened() -> None:
    agent = parse("name: a\ndescription: x\ntools: Read, Bash(git log:*)\n")
    assert agent.tools == ("fs__read",)
    assert "Bash(git log:*)" in agent.notes[0] and "left out" in agent.notes[0]


def test_disallowed_tools_become_deny_rules_never_narrower_than_written() -> None:
    agent = parse("name: a\ndescription: x\ndisallowedTools: Write, Bash(git push:*), Read(./secrets/**), WebFetch\n")
    source = f"{WHERE}: disallowedTools"
    assert agent.denied == (
        Rule("deny", "fs__write", source=source),
        Rule("deny", "shell__run", command="git push *", source=source),
        # A path pattern Loom cannot keep: the whole tool is denied, which is wider than asked, never narrower.
        Rule("deny", "fs__read", source=source),
    )
    notes = " ".join(agent.notes)
    assert "denies all of fs__read" in notes and "'WebFetch'" in notes


@pytest.mark.parametrize(
    ("front", "mode", "deny_asks"),
    [
        ("permissionMode: default\n", "ask", False),
        ("permissionMode: acceptEdits\n", "accept-edits", False),
        ("permissionMode: plan\n", "plan", False),
        ("permissionMode: bypassPermissions\n", "bypass", False),
        ("permissionMode: dontAsk\n", "ask", True),
        ("mode: accept-edits\n", "accept-edits", False),
        ("mode: plan\npermissionMode: plan\n", "plan", False),
    ],
)
def test_modes_in_loom_and_claude_code_spelling(front: str, mode: str, deny_asks: bool) -> None:
    agent = parse("name: a\ndescription: x\n" + front)
    assert (agent.mode, agent.deny_asks) == (mode, deny_asks)


def test_request_carries_the_definition_into_narrowing() -> None:
    agent = parse("name: scout\ndescription: x\ntools: Read\npermissionMode: dontAsk\ndisallowedTools: Bash\n")
    request = agent.request(allow=("fs__read",))
    assert request.label == "agent 'scout'"
    assert request.tools == ("fs__read",) and request.allow == ("fs__read",)
    assert request.mode == "ask" and request.headless
    assert [rule.tool for rule in request.rules] == ["shell__run"]


def test_max_steps_and_max_turns() -> None:
    assert parse("name: a\ndescription: x\nmaxTurns: 20\n").max_steps == 20
    assert parse("name: a\ndescription: x\nmaxSteps: 5\n").max_steps == 5


def test_disabled_definitions_are_skipped() -> None:
    assert parse_definition("---\nname: a\ndescription: x\ndisabled: true\n---\nx\n", WHERE, "user") is None


@pytest.mark.parametrize(
    ("front", "body", "message"),
    [
        ("description: x\n", "", "no name; add 'name: <agent-name>'"),
        ("name: Code Reviewer\ndescription: x\n", "", "name 'Code Reviewer' is not valid; use lowercase"),
        ("name: ../../etc\ndescription: x\n", "", "is not valid"),
        ("name: a\n", "", "no description"),
        ("name: a\ndescription: [1, 2]\n", "", "description must be text"),
        ("name: a\ndescription: " + "x" * 1025 + "\n", "", "1,025 characters; shorten it to at most 1,024"),
        ('name: a\ndescription: "ok\\u202Eevil"\n', "", "control character U+202E"),
        ('name: a\ndescription: "bell\\a"\n', "", "control character U+0007"),
        ("name: a\ndescription: x\n", "escape \x1b[2J here", "instructions hold the control character U+001B"),
        ("name: a\ndescription: x\n", "y" * 64_001, "64,001 characters"),
        ("name: a\ndescription: x\nmodel: gpt-5\n", "", "model 'gpt-5' is not one Loom can use"),
        ("name: a\ndescription: x\nmode: yolo\n", "", "mode 'yolo' is not a mode; use one of ask"),
        ("name: a\ndescription: x\nmode: plan\npermissionMode: bypassPermissions\n", "", "disagree; keep one"),
        ("name: a\ndescription: x\nmaxTurns: 0\n", "", "maxTurns must be a whole number of steps from 1 to 1000"),
        ("name: a\ndescription: x\nmaxTurns: true\n", "", "maxTurns must be"),
        ("name: a\ndescription: x\ntools: {Read: true}\n", "", "tools must be a comma-separated string or a list"),
        ("name: a\ndescription: x\ntools: [" + ", ".join(["Read"] * 129) + "]\n", "", "129 entries; at most 128"),
        ("name: a\ndescription: x: y\n", "", "not valid YAML at line 3"),
        ("- a\n- b\n", "", "must be 'key: value' lines"),
    ],
)
def test_bad_definitions_name_the_file_and_the_fix(front: str, body: str, message: str) -> None:
    with pytest.raises(AgentError) as caught:
        parse(front, body)
    assert str(caught.value).startswith(f"{WHERE}: ")
    assert message in str(caught.value)


def test_no_front_matter() -> None:
    with pytest.raises(AgentError, match="no front matter; start the file with a line '---'"):
        parse_definition("# Reviewer\nYou review.\n", WHERE, "user")


def test_claude_tool_names() -> None:
    assert loom_tool("Edit") == ("fs__edit", "")
    assert loom_tool("MultiEdit") == ("fs__edit", "")
    assert loom_tool("LS") == ("fs__list", "")
    assert loom_tool("mcp__github__*") == ("github__*", "")
    assert loom_tool("fs__read") == ("fs__read", "")
    assert loom_tool("Agent(reviewer)")[0] is None  # which agents it may spawn cannot be kept: left out
    assert loom_tool("fs read")[0] is None


@pytest.mark.parametrize(
    ("model", "parent", "spec", "inherits"),
    [
        ("inherit", "scripted:demo", "scripted:demo", False),
        ("sonnet", "anthropic:claude-opus-4-5", "anthropic:claude-sonnet-4-5", False),
        ("opus", "anthropic:claude-opus-4-5", "anthropic:claude-opus-4-5", False),
        ("opus", "anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5", True),
        ("haiku", "openai:deepseek-chat", "openai:deepseek-chat", True),
        ("claude-opus-4-5-20251101", "scripted:demo", "anthropic:claude-opus-4-5-20251101", False),
        ("openai:deepseek-chat", "anthropic:claude-sonnet-4-5", "openai:deepseek-chat", False),
    ],
)
def test_model_aliases_map_only_where_well_defined(model: str, parent: str, spec: str, inherits: bool) -> None:
    chosen, note = model_spec(model, parent)
    assert chosen == spec
    assert bool(note) == inherits
    if inherits:
        assert "uses its parent's model" in note


def test_a_yaml_alias_bomb_is_refused_quickly() -> None:
    """Nine levels of aliases make a structure of 10**9 strings that safe_load builds by reference; no message
    may try to print it."""
    levels = ['a0: &a0 "lol"'] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    bomb = "\n".join(levels) + "\n"
    started = time.monotonic()
    for front in (f"{bomb}name: *a9\ndescription: x\n", f"{bomb}name: a\ndescription: x\nmode: *a9\nmaxTurns: *a9\n"):
        with pytest.raises(AgentError, match="a list"):
            parse(front)
    with pytest.raises(AgentError, match="mode: a list, permissionMode: a list disagree"):
        parse(f"{bomb}name: a\ndescription: x\nmode: *a9\npermissionMode: *a8\n")
    with pytest.raises(AgentError, match="model a list is not one Loom can use"):
        parse(f"{bomb}name: a\ndescription: x\nmodel: *a9\n")
    with pytest.raises(AgentError, match="tools must be a comma-separated string or a list of tool names"):
        parse(f"{bomb}name: a\ndescription: x\ntools: *a9\n")
    assert time.monotonic() - started < 5
