"""An adversarial corpus of path escapes, tried against every fs tool that takes a path, through a real MCP client.

Each case is a path a model might send to get outside the root: ``..`` in its many spellings, absolute paths,
``/proc`` and ``/dev/fd`` magic links, symlinks and chains of them, NUL bytes, over-long paths, and names that only
look like ``..`` (percent-encoding, fullwidth and leader dots, combining marks, backslashes, ``~``). Every case
is sent to read, write, edit, delete, list, glob (its ``path``) and grep (its ``path``), and after each call the test
checks that

- an escaping path came back as an error result with a message that says why,
- a look-alike (which could only be an odd name inside the root) was refused, saying what is not expanded,
- a marker that only exists in files outside the root never appears in any result (nothing outside was read),
- the tree next to the root is byte-for-byte and mtime-for-mtime the same (nothing outside was written).

The tests run as whatever user runs the suite, possibly root, so a write is only sent after the confinement itself
has refused the path or mapped it inside the root: a regression fails the test instead of overwriting /etc/passwd.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from servers.fs import build_server
from servers.fs._openat import kernel_path
from servers.fs._paths import MAX_COMPONENT_BYTES, MAX_PATH_CHARS, Roots

pytestmark = pytest.mark.anyio

MARKER = f"TOPSECRET{uuid.uuid4().hex}"
"""Content of every file outside the root. It appears in no path, so only reading such a file can leak it."""

GREP_PATTERN = "TOP.ECRET[0-9a-f]+"
"""Matches MARKER without containing it, since grep echoes its pattern in the result."""

PAYLOAD = f"PAYLOAD{uuid.uuid4().hex}"
"""What write tries to put wherever the path leads."""

NONCE = uuid.uuid4().hex[:12]
"""Makes names created by absolute-path and ``~`` cases unique, so their absence outside is meaningful."""

OUTSIDE = "resolves outside the allowed roots"
LOOP = "cannot be resolved"
NUL = "contains a NUL byte"
EMPTY = "path is empty"
TOO_LONG = f"the limit is {MAX_PATH_CHARS}"
NAME_TOO_LONG = f"limited to {MAX_COMPONENT_BYTES} bytes"
LOOK_ALIKE = "is not expanded here|are not expanded here|looks like|is percent-encoded|contains a backslash"
OUTSIDE_OR_DENIED = f"{OUTSIDE}|{LOOP}: Permission denied"
"""For /proc/<other pid>: resolving it may itself be denied, depending on the user and container."""


@dataclass(frozen=True)
class Case:
    """One escape attempt.

    ``raw`` is formatted with the layout (``{root}``, ``{outside}``, ``{tmp}``, ``{pid}``, ``{fd}``, ``{nonce}``)
    before use. ``refusal`` is a regular expression the message of every tool must match; None means the path is a
    literal (odd) name inside the root, which the tools may use or refuse, but which must never lead outside.
    """

    id: str
    raw: str
    refusal: str | None


CASES: list[Case] = [
    # Dot-dot in its plain spellings.
    Case("dotdot", "..", OUTSIDE),
    Case("dotdot-sibling-file", "../outside/secret.txt", OUTSIDE),
    Case("dotdot-deep-chain", "../" * 12 + "etc/passwd", OUTSIDE),
    Case("dot-slash-dotdot", "./../outside/secret.txt", OUTSIDE),
    Case("dotdot-from-subdir", "sub/../../outside/secret.txt", OUTSIDE),
    Case("dotdot-interleaved-dots", "sub/./.././../outside/./secret.txt", OUTSIDE),
    Case("dotdot-double-slashes", "sub//..//..//outside//secret.txt", OUTSIDE),
    Case("dotdot-trailing-slash", "../outside/", OUTSIDE),
    Case("dotdot-after-missing-dirs", "new/deeper/../../../outside/created.txt", OUTSIDE),
    Case("dotdot-to-new-file-beside-root", "../escaped-{nonce}.txt", OUTSIDE),
    Case("dotdot-into-prefix-sibling", "../root_evil/secret.txt", OUTSIDE),
    Case("dotdot-padded-within-limit", "sub/" + "./" * 1000 + "../../outside/secret.txt", OUTSIDE),
    # Absolute paths.
    Case("absolute-outside-file", "{outside}/secret.txt", OUTSIDE),
    Case("absolute-outside-dir", "{outside}", OUTSIDE),
    Case("absolute-parent-of-root", "{tmp}", OUTSIDE),
    Case("absolute-root-then-dotdot", "{root}/../outside/secret.txt", OUTSIDE),
    Case("absolute-prefix-sibling", "{root}_evil/secret.txt", OUTSIDE),
    Case("absolute-etc-passwd", "/etc/passwd", OUTSIDE),
    Case("absolute-etc-dir", "/etc/", OUTSIDE),
    Case("absolute-filesystem-root", "/", OUTSIDE),
    Case("absolute-new-file-in-tmp", "/tmp/loom-escape-{nonce}.txt", OUTSIDE),
    Case("absolute-double-leading-slash", "//etc/passwd", OUTSIDE),
    # /proc and /dev/fd magic links.
    Case("proc-self-root", "/proc/self/root{outside}/secret.txt", OUTSIDE),
    Case("proc-self-root-etc", "/proc/self/root/etc/passwd", OUTSIDE),
    Case("proc-self-cwd-dotdot", "/proc/self/cwd/..", OUTSIDE),
    Case("proc-self-cwd", "/proc/self/cwd", OUTSIDE),
    Case("proc-pid-root", "/proc/{pid}/root{outside}/secret.txt", OUTSIDE),
    Case("proc-1-root", "/proc/1/root/etc/passwd", OUTSIDE_OR_DENIED),
    Case("proc-self-fd-of-open-secret", "/proc/self/fd/{fd}", OUTSIDE),
    Case("dev-fd-of-open-secret", "/dev/fd/{fd}", OUTSIDE),
    Case("dev-fd-dotdot", "/dev/fd/..", OUTSIDE),
    Case("proc-self-environ", "/proc/self/environ", OUTSIDE),
    Case("proc-root-via-root", "{root}/../../../../proc/self/root{outside}/secret.txt", OUTSIDE),
    # Symlinks planted inside the root (see the layout fixture).
    Case("symlink-to-outside-file", "link_file", OUTSIDE),
    Case("symlink-to-outside-dir", "link_dir", OUTSIDE),
    Case("through-symlinked-dir", "link_dir/secret.txt", OUTSIDE),
    Case("through-symlinked-dir-new-file", "link_dir/created.txt", OUTSIDE),
    Case("through-symlinked-dir-nested", "link_dir/nested/secret.txt", OUTSIDE),
    Case("symlink-chain-a-b-outside", "chain_a/secret.txt", OUTSIDE),
    Case("symlink-chain-to-file", "chain_file", OUTSIDE),
    Case("symlink-in-subdir-pointing-up", "sub/up/outside/secret.txt", OUTSIDE),
    Case("symlink-to-parent-dir", "parent/outside/secret.txt", OUTSIDE),
    Case("symlink-to-parent-dir-itself", "parent", OUTSIDE),
    Case("relative-symlink-dotdot-dotdot", "sub/deeper/rel_up", OUTSIDE),
    Case("inside-symlink-then-dotdot", "sub/back/../outside/secret.txt", OUTSIDE),
    Case("dangling-symlink-to-outside-file", "dangling", OUTSIDE),
    Case("dangling-symlink-to-outside-dir", "dangling_dir/created.txt", OUTSIDE),
    Case("symlink-to-proc-self-root", "proc_link{outside}/secret.txt", OUTSIDE),
    Case("symlink-to-etc-passwd", "etc_link", OUTSIDE),
    Case("symlink-loop", "loop_a/x.txt", LOOP),
    # Malformed input.
    Case("nul-in-name", "secret\x00.txt", NUL),
    Case("nul-truncating-an-escape", "../outside/secret.txt\x00.png", NUL),
    Case("nul-alone", "\x00", NUL),
    Case("over-path-max", "a/" * (MAX_PATH_CHARS // 2) + "x", TOO_LONG),
    Case("over-path-max-dotdot", "../" * (MAX_PATH_CHARS // 3 + 1) + "etc/passwd", TOO_LONG),
    Case("over-name-max", "x" * (MAX_COMPONENT_BYTES + 1), NAME_TOO_LONG),
    Case("over-name-max-multibyte", "\u00e9" * 128, NAME_TOO_LONG),
    Case("over-name-max-then-dotdot", "y" * 300 + "/../../outside/secret.txt", NAME_TOO_LONG),
    Case("empty", "", EMPTY),
    Case("whitespace", "   ", EMPTY),
    Case("tab-newline", "\t\n", EMPTY),
    # Look-alikes: they could only be odd literal names inside the root, but each means something else to whoever
    # sent it (the parent, the home directory), so they are refused with a message saying what is not expanded.
    Case("percent-encoded-dots", "%2e%2e/%2e%2e/outside/secret.txt", LOOK_ALIKE),
    Case("percent-encoded-slashes", "..%2f..%2foutside%2fsecret.txt", LOOK_ALIKE),
    Case("double-percent-encoded", "%252e%252e/%252e%252e/outside/secret.txt", LOOK_ALIKE),
    Case("file-url", "file://{outside}/secret.txt", LOOK_ALIKE),
    Case("fullwidth-dots-and-solidus", "\uff0e\uff0e\uff0f\uff0e\uff0e\uff0foutside\uff0fsecret.txt", LOOK_ALIKE),
    Case("fullwidth-dots-real-slash", "\uff0e\uff0e/\uff0e\uff0e/outside/secret.txt", LOOK_ALIKE),
    Case("one-dot-leaders", "\u2024\u2024/\u2024\u2024/outside/secret.txt", LOOK_ALIKE),
    Case("two-dot-leader", "\u2025/\u2025/outside/secret.txt", LOOK_ALIKE),
    Case("dots-with-combining-acute", ".\u0301./.\u0301./outside/secret.txt", LOOK_ALIKE),
    Case("dots-with-zero-width-space", "..\u200b/..\u200b/outside/secret.txt", LOOK_ALIKE),
    Case("dots-with-nbsp", "..\u00a0/..\u00a0/outside/secret.txt", LOOK_ALIKE),
    Case("division-slash", "..\u2215..\u2215outside\u2215secret.txt", LOOK_ALIKE),
    Case("leading-space-dotdot", " ../../outside/secret.txt", LOOK_ALIKE),
    Case("three-dots", ".../.../outside/secret.txt", LOOK_ALIKE),
    Case("backslashes", "..\\..\\outside\\secret.txt", LOOK_ALIKE),
    Case("tilde", "~", LOOK_ALIKE),
    Case("tilde-new-file", "~/loom-escape-{nonce}.txt", LOOK_ALIKE),
    Case("tilde-root", "~root/.bashrc", LOOK_ALIKE),
    Case("dollar-home", "$HOME/loom-escape-{nonce}.txt", LOOK_ALIKE),
]


@dataclass(frozen=True)
class Layout:
    tmp: Path
    root: Path
    outside: Path
    fd: int

    def format(self, raw: str) -> str:
        return raw.format(root=self.root, outside=self.outside, tmp=self.tmp, pid=os.getpid(), fd=self.fd, nonce=NONCE)


def _plant(tmp: Path) -> tuple[Path, Path]:
    """Build the root, the outside tree holding MARKER, and the symlinks the cases use."""
    root = tmp / "root"
    outside = tmp / "outside"
    evil = tmp / "root_evil"
    for directory in (root / "sub" / "deeper", outside / "nested", evil):
        directory.mkdir(parents=True)
    for secret in (outside / "secret.txt", outside / "nested" / "secret.txt", evil / "secret.txt"):
        secret.write_text(f"{MARKER}\n")
    (tmp / "beside.txt").write_text(f"{MARKER}\n")
    (root / "inside.txt").write_text("harmless\n")
    links = {
        root / "link_file": outside / "secret.txt",
        root / "link_dir": outside,
        root / "chain_c": outside,
        root / "chain_b": Path("chain_c"),
        root / "chain_a": root / "chain_b",
        root / "chain_file": Path("link_file"),
        root / "sub" / "up": Path("../.."),
        root / "parent": root.parent,
        root / "sub" / "deeper" / "rel_up": Path("../../../outside/secret.txt"),
        root / "sub" / "back": Path(".."),
        root / "dangling": outside / "created.txt",
        root / "dangling_dir": outside / "made" / "here",
        root / "proc_link": Path("/proc/self/root"),
        root / "etc_link": Path("/etc/passwd"),
        root / "loop_a": Path("loop_b"),
        root / "loop_b": Path("loop_a"),
    }
    for link, target in links.items():
        os.symlink(target, link)
    return root, outside


Snapshot = dict[str, tuple[int, int, int, bytes | str | None]]


def _snapshot(tmp: Path, root: Path) -> Snapshot:
    """Everything under tmp except the root: type, size, mtime and content (or link target), without following."""
    state: Snapshot = {}
    for directory, dirs, files in os.walk(tmp):
        if Path(directory) == root:
            dirs.clear()
            continue
        for name in dirs + files:
            path = Path(directory, name)
            if path == root:
                continue
            info = path.lstat()
            body: bytes | str | None = None
            if path.is_symlink():
                body = os.readlink(path)
            elif path.is_file():
                body = path.read_bytes()
            state[str(path.relative_to(tmp))] = (info.st_mode, info.st_size, info.st_mtime_ns, body)
    return state


def _created_outside() -> list[Path]:
    """Files the absolute-path and ``~`` cases would have made had they escaped."""
    candidates = [Path.home() / f"loom-escape-{NONCE}.txt", Path(f"/tmp/loom-escape-{NONCE}.txt")]
    return [path for path in candidates if path.exists()]


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[Layout]:
    root, outside = _plant(tmp_path)
    # An open descriptor on a secret, so /proc/self/fd/N and /dev/fd/N point at something worth stealing.
    fd = os.open(outside / "secret.txt", os.O_RDONLY)
    try:
        yield Layout(tmp=tmp_path, root=root, outside=outside, fd=fd)
    finally:
        os.close(fd)


@pytest.fixture(params=["openat2", "walk"])
async def client(
    request: pytest.FixtureRequest, layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Client]:
    # Every case through both ways of opening beneath the root: openat2, and the O_NOFOLLOW walk used without it.
    if request.param == "walk":
        monkeypatch.setattr("servers.fs._openat.USE_OPENAT2", False)
    elif kernel_path() != "openat2":
        pytest.skip("openat2 is not available on this kernel")
    async with Client(build_server([layout.root])) as client:
        yield client


def _arguments(tool: str, path: str) -> dict[str, Any]:
    if tool == "read":
        return {"path": path}
    if tool == "write":
        return {"path": path, "content": PAYLOAD}
    if tool == "edit":
        # old is the outside files' content, so an edit that got there would change them.
        return {"path": path, "old": MARKER, "new": PAYLOAD}
    if tool in ("list", "delete"):
        return {"path": path}
    if tool == "glob":
        return {"pattern": "**", "path": path}
    assert tool == "grep"
    return {"pattern": GREP_PATTERN, "path": path}


TOOLS = ["read", "write", "edit", "delete", "list", "glob", "grep"]


def _rendered(result: CallToolResult) -> str:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    return "\n".join(texts) + json.dumps(result.structured_content)


def _confined_or_refused(root: Path, raw: str) -> bool:
    """Whether the confinement refuses raw or maps it inside root: the precondition for sending a write."""
    try:
        resolved = Roots([root]).resolve(raw)
    except ToolError:
        return True
    return resolved.is_relative_to(root)


def _reported_paths(tool: str, content: dict[str, Any]) -> list[str]:
    if tool == "glob":
        return [content["path"], *content["matches"]]
    if tool == "grep":
        return [match["path"] for match in content["matches"]]
    return [content["path"]]


def _inside(shown: str) -> bool:
    # Paths in the primary root are reported relative to it; anything absolute or climbing would be outside.
    return not shown.startswith("/") and shown.split("/")[0] != ".."


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_escape_attempt_is_refused_by_every_tool(client: Client, layout: Layout, case: Case) -> None:
    raw = layout.format(case.raw)
    before = _snapshot(layout.tmp, layout.root)
    assert _confined_or_refused(layout.root, raw), f"confinement lets {raw!r} out; not sending write/edit"
    problems: list[str] = []
    for tool in TOOLS:
        result = await client.call_tool(tool, _arguments(tool, raw))
        rendered = _rendered(result)
        if MARKER in rendered:
            problems.append(f"{tool}: leaked the outside marker: {rendered[:300]}")
        if case.refusal is not None:
            if not result.is_error:
                problems.append(f"{tool}: succeeded: {rendered[:300]}")
            elif not re.search(case.refusal, rendered):
                problems.append(f"{tool}: refused without saying {case.refusal!r}: {rendered[:300]}")
        elif not result.is_error:
            content = result.structured_content
            assert content is not None
            escaped = [shown for shown in _reported_paths(tool, content) if not _inside(shown)]
            if escaped:
                problems.append(f"{tool}: reported paths outside the root: {escaped}")
    assert not problems, "\n".join(problems)
    assert _snapshot(layout.tmp, layout.root) == before, "something outside the root changed"
    assert _created_outside() == []


def test_the_corpus_is_big_and_varied() -> None:
    assert len(CASES) >= 40
    assert len({case.id for case in CASES}) == len(CASES)
    refused = [case for case in CASES if case.refusal is not None]
    assert len(refused) >= 40


async def test_look_alikes_are_refused_and_nothing_is_written(client: Client, layout: Layout) -> None:
    for raw in ("%2e%2e/%2e%2e/outside/w.txt", "\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fw.txt", "..\\..\\w.txt", "~/w.txt"):
        result = await client.call_tool("write", {"path": raw, "content": PAYLOAD})
        assert result.is_error and re.search(LOOK_ALIKE, _rendered(result)), _rendered(result)
    assert _written_under(layout.root) == set()
    assert _written_under(layout.tmp) == set()


def _written_under(root: Path) -> set[str]:
    found: set[str] = set()
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            if not path.is_symlink() and path.read_text() == PAYLOAD:
                found.add(path.relative_to(root).as_posix())
    return found


GLOB_PATTERNS = [
    "../**",
    "../outside/*",
    "/etc/*",
    "/**",
    "**/../../*",
    "sub/../../**",
    "./../*",
    "..",
    "../*/secret.txt",
]


@pytest.mark.parametrize("pattern", GLOB_PATTERNS)
async def test_glob_patterns_that_climb_or_are_absolute_are_refused(client: Client, pattern: str) -> None:
    result = await client.call_tool("glob", {"pattern": pattern, "path": "."})
    assert result.is_error, _rendered(result)
    assert "must be relative and must not contain '..'" in _rendered(result)


async def test_glob_and_grep_never_list_paths_behind_a_symlinked_dir(client: Client, layout: Layout) -> None:
    # link_dir, chain_*, parent, sub/up and proc_link all lead outside; the walk must not descend into any of them.
    for pattern in ("**", "**/secret.txt", "**/*.txt", "link_dir/*", "parent/**", "proc_link/**"):
        result = await client.call_tool("glob", {"pattern": pattern, "path": "."})
        assert not result.is_error, _rendered(result)
        assert result.structured_content is not None
        matches: list[str] = result.structured_content["matches"]
        assert all(_inside(match) for match in matches), matches
        # The links themselves are entries of the root and may be listed; nothing reached through them may be.
        through_links = [m for m in matches if "/" in m and m.split("/")[0] in {"link_dir", "chain_a", "parent"}]
        assert through_links == [], through_links
        assert not any(match.endswith("secret.txt") for match in matches), matches
    for glob in (None, "*.txt", "**/*.txt", "../outside/*", "link_dir/*"):
        arguments: dict[str, Any] = {"pattern": GREP_PATTERN, "path": "."}
        if glob is not None:
            arguments["glob"] = glob
        result = await client.call_tool("grep", arguments)
        assert not result.is_error, _rendered(result)
        assert result.structured_content is not None
        assert result.structured_content["matches"] == [], result.structured_content
        assert MARKER not in _rendered(result)


def _hard_link_layout(layout: Layout) -> Path:
    target = layout.outside / "hard_secret.txt"
    target.write_text(f"{MARKER}\n")
    os.link(target, layout.root / "hard")
    return target


async def test_a_hard_link_to_an_outside_file_is_read_with_a_warning_and_never_written(
    client: Client, layout: Layout
) -> None:
    # Confinement is by path, and a hard link has no path outside the root to resolve to: it shares the inode of the
    # file outside. So the server cannot tell where the other name is, only that there is one: it reads the file
    # but says so, and refuses to write through it. Deleting only removes the name inside the root.
    target = _hard_link_layout(layout)
    result = await client.call_tool("read", {"path": "hard"})
    assert not result.is_error, _rendered(result)
    assert "the file has 2 hard links, so it may be a file outside the workspace" in _rendered(result)
    refusal = (
        "'hard' has 2 hard links, so it may be a file outside the workspace; Loom does not write through hard links"
    )
    for tool, arguments in [
        ("edit", {"path": "hard", "old": MARKER, "new": PAYLOAD}),
        ("write", {"path": "hard", "content": PAYLOAD}),
    ]:
        result = await client.call_tool(tool, arguments)
        assert result.is_error and refusal in _rendered(result), _rendered(result)
    assert _read_outside(target) == f"{MARKER}\n"
    result = await client.call_tool("delete", {"path": "hard"})
    assert not result.is_error, _rendered(result)
    assert not (layout.root / "hard").exists()
    assert _read_outside(target) == f"{MARKER}\n"


def _read_outside(path: Path) -> str:
    return path.read_text()
