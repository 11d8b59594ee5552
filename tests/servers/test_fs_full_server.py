"""``fs`` as a full MCP server: files as a resource template, path completion, logging, in both eras and over stdio.

Every path a resource read or a completion meets is confined as the tools' paths are: the attacks below (``..``,
absolute paths, a symlink out of the root, percent-encoding, Loom's hidden state, dotfiles) read and complete to
nothing outside what the tools may touch.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.shared.subscriptions import ResourceUpdated
from mcp.types import (
    BlobResourceContents,
    LoggingMessageNotificationParams,
    ResourceTemplateReference,
    TextResourceContents,
)

from servers._tools import template_count
from servers.fs import build_server, prepare_server

pytestmark = pytest.mark.anyio

SECRET = "secret-that-must-not-leak"
TEMPLATE = ResourceTemplateReference(type="ref/resource", uri="fs://{+path}")
LOOM = str(Path(sys.executable).with_name("loom"))
MODES = ["auto", "legacy"]


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A root with files, a dotfile, Loom's hidden state and a symlink out; and the hidden directory."""
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "src" / "api.py").write_text("API = 1\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    (root / ".env").write_text(f"TOKEN={SECRET}\n")
    state = root / "state"
    state.mkdir()
    (state / "daemon.token").write_text(SECRET)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (root / "out").symlink_to(outside)
    (root / "token-link").symlink_to(state / "daemon.token")
    return root, state


class Logs:
    def __init__(self) -> None:
        self.seen: list[LoggingMessageNotificationParams] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.seen.append(params)

    def text(self) -> str:
        return "\n".join(str(p.data) for p in self.seen)


async def completions(client: Client, value: str) -> list[str]:
    result = await client.complete(TEMPLATE, {"name": "path", "value": value})
    return list(result.completion.values)


async def read_text(client: Client, uri: str) -> str:
    contents = (await client.read_resource(uri)).contents
    assert len(contents) == 1 and isinstance(contents[0], TextResourceContents)
    return contents[0].text


@pytest.fixture(params=MODES)
async def client(request: pytest.FixtureRequest, tree: tuple[Path, Path]) -> AsyncIterator[tuple[Client, Logs]]:
    root, state = tree
    logs = Logs()
    server = build_server([root], hidden=[state])
    async with Client(server, mode=request.param, logging_callback=logs, log_level="info") as connected:
        yield connected, logs


async def test_it_declares_resources_completions_and_logging(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    caps = mcp.server_capabilities
    assert caps is not None
    assert caps.resources is not None and caps.completions is not None and caps.logging is not None
    templates = (await mcp.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["fs://{+path}"]
    assert (await mcp.list_resources()).resources == []  # files are reached through the template, not listed


async def test_files_read_as_text_or_blob(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    assert await read_text(mcp, "fs://src/app.py") == "print('hi')\n"
    blob = (await mcp.read_resource("fs://logo.png")).contents[0]
    assert isinstance(blob, BlobResourceContents) and blob.mime_type == "image/png"


async def test_paths_complete_under_the_root(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    # Symlinks are names in the root (no trailing "/": following one is a read's business, refused if it leads
    # out); Loom's hidden state is not even named.
    assert await completions(mcp, "") == ["logo.png", "out", "src/", "token-link"]
    assert await completions(mcp, "s") == ["src/"]
    assert await completions(mcp, "src/a") == ["src/api.py", "src/app.py"]
    assert await completions(mcp, "src/x") == []


@pytest.mark.parametrize(
    "value",
    ["../", "../outside/", "/", "/etc/", "src/../../", "out/", "out/s", "state/", "state/d", "%2e%2e/", "~/", ".."],
)
async def test_completion_never_leads_outside_the_roots_or_into_hidden_state(
    client: tuple[Client, Logs], value: str
) -> None:
    mcp, _ = client
    assert await completions(mcp, value) == []


async def test_dotfiles_are_completed_only_when_asked_for(client: tuple[Client, Logs]) -> None:
    mcp, _ = client
    assert ".env" not in await completions(mcp, "")
    assert await completions(mcp, ".") == [".env"]


@pytest.mark.parametrize(
    "uri",
    [
        "fs://../outside/secret.txt",
        "fs:///etc/passwd",
        "fs://out/secret.txt",
        "fs://%2e%2e/outside/secret.txt",
        "fs://state/daemon.token",
        "fs://token-link",
        "fs://src",
        "fs://missing.txt",
    ],
)
async def test_reads_outside_the_roots_or_of_hidden_state_are_refused_and_logged(
    client: tuple[Client, Logs], uri: str
) -> None:
    mcp, logs = client
    with pytest.raises(MCPError) as refused:
        await mcp.read_resource(uri)
    assert SECRET not in str(refused.value)
    assert logs.seen and logs.seen[-1].level == "warning" and logs.seen[-1].logger == "fs"
    assert SECRET not in logs.text()


async def test_a_refused_tool_call_is_a_warning_in_the_clients_log(client: tuple[Client, Logs]) -> None:
    mcp, logs = client
    result = await mcp.call_tool("read", {"path": "../outside/secret.txt"})
    assert result.is_error
    assert [(p.level, p.logger) for p in logs.seen] == [("warning", "fs")]
    assert "resolves outside the allowed roots" in logs.text()


async def test_a_legacy_client_sets_the_level(tree: tuple[Path, Path]) -> None:
    root, state = tree
    logs = Logs()
    async with Client(build_server([root], hidden=[state]), mode="legacy", logging_callback=logs) as mcp:
        with pytest.warns(Warning, match="deprecated"):  # the SDK's client warns: 2026-07-28 removed setLevel
            await mcp.set_logging_level("error")
        await mcp.call_tool("read", {"path": "../x"})
        assert logs.seen == []
        with pytest.warns(Warning, match="deprecated"):
            await mcp.set_logging_level("warning")
        await mcp.call_tool("read", {"path": "../x"})
    assert [p.level for p in logs.seen] == ["warning"]


async def test_a_2026_client_gets_logs_only_when_it_opts_in(tree: tuple[Path, Path]) -> None:
    root, state = tree
    logs = Logs()
    async with Client(build_server([root], hidden=[state]), logging_callback=logs) as mcp:
        await mcp.call_tool("read", {"path": "../x"})
    assert logs.seen == []


async def test_each_server_completes_its_own_roots_and_builds_no_new_metadata(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root, name in ((a, "alpha.txt"), (b, "beta.txt")):
        root.mkdir()
        (root / name).write_text(name)
    prepare_server([a]).build()
    before = template_count()
    servers = [prepare_server([a]).build(), prepare_server([b]).build()]
    assert template_count() == before
    seen = []
    for server in servers:
        async with Client(server) as mcp:
            seen.append(await completions(mcp, ""))
    assert seen == [["alpha.txt"], ["beta.txt"]]


@pytest.mark.parametrize("mode", MODES)
async def test_loom_server_fs_offers_all_of_it_over_stdio(tree: tuple[Path, Path], mode: str) -> None:
    root, _ = tree
    logs = Logs()
    params = StdioServerParameters(command=LOOM, args=["server", "fs", "--root", str(root)])
    kwargs: dict[str, Any] = {"logging_callback": logs, "log_level": "info"}
    async with Client(params, mode=mode, **kwargs) as mcp:
        templates = [t.uri_template for t in (await mcp.list_resource_templates()).resource_templates]
        text = await read_text(mcp, "fs://src/app.py")
        values = await completions(mcp, "src/")
        outside = await completions(mcp, "out/")
        await mcp.call_tool("read", {"path": "out/secret.txt"})
    assert templates == ["fs://{+path}"] and text == "print('hi')\n"
    assert values == ["src/api.py", "src/app.py"] and outside == []
    assert [p.level for p in logs.seen] == ["warning"] and SECRET not in logs.text()


async def test_a_2026_listener_hears_of_the_files_the_tools_change(tree: tuple[Path, Path]) -> None:
    root, state = tree
    async with Client(build_server([root], hidden=[state])) as mcp:
        watched = ["fs://notes.txt", "fs://src/app.py"]
        async with mcp.listen(resource_subscriptions=watched) as sub:
            await mcp.call_tool("write", {"path": "notes.txt", "content": "one\n"})
            await mcp.call_tool("read", {"path": "src/app.py"})  # a read changes nothing
            await mcp.call_tool("edit", {"path": str(root / "src" / "app.py"), "old": "hi", "new": "ho"})
            seen: list[str] = []
            with anyio.fail_after(5):
                async for event in sub:
                    if isinstance(event, ResourceUpdated):
                        seen.append(event.uri)
                    if len(seen) == 2:
                        break
    assert seen == ["fs://notes.txt", "fs://src/app.py"]
