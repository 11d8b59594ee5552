"""Protected paths: Loom's own configuration inside the writable root, which sandboxed commands cannot touch.

Each attack runs as its own call and must fail; afterwards the host files are as they were, nothing was created,
and no placeholder the server made for a missing path is left behind. Needs a working bwrap.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from servers.shell import build_server
from servers.shell._sandbox import bwrap_problem
from tests.servers._support import REPO_ROOT, call_ok

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"no bwrap sandbox: {bwrap_problem()}"),
]

ATTACKS = [
    "echo x > .loom/policy.toml",
    "echo x >> .loom/policy.toml",
    "mkdir -p .loom && echo x > .loom/policy.toml",
    "mkdir -p .loom/sub && echo x > .loom/sub/new.toml",
    "echo x > .loom/new.toml",
    "rm -rf .loom",
    "mv .loom moved",
    "echo x > f && rm -rf .loom && mv f .loom",
    "ln -s /etc .loom/link",
    "cp -r /etc/ssl .loom/",
    "echo x > AGENTS.md",
    "echo x > LOOM.md",
    "rm -f AGENTS.md",
    "rm -rf LOOM.md",
    "mv AGENTS.md moved.md",
    "echo x > f && mv -f f AGENTS.md",
    "echo x > f && mv -f f LOOM.md",
    "ln -sf /etc/passwd AGENTS.md",
    "ln -s /etc/passwd LOOM.md",
    "cp /etc/hostname AGENTS.md",
    "cp /etc/hostname LOOM.md",
    "truncate -s 0 AGENTS.md",
]
"""Ways a command could change or create a protected path; every one must exit non-zero."""


def tree(root: Path) -> dict[str, str | None]:
    """Every path under root with its content (None for a directory), to compare before and after."""
    found: dict[str, str | None] = {}
    for path in sorted(root.rglob("*")):
        if path.name in ("f", "moved", "moved.md"):
            continue
        found[str(path.relative_to(root))] = None if path.is_dir() else path.read_text()
    return found


@pytest.mark.parametrize("existing", [True, False], ids=["existing", "missing"])
async def test_no_command_changes_or_creates_a_protected_path(root: Path, existing: bool) -> None:
    if existing:
        (root / ".loom").mkdir()
        (root / ".loom" / "policy.toml").write_text("orig\n")
        (root / "AGENTS.md").write_text("orig\n")
    # LOOM.md never exists: in the "existing" case it is the one missing path next to existing ones.
    before = tree(root)
    protect = [root / ".loom", root / "AGENTS.md", root / "LOOM.md"]
    async with Client(build_server(root, sandbox="bwrap", protect=protect)) as client:
        for attack in ATTACKS:
            content = await call_ok(client, "run", {"command": attack})
            assert content["exit_code"] != 0, (attack, content)
            assert tree(root) == before, attack
        allowed = await call_ok(client, "run", {"command": "echo ok > notes.txt && mkdir -p src && echo y > src/a"})
    assert allowed["exit_code"] == 0, allowed
    assert (root / "notes.txt").read_text() == "ok\n" and (root / "src" / "a").read_text() == "y\n"
    assert not (root / "moved").exists() and not (root / "moved.md").exists()
    assert not (root / "LOOM.md").exists()
    assert (root / ".loom").exists() is existing and (root / "AGENTS.md").exists() is existing


async def test_a_missing_protected_path_looks_empty_and_read_only_while_a_command_runs(root: Path) -> None:
    protect = [root / ".loom", root / "AGENTS.md"]
    async with Client(build_server(root, sandbox="bwrap", protect=protect)) as client:
        content = await call_ok(
            client, "run", {"command": "ls -ap .loom; cat AGENTS.md; stat -c %F AGENTS.md; echo x > AGENTS.md"}
        )
    assert content["stdout"] == "./\n../\nregular empty file\n"
    assert content["stderr"].endswith("AGENTS.md: Read-only file system\n")
    assert not (root / ".loom").exists() and not (root / "AGENTS.md").exists()


async def test_a_path_inside_a_missing_protected_directory_cannot_be_created(root: Path) -> None:
    protect = [root / ".loom" / "policy.toml"]
    async with Client(build_server(root, sandbox="bwrap", protect=protect)) as client:
        for attack in ("mkdir .loom && echo x > .loom/policy.toml", "mkdir -p .loom/policy.toml", "rmdir .loom"):
            assert (await call_ok(client, "run", {"command": attack}))["exit_code"] != 0, attack
    assert [path async for path in anyio.Path(root).iterdir()] == []


async def test_renaming_a_parent_does_not_move_the_protection_away(root: Path) -> None:
    (root / "pkg" / "sub").mkdir(parents=True)
    protect = [root / "pkg" / "sub" / ".loom"]
    swaps = (
        "mv pkg pkg2 && mkdir -p pkg/sub/.loom && echo x > pkg/sub/.loom/policy.toml",
        "mv pkg/sub pkg/sub2 && mkdir -p pkg/sub/.loom && echo x > pkg/sub/.loom/policy.toml",
    )
    async with Client(build_server(root, sandbox="bwrap", protect=protect)) as client:
        for swap in swaps:
            assert (await call_ok(client, "run", {"command": swap}))["exit_code"] != 0, swap
        # The pinned parents stay writable.
        assert (await call_ok(client, "run", {"command": "echo ok > pkg/sub/other"}))["exit_code"] == 0
    assert list(tree(root)) == ["pkg", "pkg/sub", "pkg/sub/other"]


async def test_concurrent_commands_share_a_placeholder_and_the_last_one_removes_it(root: Path) -> None:
    protect = [root / "LOOM.md"]
    async with Client(build_server(root, sandbox="bwrap", protect=protect)) as client:
        long: dict[str, object] = {}

        async def slow() -> None:
            long.update(await call_ok(client, "run", {"command": "sleep 1.5; echo x > LOOM.md"}))

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            await anyio.sleep(0.5)
            assert (await call_ok(client, "run", {"command": "true"}))["exit_code"] == 0
            # The short command ended, the long one still runs: its placeholder must still be there.
            assert (root / "LOOM.md").is_file()
    assert long["exit_code"] != 0, long
    assert not (root / "LOOM.md").exists()


async def test_a_placeholder_filled_in_on_the_host_meanwhile_is_kept(root: Path) -> None:
    async with Client(build_server(root, sandbox="bwrap", protect=[root / ".loom"])) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(call_ok, client, "run", {"command": "sleep 1"})
            with anyio.fail_after(5):
                while True:
                    if await anyio.Path(root / ".loom").is_dir():
                        break
                    await anyio.sleep(0.02)
            # Loom itself writing its policy while a command runs: that file is real and must survive.
            (root / ".loom" / "policy.toml").write_text("real\n")
    assert (root / ".loom" / "policy.toml").read_text() == "real\n"


async def test_the_model_is_told_what_is_read_only(root: Path, tmp_path: Path) -> None:
    protect = [root / ".loom", root / "AGENTS.md", tmp_path / "loom-home"]
    server = build_server(root, sandbox="bwrap", protect=protect)
    assert "cannot be created, replaced, moved or deleted" in (server.instructions or "")
    assert "configuration; change them only by asking the user): .loom, AGENTS.md." in (server.instructions or "")
    async with Client(server) as client:
        result = await client.call_tool("run", {"command": "echo x > AGENTS.md"})
    block = result.content[0]
    assert block.type == "text"
    assert (
        f"note: the sandbox is read-only outside {root} and /tmp, and inside it for .loom, AGENTS.md; "
        f"write inside the root" in block.text
    )


def test_a_relative_protected_path_is_refused(root: Path) -> None:
    with pytest.raises(ValueError, match="protected path '.loom' is not absolute"):
        build_server(root, sandbox="bwrap", protect=[Path(".loom")])


async def test_loom_server_shell_takes_protect(root: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "servers.shell", "--root", str(root), "--sandbox", "bwrap", "--protect", str(root / "AGENTS.md")],
        cwd=str(REPO_ROOT),
    )
    async with Client(params) as client:
        content = await call_ok(client, "run", {"command": "echo x > AGENTS.md"})
    assert content["exit_code"] != 0
    assert not (root / "AGENTS.md").exists()


async def test_unsandboxed_commands_get_no_placeholders(root: Path) -> None:
    # Nothing could hold them read-only there, so an empty AGENTS.md appearing on the host would only be litter.
    async with Client(build_server(root, sandbox="off", protect=[root / "AGENTS.md", root / ".loom"])) as client:
        content = await call_ok(client, "run", {"command": "ls -A"})
    assert (content["exit_code"], content["stdout"]) == (0, "")
