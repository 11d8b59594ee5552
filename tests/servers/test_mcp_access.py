"""The model lists and reads other servers' resources and gets their prompts through ``mcp_access``, within bounds.

The servers are real subprocesses over stdio (``resources_test_server.py``); the model is scripted and the calls
go through a session's loop and policy, as a model's would.
"""

from __future__ import annotations

import sys
import timeit
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.config import ServerConfig
from orchestrator.events import ApprovalRequested, ToolCallFinished
from orchestrator.loop.approvals import Decision as ApprovalDecision
from orchestrator.loop.approvals import approved_for_session
from orchestrator.models.scripted import ScriptedModel
from orchestrator.policy.narrowing import ChildRequest
from orchestrator.policy.rules import Rule
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.lineage import Lineage
from orchestrator.runtime.runtime import ChildOpening, Runtime
from orchestrator.runtime.session import Session
from servers import mcp_access
from servers._tools import template_count

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(Path(__file__).with_name("resources_test_server.py"))
SECRET = "the vault's combination is 31-41-59"
HUGE_CHARS = 2_000_000
"""The length of the test server's ``docs://huge`` (not imported: importing the server builds it)."""


def resource_server(name: str, **env: str) -> ServerConfig:
    return ServerConfig(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(SCRIPT,),
        env={"PYTHONPATH": str(REPO), "TEST_SERVER_NAME": name, **env},
        startup_timeout_s=20,
        call_timeout_s=20,
    )


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"id": tool, "name": f"mcp_access__{tool}", "arguments": arguments}


async def results(runtime: Runtime, session: Session, calls: Sequence[Mapping[str, Any]]) -> list[ToolCallFinished]:
    """Run one turn per call, then return each call's recorded result, in order."""
    assert isinstance(session.model, ScriptedModel)
    outcome = await session.run("look at the servers' resources")
    assert outcome.status == "completed", outcome
    events = await runtime.log.store.read_events(session.id)
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(finished) == len(calls)
    return finished


def turns(calls: Sequence[Mapping[str, Any]]) -> ScriptedModel:
    return ScriptedModel.from_turns([*({"tool_calls": [c]} for c in calls), {"text": "done"}])


async def test_a_model_lists_reads_and_gets_prompts_end_to_end_under_a_headless_ask_policy(tmp_path: Path) -> None:
    calls = [
        call("list_resources"),
        call("read_resource", server="docs", uri="docs://readme"),
        call("read_resource", server="docs", uri="notes://groceries"),
        call("read_resource", server="docs", uri="docs://logo.png"),
        call("read_resource", server="docs", uri="docs://archive.bin"),
        call("list_prompts", server="docs"),
        call("get_prompt", server="docs", name="review", arguments={"code": "x = 1/0"}),
        call("read_resource", server="docs", uri="docs://nothing-here"),
        call("read_resource", server="docs", uri="not a uri"),
        call("read_resource", server="fs", uri="fs://inside.txt"),
        call("read_resource", server="fs", uri="fs://../outside.txt"),
        call("read_resource", server="fs", uri=f"fs://{tmp_path / 'outside.txt'}"),
    ]
    work = tmp_path / "work"
    work.mkdir()
    (work / "inside.txt").write_text("INSIDE the workspace")
    (tmp_path / "outside.txt").write_text("OUTSIDE the workspace")
    model = turns(calls)
    async with (
        embedded_runtime(tmp_path / "home", [resource_server("docs")]) as runtime,
        # Headless in ask mode: anything not read-only would be denied, so every success below is policy's yes.
        runtime.open_session(work, model, mode="ask", headless=True) as session,
    ):
        tools = ("list_resources", "read_resource", "list_prompts", "get_prompt")
        assert {t.name for t in session.hub.tools} >= {f"mcp_access__{n}" for n in tools}
        (listed, readme, note, logo, archive, prompts, prompt, missing, bad, inside, *escapes) = await results(
            runtime, session, calls
        )
    assert not listed.is_error
    assert "Resources of docs:" in listed.content and "docs://readme 'readme' (text/markdown)" in listed.content
    assert "notes://{key} 'note'" in listed.content and "How to use the docs" in listed.content
    assert "fs" not in listed.content.split("\n")[0]  # Loom's own servers are not listed unasked
    assert (readme.is_error, readme.content) == (False, "# docs\nThe readme of docs.")
    assert note.content == "note groceries of docs"
    # An image stays an image: a provider that takes images gets its bytes, the text says what it was.
    assert not logo.is_error and "[image 1×1 png" in logo.content
    assert [(a.kind, a.mime_type) for a in logo.attachments] == [("image", "image/png")] and logo.attachments[0].data
    assert not archive.is_error and "[binary application/octet-stream, 2.0 kB" in archive.content
    assert "review (code, focus?)" in prompts.content and "Review a piece of code" in prompts.content
    assert not prompt.is_error
    assert "--- user ---\nReview this code for bugs:\nx = 1/0" in prompt.content
    assert "--- assistant ---\nI will look for bugs first." in prompt.content
    assert missing.is_error and "server 'docs' refused reading docs://nothing-here" in missing.content
    assert bad.is_error and "'not a uri' is not a resource URI" in bad.content
    # Loom's own servers may be named; their resources are confined as their tools are.
    assert (inside.is_error, inside.content) == (False, "INSIDE the workspace")
    for escape in escapes:
        assert escape.is_error and "OUTSIDE" not in escape.content, escape


