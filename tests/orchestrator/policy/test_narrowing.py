"""A child is never freer than its parent: one test per way a child could try to widen what it may do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import types as mt

from orchestrator.policy import MODES, Protected, Rule, decide
from orchestrator.policy.narrowing import STRICTNESS, Bounds, ChildRequest, NarrowingError, stricter, visible_tools

READ_ONLY = mt.ToolAnnotations(read_only_hint=True, open_world_hint=False)
FS_EDIT = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
SHELL = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
SERVERS = frozenset({"fs", "shell", "memory", "loom"})
TOOLS = ["fs__read", "fs__write", "fs__edit", "fs__grep", "shell__run", "memory__set", "loom__skill"]


def root(tmp_path: Path, mode: Any = "ask", rules: tuple[Rule, ...] = (), **kwargs: Any) -> Bounds:
    protected = Protected.for_session(tmp_path / "home", tmp_path, tmp_path)
    kwargs.setdefault("servers", SERVERS)
    return Bounds("the session", mode, rules, str(tmp_path), protected, **kwargs)


# --- modes -------------------------------------------------------------------------------------------------------


def test_the_mode_order_is_total_and_matches_the_engine(tmp_path: Path) -> None:
    """For every pair of modes, the stricter one never gives a freer verdict on a table of calls."""
    rank = {"allow": 0, "ask": 1, "deny": 2}
    calls = [
        ("fs__read", READ_ONLY, {"path": "a.txt"}),
        ("fs__write", FS_EDIT, {"path": "a.txt"}),
        ("fs__write", FS_EDIT, {"path": ".loom/policy.toml"}),
        ("shell__run", SHELL, {"command": "ls"}),
        ("github__merge", None, {}),
    ]
    protected = Protected.for_session(tmp_path / "home", tmp_path, tmp_path)
    assert sorted(MODES, key=STRICTNESS.__getitem__) == ["plan", "ask", "accept-edits", "bypass"]
    for strict in MODES:
        for free in MODES:
            if STRICTNESS[strict] > STRICTNESS[free]:
                continue
            for tool, hints, arguments in calls:
                a = decide(strict, tool, hints, arguments, [], str(tmp_path), protected).verdict
                b = decide(free, tool, hints, arguments, [], str(tmp_path), protected).verdict
                assert rank[a] >= rank[b], (strict, free, tool, arguments)
    assert stricter("bypass", "plan") == "plan"


def test_a_child_may_not_ask_for_a_freer_mode(tmp_path: Path) -> None:
    parent = root(tmp_path, "ask")
    with pytest.raises(NarrowingError, match=r"mode 'bypass', which is freer than the session's 'ask'.*'plan', 'ask'"):
        parent.narrow(ChildRequest("child 'fixer'", mode="bypass"))
    with pytest.raises(NarrowingError, match="accept-edits"):
        parent.narrow(ChildRequest("child 'fixer'", mode="accept-edits"))
    assert parent.narrow(ChildRequest("child 'planner'", mode="plan")).mode == "plan"
    assert parent.narrow(ChildRequest("child 'same'")).mode == "ask"


def test_a_freer_mode_on_a_hand_built_child_still_obeys_the_parent(tmp_path: Path) -> None:
    """Enforcement does not depend on validation: a child level in bypass under an ask parent still asks."""
    parent = root(tmp_path, "ask")
    child = Bounds("child 'rogue'", "bypass", cwd=str(tmp_path), parent=parent)
    decision = child.decide("fs__write", FS_EDIT, {"path": "a.txt"})
    assert decision.verdict == "ask"
    assert "decided by the policy of the session" in decision.reason
    # The child level alone would have allowed it: the chain is what refuses.
    assert Bounds("alone", "bypass", cwd=str(tmp_path)).decide("fs__write", FS_EDIT, {"path": "a.txt"}).verdict == (
        "allow"
    )


def test_a_plan_child_cannot_write_under_a_bypass_parent_which_still_obeys_deny_rules(tmp_path: Path) -> None:
    parent = root(tmp_path, "bypass", rules=(Rule("deny", "shell__run", command="rm *", source="policy.toml"),))
    planner = parent.narrow(ChildRequest("child 'planner'", mode="plan"))
    assert planner.decide("fs__write", FS_EDIT, {"path": "a.txt"}).verdict == "deny"
    assert planner.decide("fs__read", READ_ONLY, {"path": "a.txt"}).verdict == "allow"
    same = parent.narrow(ChildRequest("child 'free'", mode="bypass"))
    assert same.decide("shell__run", SHELL, {"command": "ls"}).verdict == "allow"
    assert same.decide("shell__run", SHELL, {"command": "rm -rf build"}).verdict == "deny"


# --- rules -------------------------------------------------------------------------------------------------------


def test_a_child_allow_rule_cannot_override_a_parent_deny(tmp_path: Path) -> None:
    parent = root(tmp_path, "ask", rules=(Rule("deny", "shell__run", command="git push *", source="policy.toml"),))
    child = parent.narrow(ChildRequest("child 'pusher'", rules=(Rule("allow", "shell__run", source="agent"),)))
    decision = child.decide("shell__run", SHELL, {"command": "git push origin main"})
    assert decision.verdict == "deny"
    assert 'denied by policy rule: deny shell__run "git push *"' in decision.reason.replace("'", '"')


def test_a_child_allow_rule_cannot_override_a_parent_that_asks(tmp_path: Path) -> None:
    parent = root(tmp_path, "ask", rules=(Rule("ask", "github__*", source="policy.toml"),), servers=None)
    child = parent.narrow(ChildRequest("child 'gh'", rules=(Rule("allow", "*", source="agent"),)))
    asked = child.decide("github__create_issue", None, {"title": "x"})
    assert asked.verdict == "ask"
    assert "policy rule says to ask" in asked.reason and "the session" in asked.reason
    # Without any rule of the parent's, the parent's mode default asks: the child's allow rule still does not win.
    default = child.decide("shell__run", SHELL, {"command": "make"})
    assert default.verdict == "ask"
    assert "not marked read-only" in default.reason


def test_a_child_inherits_the_parents_allow_rules(tmp_path: Path) -> None:
    """Claude Code's subagents do not (anthropics/claude-code#37730); here what the parent may do unasked, so may
    the child."""
    parent = root(tmp_path, "ask", rules=(Rule("allow", "shell__run", command="make test", source="policy.toml"),))
    child = parent.narrow(ChildRequest("child 'tester'"))
    assert child.decide("shell__run", SHELL, {"command": "make test"}).verdict == "allow"


def test_a_child_deny_rule_narrows(tmp_path: Path) -> None:
    parent = root(tmp_path, "bypass")
    child = parent.narrow(ChildRequest("child 'careful'", rules=(Rule("deny", "fs__write", source="agent"),)))
    decision = child.decide("fs__write", FS_EDIT, {"path": "a.txt"})
    assert decision.verdict == "deny"
    assert "decided by" not in decision.reason  # the child's own level decided; the reason is the engine's
    assert parent.decide("fs__write", FS_EDIT, {"path": "a.txt"}).verdict == "allow"


# --- allow-lists -------------------------------------------------------------------------------------------------


def test_an_allow_list_cannot_name_a_tool_the_parent_cannot_use(tmp_path: Path) -> None:
    parent = root(tmp_path, "ask").narrow(ChildRequest("child 'reader'", tools=("fs__read", "fs__grep")))
    with pytest.raises(NarrowingError, match=r"'shell__run', which child 'reader' may not use.*allow-list"):
        parent.narrow(ChildRequest("grandchild 'runner'", allow=("shell__run",)))
    with pytest.raises(NarrowingError, match="no tool child 'reader' may use matches it"):
        parent.narrow(ChildRequest("grandchild 'runner'", allow=("shell__*",)), available=TOOLS)
    narrower = parent.narrow(ChildRequest("grandchild 'grep'", allow=("fs__grep",)), available=TOOLS)
    assert [name for name in TOOLS if narrower.sees(name)] == ["fs__grep"]


def test_an_allow_list_is_enforced_at_every_level(tmp_path: Path) -> None:
    parent = root(tmp_path, "bypass", allow_lists=(("fs__*", "loom__*"),))
    # A glob wider than the parent's list is accepted (it matches tools the parent has) but cannot widen it.
    child = parent.narrow(ChildRequest("child 'wide'", allow=("*",)), available=TOOLS)
    decision = child.decide("shell__run", SHELL, {"command": "ls"})
    assert decision.verdict == "deny"
    assert "not in the allow-list of the session" in decision.reason
    assert [t.name for t in visible_tools(child, [mt.Tool(name=n, input_schema={}) for n in TOOLS])] == [
        "fs__read",
        "fs__write",
        "fs__edit",
        "fs__grep",
        "loom__skill",
    ]
    empty = parent.narrow(ChildRequest("child 'idle'", tools=()))
    assert not any(empty.sees(name) for name in TOOLS)
    assert "no tools" in empty.decide("fs__read", READ_ONLY, {"path": "a"}).reason


# --- servers -----------------------------------------------------------------------------------------------------


def test_a_child_cannot_reach_an_external_server_its_parent_does_not_have(tmp_path: Path) -> None:
    parent = root(tmp_path, "bypass")
    with pytest.raises(NarrowingError, match=r"server 'github', which the session does not have \(it has: fs, loom"):
        parent.narrow(ChildRequest("child 'gh'", servers=("github",)))
    with pytest.raises(NarrowingError, match="does not reach server 'github'"):
        parent.narrow(ChildRequest("child 'gh'", allow=("github__create_issue",)))
    with pytest.raises(NarrowingError, match="server 'github'"):
        parent.narrow(ChildRequest("child 'gh'", servers=("github",)), available=TOOLS)
    child = parent.narrow(ChildRequest("child 'fs only'", servers=("fs",)))
    decision = child.decide("github__create_issue", None, {})
    assert decision.verdict == "deny"
    assert "server 'github', which the session does not reach" in decision.reason
    assert child.decide("shell__run", SHELL, {"command": "ls"}).verdict == "deny"
    assert child.decide("fs__write", FS_EDIT, {"path": "a"}).verdict == "allow"


# --- protected paths ---------------------------------------------------------------------------------------------


def test_a_child_cannot_write_loom_configuration_without_asking(tmp_path: Path) -> None:
    parent = root(tmp_path, "accept-edits")
    planted = Rule("allow", "fs__write", path="**", source="agent")
    child = parent.narrow(ChildRequest("child 'editor'", rules=(planted,)))
    decision = child.decide("fs__write", FS_EDIT, {"path": ".loom/policy.toml"})
    assert decision.verdict == "ask"
    assert decision.protected  # "approve for the session" must never cover it
    assert "Loom's own configuration" in decision.reason


def test_a_child_whose_own_protection_misses_the_home_is_still_asked_about_by_its_parent(tmp_path: Path) -> None:
    parent = root(tmp_path, "accept-edits")
    (tmp_path / "home").mkdir()
    elsewhere = Protected.for_session(tmp_path / "other-home", tmp_path, tmp_path)
    child = parent.narrow(ChildRequest("child 'editor'", protected=elsewhere))
    target = str(tmp_path / "home" / "config.json")
    assert Bounds("alone", "accept-edits", cwd=str(tmp_path), protected=elsewhere).decide(
        "fs__write", FS_EDIT, {"path": target}
    ).verdict == ("allow")
    decision = child.decide("fs__write", FS_EDIT, {"path": target})
    assert decision.verdict == "ask" and decision.protected
    assert "decided by the policy of the session" in decision.reason


# --- nesting -----------------------------------------------------------------------------------------------------


def test_narrowing_is_transitive(tmp_path: Path) -> None:
    top = root(tmp_path, "accept-edits", rules=(Rule("deny", "fs__*", path="secrets/**", source="policy.toml"),))
    child = top.narrow(ChildRequest("child 'lead'", mode="ask", tools=("fs__*", "shell__run")))
    with pytest.raises(NarrowingError, match="freer than child 'lead'"):
        child.narrow(ChildRequest("grandchild 'x'", mode="accept-edits"))
    with pytest.raises(NarrowingError, match="'memory__set', which child 'lead' may not use"):
        child.narrow(ChildRequest("grandchild 'x'", allow=("memory__set",)))
    grandchild = child.narrow(ChildRequest("grandchild 'worker'", allow=("fs__*",)))
    assert [level.label for level in grandchild.chain] == ["the session", "child 'lead'", "grandchild 'worker'"]
    assert grandchild.mode == "ask" and grandchild.effective_mode == "ask"
    # The top's deny rule, the child's mode and both allow-lists all hold two levels down.
    assert grandchild.decide("fs__read", READ_ONLY, {"path": "secrets/key"}).verdict == "deny"
    assert grandchild.decide("fs__write", FS_EDIT, {"path": "a.txt"}).verdict == "ask"
    assert grandchild.decide("shell__run", SHELL, {"command": "ls"}).verdict == "deny"
    assert grandchild.decide("memory__set", None, {}).verdict == "deny"


def test_headless_is_inherited(tmp_path: Path) -> None:
    parent = root(tmp_path, "ask", headless=True)
    assert parent.narrow(ChildRequest("child 'a'")).deny_asks
    assert root(tmp_path, "ask").narrow(ChildRequest("child 'b'", headless=True)).deny_asks
    assert not root(tmp_path, "ask").narrow(ChildRequest("child 'c'")).deny_asks


def test_chains_are_bounded(tmp_path: Path) -> None:
    bounds = root(tmp_path)
    for i in range(7):
        bounds = bounds.narrow(ChildRequest(f"child {i}"))
    with pytest.raises(NarrowingError, match="at most 8 deep"):
        bounds.narrow(ChildRequest("one too many"))


# --- the shell, spelled another way ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["env rm -rf src", "/bin/rm -rf src", "sudo -u root nice -n 5 rm x", "'rm' x"])
def test_a_wrapped_command_stays_denied_down_the_chain(tmp_path: Path, command: str) -> None:
    parent = root(tmp_path, "bypass", rules=(Rule("deny", "shell__run", command="rm *", source="policy.toml"),))
    allow_env = Rule("allow", "shell__run", command="env *", source="agent")
    child = parent.narrow(ChildRequest("child 'cleaner'", mode="bypass", rules=(allow_env,)))
    grandchild = child.narrow(ChildRequest("grandchild 'cleaner'", rules=(Rule("allow", "*", source="agent"),)))
    # A level with none of the parent's rules (built by hand, not by narrow) is held by the parent's level.
    bare = Bounds("child 'bare'", "bypass", (allow_env,), str(tmp_path), parent=parent)
    for bounds in (child, grandchild, bare):
        decision = bounds.decide("shell__run", SHELL, {"command": command})
        assert decision.verdict == "deny", (bounds.label, decision)
        assert "rm *" in decision.reason


# --- working directories -----------------------------------------------------------------------------------------


def test_a_child_works_inside_its_parents_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    parent = root(tmp_path, "ask", rules=(Rule("deny", "fs__*", path="secrets/**", source="policy.toml"),))
    with pytest.raises(NarrowingError, match="outside the session's"):
        parent.narrow(ChildRequest("child 'away'", cwd=str(tmp_path.parent)))
    child = parent.narrow(ChildRequest("child 'sub'", cwd="sub"))
    assert child.cwd == str((tmp_path / "sub").resolve())
    # "../secrets/key" is the child's relative path; the parent's relative deny rule still sees where it points.
    assert child.decide("fs__read", READ_ONLY, {"path": "../secrets/key"}).verdict == "deny"
    assert child.decide("fs__read", READ_ONLY, {"path": "notes.txt"}).verdict == "allow"


# --- changes while a child runs ----------------------------------------------------------------------------------


def test_a_parent_made_stricter_makes_its_children_stricter(tmp_path: Path) -> None:
    parent = root(tmp_path, "bypass")
    child = parent.narrow(ChildRequest("child 'worker'"))
    grandchild = child.narrow(ChildRequest("grandchild 'helper'"))
    assert grandchild.decide("shell__run", SHELL, {"command": "make"}).verdict == "allow"
    stricter_parent = parent.with_mode("plan")
    child = child.rebased(stricter_parent)
    grandchild = grandchild.rebased(child)
    assert child.effective_mode == "plan" and grandchild.effective_mode == "plan"
    decision = grandchild.decide("shell__run", SHELL, {"command": "make"})
    assert decision.verdict == "deny" and "plan mode is read-only" in decision.reason


def test_a_child_cannot_be_switched_to_a_freer_mode_than_its_parent(tmp_path: Path) -> None:
    child = root(tmp_path, "accept-edits").narrow(ChildRequest("child 'worker'", mode="plan"))
    assert child.with_mode("accept-edits").mode == "accept-edits"
    with pytest.raises(NarrowingError, match="cannot switch to mode 'bypass': its parent, the session, is in"):
        child.with_mode("bypass")


def test_reading_a_cut_result_is_never_hidden_by_an_allow_list(tmp_path: Path) -> None:
    child = root(tmp_path, "ask").narrow(ChildRequest("child 'reader'", tools=("fs__read",)))
    assert child.sees("loom__tool_output")
    assert child.decide("loom__tool_output", READ_ONLY, {"call_id": "c1"}).verdict == "allow"
    own = child.decide("loom__skill", READ_ONLY, {"name": "x"})
    assert own.verdict == "deny" and "allow-list of child 'reader'" in own.reason
    assert "never freer" not in own.reason  # the child's own list hid it, not a parent's
    # A server restriction still applies: the exemption is from allow-lists only.
    assert not root(tmp_path, "ask").narrow(ChildRequest("child 'fs'", servers=("fs",))).sees("loom__tool_output")
