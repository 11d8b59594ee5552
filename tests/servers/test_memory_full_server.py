"""``memory`` as a full MCP server: the notes as ``memory://`` resources, completion of namespaces and keys, logging.

Tested with the real client in both eras, and over stdio through ``loom server memory``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.types import (
    LoggingMessageNotificationParams,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)

from servers.memory import build_server

pytestmark = pytest.mark.anyio

NOTE = ResourceTemplateReference(type="ref/resource", uri="memory://{namespace}/{key}")
LOOM = str(Path(sys.executable).with_name("loom"))
MODES = ["auto", "legacy"]


class Logs:
    def __init__(self) -> None:
        self.seen: list[LoggingMessageNotificationParams] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.seen.append(params)


async def read_text(client: Client, uri: str) -> str:
    contents = (await client.read_resource(uri)).contents
    assert len(contents) == 1 and isinstance(contents[0], TextResourceContents)
    assert contents[0].mime_type == "text/markdown"
    return contents[0].text


async def seed(client: Client) -> None:
    await client.call_tool("set", {"namespace": "user", "key": "style", "body": "short answers\nno emoji"})
    await client.call_tool("set", {"namespace": "user", "key": "shell", "body": "zsh"})
    await client.call_tool("set", {"namespace": "project", "key": "build", "body": "make all"})


@pytest.fixture(params=MODES)
async def client(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Client, Logs]]:
    logs = Logs()
    server = build_server(tmp_path / "memory.db", project="/work/a", session="s1")
    async with Client(server, mode=request.param, logging_callback=logs, log_level="info") as connected:
        yield connected, logs


async def test_it_declares_resources_completions_and_logging(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    caps = mcp.server_capabilities
    assert caps is not None
    assert caps.resources is not None and caps.completions is not None and caps.logging is not None
    templates = {t.uri_template for t in (await mcp.list_resource_templates()).resource_templates}
    assert templates == {"memory://{namespace}/{key}", "memory://{namespace}"}


async def test_the_notes_are_listed_and_read_as_resources(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    await seed(mcp)
    listed = {r.uri: r.description for r in (await mcp.list_resources()).resources}
    assert listed["memory://user/style"] == "short answers"
    assert listed["memory://project/build"] == "make all"
    assert {"memory://user", "memory://project", "memory://session"} <= set(listed)
    assert await read_text(mcp, "memory://user/style") == "short answers\nno emoji"
    assert await read_text(mcp, "memory://user") == (
        "# user\n\n## shell\n\nzsh\n\n## style\n\nshort answers\nno emoji\n"
    )


async def test_a_missing_or_malformed_note_is_a_clear_error(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    for uri, reason in [
        ("memory://user/nope", "no note 'nope'"),
        ("memory://other/x", "namespace"),
        ("memory://user/Bad Key", "key"),
    ]:
        with pytest.raises(MCPError, match=reason):
            await mcp.read_resource(uri)


async def test_namespaces_and_keys_complete(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    await seed(mcp)
    namespaces = await mcp.complete(NOTE, {"name": "namespace", "value": "p"})
    assert namespaces.completion.values == ["project"]
    keys = await mcp.complete(NOTE, {"name": "key", "value": "s"}, context_arguments={"namespace": "user"})
    assert keys.completion.values == ["shell", "style"]
    anywhere = await mcp.complete(NOTE, {"name": "key", "value": "b"})
    assert anywhere.completion.values == ["build"]
    unknown = await mcp.complete(NOTE, {"name": "key", "value": ""}, context_arguments={"namespace": "x"})
    assert unknown.completion.values == []


async def test_another_projects_notes_are_neither_listed_nor_completed(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    async with Client(build_server(db, project="/work/a", session="s1")) as mine:
        await mine.call_tool("set", {"namespace": "project", "key": "secret-plan", "body": "only for a"})
    async with Client(build_server(db, project="/work/b", session="s2")) as theirs:
        listed = [r.uri for r in (await theirs.list_resources()).resources]
        keys = await theirs.complete(NOTE, {"name": "key", "value": ""}, context_arguments={"namespace": "project"})
        with pytest.raises(MCPError, match="no note"):
            await theirs.read_resource("memory://project/secret-plan")
    assert "memory://project/secret-plan" not in listed and keys.completion.values == []


async def test_changes_are_info_and_refusals_warnings_in_the_clients_log(client: tuple[Client, Logs]) -> None:
    mcp, logs = client
    await mcp.call_tool("set", {"namespace": "user", "key": "style", "body": "terse"})
    await mcp.call_tool("delete", {"namespace": "user", "key": "style"})
    refused = await mcp.call_tool("get", {"namespace": "user", "key": "style"})
    assert refused.is_error
    assert [(p.level, p.logger) for p in logs.seen] == [("info", "memory"), ("info", "memory"), ("warning", "memory")]
    assert "created note user/style" in str(logs.seen[0].data) and "no note 'style'" in str(logs.seen[2].data)


async def test_a_legacy_client_at_warning_hears_no_info(tmp_path: Path) -> None:
    logs = Logs()
    async with Client(build_server(tmp_path / "m.db"), mode="legacy", logging_callback=logs) as mcp:
        with pytest.warns(Warning, match="deprecated"):
            await mcp.set_logging_level("warning")
        await mcp.call_tool("set", {"namespace": "user", "key": "k", "body": "b"})
        await mcp.call_tool("get", {"namespace": "user", "key": "missing"})
    assert [p.level for p in logs.seen] == ["warning"]


async def test_a_2026_client_that_did_not_opt_in_gets_no_logs(tmp_path: Path) -> None:
    logs = Logs()
    async with Client(build_server(tmp_path / "m.db"), logging_callback=logs) as mcp:
        await mcp.call_tool("set", {"namespace": "user", "key": "k", "body": "b"})
    assert logs.seen == []


@pytest.mark.parametrize("mode", MODES)
async def test_loom_server_memory_offers_all_of_it_over_stdio(tmp_path: Path, mode: str) -> None:
    logs = Logs()
    args = ["server", "memory", "--db", str(tmp_path / "memory.db"), "--project", "/work/a"]
    async with Client(
        StdioServerParameters(command=LOOM, args=args), mode=mode, logging_callback=logs, log_level="info"
    ) as mcp:
        await seed(mcp)
        listed = [r.uri for r in (await mcp.list_resources()).resources]
        body = await read_text(mcp, "memory://project/build")
        keys = await mcp.complete(NOTE, {"name": "key", "value": "st"}, context_arguments={"namespace": "user"})
    assert "memory://user/style" in listed and body == "make all" and keys.completion.values == ["style"]
    assert [p.level for p in logs.seen] == ["info", "info", "info"]


async def test_a_2026_listener_hears_of_a_changed_note_and_a_new_listing(tmp_path: Path) -> None:
    async with Client(build_server(tmp_path / "m.db")) as mcp:
        watched = ["memory://user/style"]
        async with mcp.listen(resources_list_changed=True, resource_subscriptions=watched) as sub:
            await mcp.call_tool("set", {"namespace": "user", "key": "style", "body": "terse"})
            seen: set[str] = set()
            with anyio.fail_after(5):
                async for event in sub:
                    if isinstance(event, ResourcesListChanged):
                        seen.add("list")
                    elif isinstance(event, ResourceUpdated):
                        seen.add(str(event.uri))
                    if seen == {"list", "memory://user/style"}:
                        break
    assert seen == {"list", "memory://user/style"}


async def test_the_notes_prompt_hands_over_a_namespace(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    await seed(mcp)
    prompts = {p.name: [a.name for a in p.arguments or []] for p in (await mcp.list_prompts()).prompts}
    assert prompts == {"notes": ["namespace"]}
    got = await mcp.get_prompt("notes", {"namespace": "project"})
    text = got.messages[0].content
    assert got.messages[0].role == "user" and isinstance(text, TextContent) and "## build\n\nmake all" in text.text
    ref = PromptReference(type="ref/prompt", name="notes")
    assert (await mcp.complete(ref, {"name": "namespace", "value": "u"})).completion.values == ["user"]