async def test_a_child_cannot_read_a_server_its_bounds_hide_nor_learn_that_it_exists(tmp_path: Path) -> None:
    servers = [resource_server("docs"), resource_server("vault", TEST_SERVER_SECRET=SECRET)]
    attack = [
        call("read_resource", server="vault", uri="docs://secret"),
        call("list_resources"),
        call("list_resources", server="vault"),
        call("get_prompt", server="vault", name="review", arguments={"code": "x"}),
        call("read_resource", server="docs", uri="docs://readme"),
    ]
    async with embedded_runtime(tmp_path / "home", servers) as runtime:
        parent_model = turns([call("read_resource", server="vault", uri="docs://secret")])
        async with runtime.open_session(tmp_path, parent_model) as parent:
            # The parent reads it: the child's refusal below is its bounds', not a broken server.
            (own,) = await results(runtime, parent, [{}])
            assert own.content == SECRET
            bounds = parent.approvals.bounds.narrow(
                ChildRequest("child 'reader'", allow=("mcp_access__*", "docs__*")),
                available=[t.name for t in parent.hub.tools],
            )
            opening = ChildOpening(bounds, Lineage(parent_session_id=parent.id, ancestors=(parent.id,)))
            async with runtime.open_session(tmp_path, turns(attack), child=opening) as child:
                assert not any(t.server == "vault" for t in child.hub.tools)
                read, every, listed, prompt, allowed = await results(runtime, child, attack)
                events = await runtime.log.store.read_events(child.id)
    for refused in (read, listed, prompt):
        assert refused.is_error, refused
        assert "no server named 'vault' that this session can read; the servers are: " in refused.content
        assert "docs" in refused.content.split("servers are:")[1] and refused.content.count("vault") == 1
    assert "docs://readme" in every.content and "vault" not in every.content
    assert not any(SECRET in e.model_dump_json() for e in events)
    assert allowed.content == "# docs\nThe readme of docs."


