"""A person's rules for a server hold for reading it through mcp_access, however the model spells the call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import types as mt

from orchestrator.policy import MODES, Rule, decide
from orchestrator.policy.narrowing import Bounds, ChildRequest
from orchestrator.policy.server_reads import listing_gate

# mcp_access's own annotations (servers/mcp_access/_server.py).
READ_ONLY = mt.ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=True)
NAMING = [
    ("mcp_access__read_resource", {"uri": "docs://guide"}),
    ("mcp_access__get_prompt", {"name": "review"}),
    ("mcp_access__list_resources", {}),
    ("mcp_access__list_prompts", {}),
]
BUILT_INS = ["fs", "shell", "memory", "loom", "checkpoints", "subagents", "mcp_access"]


def verdict(tool: str, arguments: dict[str, Any], rules: list[Rule], tmp_path: Path, mode: str = "ask") -> str:
    return decide(mode, tool, READ_ONLY, arguments, rules, str(tmp_path)).verdict


@pytest.mark.parametrize(("tool", "extra"), NAMING)
@pytest.mark.parametrize("mode", MODES)
def test_a_server_wide_deny_denies_every_read_of_that_server_in_every_mode(
    tool: str, extra: dict[str, Any], mode: str, tmp_path: Path
) -> None:
    for glob in ["docs__*", "doc*", "*__*", "docs_?*"]:
        decision = decide(mode, tool, READ_ONLY, {"server": "docs", **extra}, [Rule("deny", glob)], str(tmp_path))
        assert decision.verdict == "deny", glob
        assert f"reading server 'docs' through {tool}" in decision.reason or glob == "*__*"
        assert f"deny {glob}" in decision.reason
    # Another server is not touched by docs' rule.
    assert verdict(tool, {"server": "github", **extra}, [Rule("deny", "docs__*")], tmp_path, mode) == "allow"


@pytest.mark.parametrize(("tool", "extra"), NAMING)
def test_a_server_wide_ask_asks_except_in_bypass_as_for_its_tools(
    tool: str, extra: dict[str, Any], tmp_path: Path
) -> None:
    rules = [Rule("ask", "docs__*")]
    for mode in ["ask", "accept-edits", "plan"]:
        decision = decide(mode, tool, READ_ONLY, {"server": "docs", **extra}, rules, str(tmp_path))
        assert decision.verdict == "ask"
        assert "policy rule says to ask: ask docs__*" in decision.reason
    # bypass does not read ask rules for docs' own tools either.
    assert verdict(tool, {"server": "docs", **extra}, rules, tmp_path, "bypass") == "allow"
    assert verdict("docs__search", {}, rules, tmp_path, "bypass") == "allow"


def test_without_rules_reading_is_allowed_and_an_allow_rule_never_loosens_mcp_access_s_own(tmp_path: Path) -> None:
    assert verdict("mcp_access__read_resource", {"server": "docs", "uri": "docs://a"}, [], tmp_path) == "allow"
    rules = [Rule("allow", "docs__*"), Rule("deny", "mcp_access__read_resource")]
    assert verdict("mcp_access__read_resource", {"server": "docs", "uri": "docs://a"}, rules, tmp_path) == "deny"
    rules = [Rule("allow", "docs__*"), Rule("ask", "mcp_access__*")]
    assert verdict("mcp_access__get_prompt", {"server": "docs", "name": "x"}, rules, tmp_path) == "ask"


@pytest.mark.parametrize(
    "rule",
    [
        Rule("deny", "docs__delete_page"),  # one tool: about what it does, not about docs' content
        Rule("deny", "docs__create_*"),  # a family of tools, likewise
        Rule("deny", "docs__*", command="rm *"),  # a read runs no command
        Rule("ask", "docs__search"),
    ],
)
def test_a_rule_on_some_of_a_server_s_tools_does_not_block_reading_it(rule: Rule, tmp_path: Path) -> None:
    for tool, extra in NAMING:
        assert verdict(tool, {"server": "docs", **extra}, [rule], tmp_path) == "allow"


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("docs", "deny"),
        ("my.docs", "allow"),  # tools of "my.docs" are my_docs__*: not docs' rule
        ("DOCS", "allow"),  # rules are case-sensitive, as for tools; mcp_access has no server 'DOCS'
        (" docs", "allow"),  # likewise: mcp_access resolves names exactly and refuses this one
    ],
)
def test_the_server_is_ruled_by_the_name_its_tools_are_spelled_with(server: str, expected: str, tmp_path: Path) -> None:
    assert verdict(
        "mcp_access__read_resource", {"server": server, "uri": "a:b"}, [Rule("deny", "docs__*")], tmp_path
    ) == (expected)


def test_a_raw_name_and_its_sanitised_spelling_are_both_ruled_by_the_sanitised_rule(tmp_path: Path) -> None:
    rules = [Rule("deny", "my_docs__*")]
    for server in ["my.docs", "my_docs", "my docs", "my/docs"]:
        assert verdict("mcp_access__read_resource", {"server": server, "uri": "a:b"}, rules, tmp_path) == "deny"


@pytest.mark.parametrize("server", BUILT_INS)
def test_loom_s_own_servers_are_ruled_like_any_other(server: str, tmp_path: Path) -> None:
    arguments = {"server": server, "uri": "fs://README.md"}
    assert verdict("mcp_access__read_resource", arguments, [Rule("deny", f"{server}__*")], tmp_path) == "deny"
    assert verdict("mcp_access__read_resource", arguments, [Rule("ask", f"{server}__*")], tmp_path) == "ask"
    assert verdict("mcp_access__read_resource", arguments, [], tmp_path) == "allow"


def test_a_path_deny_on_fs_holds_for_the_files_its_resource_uris_name(tmp_path: Path) -> None:
    rules = [Rule("deny", "fs__*", path="secrets/**")]
    for uri in [
        "fs://secrets/key",
        "fs://./secrets/../secrets/key",
        "fs://secrets%2Fkey",
        f"file://{tmp_path}/secrets/k",
    ]:
        assert verdict("mcp_access__read_resource", {"server": "fs", "uri": uri}, rules, tmp_path) == "deny", uri
    assert verdict("mcp_access__read_resource", {"server": "fs", "uri": "fs://README.md"}, rules, tmp_path) == "allow"
    # A prompt names no file: a path rule does not decide it.
    assert verdict("mcp_access__get_prompt", {"server": "fs", "name": "x"}, rules, tmp_path) == "allow"


@pytest.mark.parametrize("server", [["docs"], 7, None, {"name": "docs"}])
def test_a_server_that_is_not_a_name_is_denied(server: Any, tmp_path: Path) -> None:
    decision = decide(
        "ask", "mcp_access__read_resource", READ_ONLY, {"server": server, "uri": "a:b"}, [], str(tmp_path)
    )
    assert decision.verdict == "deny"
    assert "'server' must be a server's name" in decision.reason


def test_a_child_s_reads_obey_its_parent_s_server_rules(tmp_path: Path) -> None:
    parent = Bounds("the session", "ask", (Rule("deny", "docs__*"),), str(tmp_path))
    child = parent.narrow(ChildRequest("child 'reader'", mode="plan"))
    decision = child.decide("mcp_access__read_resource", READ_ONLY, {"server": "docs", "uri": "docs://a"})
    assert decision.verdict == "deny"
    assert "deny docs__*" in decision.reason
    # A child's own server rule narrows too.
    child = Bounds("the session", "ask", (), str(tmp_path)).narrow(
        ChildRequest("child 'reader'", rules=(Rule("ask", "docs__*"),))
    )
    assert child.decide("mcp_access__get_prompt", READ_ONLY, {"server": "docs", "name": "x"}).verdict == "ask"


def test_the_listing_gate_withholds_what_reading_would_not_simply_allow_at_any_level(tmp_path: Path) -> None:
    gate = listing_gate(
        [[Rule("ask", "wiki__*")], [Rule("deny", "docs__*"), Rule("deny", "github__delete_*")]], str(tmp_path)
    )
    verdict_of, reason = gate("docs")
    assert (verdict_of, "deny docs__*" in reason) == ("deny", True)
    assert gate("wiki")[0] == "ask"
    assert gate("github") == ("allow", "")
    assert gate("my.docs") == ("allow", "")