async def test_a_child_granted_one_tool_of_a_server_cannot_read_the_rest_of_it(tmp_path: Path) -> None:
    servers = [resource_server("vault", TEST_SERVER_SECRET=SECRET)]
    attack = [
        call("read_resource", server="vault", uri="docs://secret"),
        {"id": "ping", "name": "vault__ping", "arguments": {}},
    ]
    async with (
        embedded_runtime(tmp_path / "home", servers) as runtime,
        runtime.open_session(tmp_path, ScriptedModel.from_turns([])) as parent,
    ):
        bounds = parent.approvals.bounds.narrow(
            ChildRequest("child 'pinger'", allow=("mcp_access__read_resource", "vault__ping")),
            available=[t.name for t in parent.hub.tools],
        )
        opening = ChildOpening(bounds, Lineage(parent_session_id=parent.id, ancestors=(parent.id,)))
        async with runtime.open_session(tmp_path, turns(attack), child=opening) as child:
            read, ping = await results(runtime, child, attack)
    assert (ping.is_error, ping.content) == (False, "pong")  # the tool it was granted works
    # No server it may read declares resources, so it is not even offered the tool.
    assert read.is_error and "unknown tool 'mcp_access__read_resource'" in read.content and SECRET not in read.content


async def test_a_huge_resource_is_cut_and_says_so(tmp_path: Path) -> None:
    calls = [call("read_resource", server="docs", uri="docs://huge")]
    async with (
        embedded_runtime(tmp_path / "home", [resource_server("docs")]) as runtime,
        runtime.open_session(tmp_path, turns(calls)) as session,
    ):
        (huge,) = await results(runtime, session, calls)
    assert not huge.is_error
    assert huge.content.startswith("head xxx") and " tail" not in huge.content
    assert len(huge.content) < 51_000 < HUGE_CHARS
    assert f"[cut: {HUGE_CHARS - 50_000} more characters not shown" in huge.content


async def test_an_unknown_server_is_named_with_the_known_ones_and_a_server_without_resources_says_so(
    tmp_path: Path,
) -> None:
    calls = [
        call("read_resource", server="nope", uri="docs://readme"),
        call("list_prompts", server="nope"),
        call("list_resources", cursor="abc"),
        call("read_resource", server="bare", uri="docs://readme"),
        call("get_prompt", server="bare", name="review"),
    ]
    servers = [resource_server("docs"), resource_server("bare", TEST_SERVER_BARE="1")]
    async with (
        embedded_runtime(tmp_path / "home", servers) as runtime,
        runtime.open_session(tmp_path, turns(calls)) as session,
    ):
        assert session.hub.tool("bare__ping") is not None  # it started, and serves its tool
        unknown, prompts, cursor, no_resources, no_prompts = await results(runtime, session, calls)
    for refused in (unknown, prompts):
        assert refused.is_error and "no server named 'nope'" in refused.content
        assert "docs" in refused.content and "fs" in refused.content
    assert cursor.is_error and "pass that server too" in cursor.content
    assert no_resources.is_error
    assert "server 'bare' offers no resources (it does not declare the resources capability)" in no_resources.content
    assert "servers that do: docs" in no_resources.content
    assert no_prompts.is_error and "server 'bare' offers no prompts" in no_prompts.content


@pytest.mark.parametrize(
    "servers",
    [
        pytest.param([replace(resource_server("docs"), disabled=True)], id="disabled"),
        pytest.param([resource_server("bare", TEST_SERVER_BARE="1")], id="tools-only"),
    ],
)
async def test_sessions_whose_servers_have_no_resources_or_prompts_get_no_access_tools(
    tmp_path: Path, servers: list[ServerConfig]
) -> None:
    async with (
        embedded_runtime(tmp_path / "home", servers) as runtime,
        runtime.open_session(tmp_path, ScriptedModel.from_turns([])) as session,
    ):
        assert not any(t.server == mcp_access.NAME for t in session.hub.tools)
        assert session.hub.tools  # Loom's own are there (and the tools-only server's)


def test_preparing_the_server_for_a_session_costs_microseconds_and_builds_no_schema() -> None:
    mcp_access.prepare_server().build()  # the process's first: schemas built once
    templates = template_count()
    per_session = min(timeit.repeat(mcp_access.prepare_server, number=1000, repeat=3)) / 1000
    assert template_count() == templates
    assert per_session < 200e-6, per_session


# --- a person's rules for a server hold for reading it (orchestrator/policy/server_reads.py) ----------------------


async def test_a_deny_rule_on_a_server_denies_reading_it_however_the_call_is_spelled(tmp_path: Path) -> None:
    servers = [resource_server("docs", TEST_SERVER_SECRET=SECRET), resource_server("wiki")]
    attack = [
        call("read_resource", server="docs", uri="docs://secret"),
        call("get_prompt", server="docs", name="review", arguments={"code": "x"}),
        call("list_resources", server="docs"),
        call("list_resources"),  # every server: docs is left out, and named as left out
        call("list_prompts"),
        *(call("read_resource", server=spelled, uri="docs://secret") for spelled in ("DOCS", " docs", "docs ")),
        call("read_resource", server="wiki", uri="docs://readme"),  # another server is not touched
    ]
    rules = [Rule("deny", "docs__*", source="policy.toml: rules[0]")]
    async with (
        embedded_runtime(tmp_path / "home", servers) as runtime,
        runtime.open_session(tmp_path, turns(attack), mode="bypass", rules=rules) as session,
    ):
        read, prompt, listed, every, prompts, *spelled, other = await results(runtime, session, attack)
        events = await runtime.log.store.read_events(session.id)
    for denied in (read, prompt, listed):
        assert denied.is_error, denied
        assert "reading server 'docs'" in denied.content
        assert "denied by policy rule: deny docs__* (policy.toml: rules[0])" in denied.content
    for listing in (every, prompts):
        assert not listing.is_error and "of wiki:" in listing.content  # wiki's own URIs are docs://, as docs' are
        assert "Resources of docs" not in listing.content and "Prompts of docs" not in listing.content
        assert "Left out of this listing by the session's policy: 'docs' (" in listing.content
    upper, leading, trailing = spelled
    for refused in (upper, leading):  # not docs' spelling, so not its rule either, and no server of that name
        assert refused.is_error and "no server named" in refused.content
    # "docs " is spelled docs_ in tool names, which docs__* covers: denied before the server is even looked up.
    assert trailing.is_error and "deny docs__*" in trailing.content
    assert (other.is_error, other.content) == (False, "# wiki\nThe readme of wiki.")
    assert not any(SECRET in e.model_dump_json() for e in events)


async def test_a_rule_on_one_tool_of_a_server_does_not_keep_its_resources_from_the_model(tmp_path: Path) -> None:
    reads = [call("read_resource", server="docs", uri="docs://readme"), call("list_resources")]
    async with (
        embedded_runtime(tmp_path / "home", [resource_server("docs")]) as runtime,
        runtime.open_session(tmp_path, turns(reads), rules=[Rule("deny", "docs__ping")], headless=True) as session,
    ):
        read, every = await results(runtime, session, reads)
    assert (read.is_error, read.content) == (False, "# docs\nThe readme of docs.")
    assert "docs://readme" in every.content and "Left out" not in every.content


async def test_an_ask_rule_on_a_server_makes_reading_it_an_approval_a_person_answers(tmp_path: Path) -> None:
    reads = [
        call("read_resource", server="docs", uri="docs://readme"),
        call("list_resources"),
        call("read_resource", server="docs", uri="docs://secret"),
    ]
    rules = [Rule("ask", "docs__*")]
    async with (
        embedded_runtime(tmp_path / "home", [resource_server("docs", TEST_SERVER_SECRET=SECRET)]) as runtime,
        runtime.open_session(tmp_path, turns(reads), mode="accept-edits", rules=rules) as session,
    ):
        approvals = session.approvals
        answers: list[tuple[ApprovalDecision, str]] = [("approve_once", ""), ("deny", "not the secret")]
        reasons: list[str] = []

        async def answer() -> None:
            answered: set[str] = set()
            for decision, why in answers:
                with anyio.fail_after(20):
                    while True:  # the loop has no event for a new approval; poll, bounded
                        waiting = [p for p in approvals.pending.values() if p.approval_id not in answered]
                        if waiting:
                            break
                        await anyio.sleep(0.01)
                (pending,) = waiting
                answered.add(pending.approval_id)
                reasons.append(pending.reason)
                await approvals.decide(pending.approval_id, decision, why, "test")

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer)
            read, every, secret = await results(runtime, session, reads)
        events = await runtime.log.store.read_events(session.id)
    asked = [e for e in events if isinstance(e, ApprovalRequested)]
    assert [e.tool for e in asked] == ["mcp_access__read_resource"] * 2  # the listing of every server asked nothing
    assert all("reading server 'docs'" in r and "policy rule says to ask: ask docs__*" in r for r in reasons)
    assert (read.is_error, read.content) == (False, "# docs\nThe readme of docs.")
    assert "docs://readme" not in every.content and "a person is asked before it is read" in every.content
    assert secret.is_error and "not the secret" in secret.content and SECRET not in secret.content


async def test_approving_a_read_for_the_session_covers_that_server_only(tmp_path: Path) -> None:
    # "Approve for the session" on a read of docs must not become a pass for vault, whose own ask rule stands.
    reads = [
        call("read_resource", server="docs", uri="docs://readme"),
        call("read_resource", server="docs", uri="docs://readme"),
        call("read_resource", server="vault", uri="docs://readme"),
    ]
    rules = [Rule("ask", "docs__*"), Rule("ask", "vault__*")]
    async with (
        embedded_runtime(tmp_path / "home", [resource_server("docs"), resource_server("vault")]) as runtime,
        runtime.open_session(tmp_path, turns(reads), mode="accept-edits", rules=rules) as session,
    ):
        approvals = session.approvals
        asked_of: list[str] = []

        async def answer() -> None:
            answers: list[tuple[ApprovalDecision, str]] = [("approve_session", ""), ("deny", "not the vault")]
            answered: set[str] = set()
            for decision, why in answers:
                with anyio.fail_after(20):
                    while True:  # the loop has no event for a new approval; poll, bounded
                        waiting = [p for p in approvals.pending.values() if p.approval_id not in answered]
                        if waiting:
                            break
                        await anyio.sleep(0.01)
                (pending,) = waiting
                answered.add(pending.approval_id)
                asked_of.append(str(pending.arguments["server"]))
                await approvals.decide(pending.approval_id, decision, why, "test")

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer)
            first, again, vault = await results(runtime, session, reads)
        events = await runtime.log.store.read_events(session.id)
    assert asked_of == ["docs", "vault"]  # the second read of docs was covered, vault was asked
    assert not first.is_error and not again.is_error
    assert vault.is_error and "not the vault" in vault.content
    # Reopened, the session remembers the approval for docs, and only for docs.
    assert approved_for_session(events) == {"mcp_access__read_resource@docs"}


async def test_a_child_cannot_read_a_server_its_parent_s_rules_deny(tmp_path: Path) -> None:
    attack = [call("read_resource", server="docs", uri="docs://secret"), call("list_resources")]
    servers = [resource_server("docs", TEST_SERVER_SECRET=SECRET), resource_server("wiki")]
    async with (
        embedded_runtime(tmp_path / "home", servers) as runtime,
        runtime.open_session(tmp_path, ScriptedModel.from_turns([]), rules=[Rule("deny", "docs__*")]) as parent,
    ):
        bounds = parent.approvals.bounds.narrow(ChildRequest("child 'reader'", mode="plan"))
        opening = ChildOpening(bounds, Lineage(parent_session_id=parent.id, ancestors=(parent.id,)))
        async with runtime.open_session(tmp_path, turns(attack), child=opening) as child:
            read, every = await results(runtime, child, attack)
    assert read.is_error and "deny docs__*" in read.content and SECRET not in read.content
    assert "Resources of wiki" in every.content and "Resources of docs" not in every.content
