"""The check-then-open race: a directory of the root swapped with a symlink to outside while the tools run.

A model can set this up with one background shell command: a loop that atomically exchanges ``root/sub`` (a real
directory) with ``root/swap`` (a symlink to a directory outside) using ``renameat2(RENAME_EXCHANGE)``. At any
instant ``root/sub`` is one or the other, so a tool that checks the path and then opens it by name can pass the
check while ``sub`` is real and open through the symlink a moment later. Here a separate process does the swapping
as fast as it can while every fs tool is called through a real in-process MCP client, and the test checks that no
result ever contains what only the outside files hold, and that nothing outside was changed, created or deleted.

Both kernel paths are driven: ``openat2`` and the ``O_NOFOLLOW`` walk used where ``openat2`` is unavailable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from servers.fs import build_server
from servers.fs._openat import kernel_path

pytestmark = pytest.mark.anyio

MARKER = f"OUTSIDE{uuid.uuid4().hex}"
"""In every file outside the root, and in no path or argument, so only reading an outside file can return it."""

MARKER_PATTERN = "OUTSIDE[0-9a-f]{32}"

ITERATIONS = 2000
SECONDS = 5.0

# The swapper exchanges two paths until it is told to stop, then prints how many exchanges it made. libc has
# renameat2 since glibc 2.28; the raw system call (316 on x86_64, 276 on aarch64) covers older ones.
SWAPPER = r"""
import ctypes, os, platform, signal, sys

libc = ctypes.CDLL(None, use_errno=True)
first, second = (os.fsencode(arg) for arg in sys.argv[1:3])
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if hasattr(libc, "renameat2"):
    def exchange():
        return libc.renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE)
else:
    number = {"x86_64": 316, "aarch64": 276}[platform.machine()]
    def exchange():
        return libc.syscall(number, AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE)
count = 0
stop = False
def on_term(signum, frame):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while not stop:
    if exchange() != 0:
        print(f"error {os.strerror(ctypes.get_errno())}", flush=True)
        sys.exit(1)
    count += 1
print(count, flush=True)
"""


@pytest.fixture(params=["openat2", "walk"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr("servers.fs._openat.USE_OPENAT2", False)
    elif kernel_path() != "openat2":
        pytest.skip("openat2 is not available on this kernel")
    assert kernel_path() == request.param
    return str(request.param)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    # The same names inside and outside, so that following the symlink would find a file where one was expected.
    (root / "sub" / "a.txt").write_text("common\n")
    for name in ("a.txt", "d.txt", "secret.txt"):
        (outside / name).write_text(f"common\nCOMMON\n{MARKER}\n")
    os.symlink(outside, root / "swap")
    return root, outside


class Swapper:
    """Exchanges root/sub and root/swap in another process until stopped."""

    def __init__(self, first: Path, second: Path) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, str(first), str(second)], stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        assert self._process.stdout.readline().strip() == "ready"

    def stop(self) -> int:
        """Stop swapping and return how many exchanges were made."""
        if self._process.returncode is None:
            self._process.terminate()
        out, _ = self._process.communicate(timeout=10)
        assert self._process.returncode == 0, out
        return int(out.strip())


@pytest.fixture
def swapper(layout: tuple[Path, Path]) -> Iterator[Swapper]:
    root, _ = layout
    swapper = Swapper(root / "sub", root / "swap")
    try:
        yield swapper
    finally:
        swapper.stop()


def _state(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file below directory with its size, mtime and content, read without following symlinks."""
    state: dict[str, tuple[int, int, bytes]] = {}
    for path in sorted(directory.rglob("*")):
        info = path.lstat()
        state[str(path.relative_to(directory))] = (info.st_size, info.st_mtime_ns, path.read_bytes())
    return state


def _rendered(result: CallToolResult) -> str:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    return "\n".join(texts) + json.dumps(result.structured_content)


def _calls(iteration: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read", {"path": "sub/a.txt"}),
        ("write", {"path": "sub/a.txt", "content": "common\n"}),
        ("edit", {"path": "sub/a.txt", "old": "common", "new": "COMMON"}),
        ("write", {"path": f"sub/new-{iteration}.txt", "content": "created\n"}),
        ("write", {"path": "sub/d.txt", "content": "to delete\n"}),
        ("delete", {"path": "sub/d.txt"}),
        ("delete", {"path": "sub/secret.txt"}),
        ("list", {"path": "sub"}),
        ("glob", {"pattern": "**", "path": "."}),
        ("glob", {"pattern": "*", "path": "sub"}),
        ("grep", {"pattern": MARKER_PATTERN, "path": "."}),
        ("grep", {"pattern": MARKER_PATTERN, "path": "sub"}),
        ("grep", {"pattern": "COMMON|OUTSIDE", "path": "sub/a.txt"}),
        ("read", {"path": "sub/secret.txt"}),
    ]


async def test_swapping_a_directory_for_a_symlink_never_leads_a_tool_outside(
    kernel: str, layout: tuple[Path, Path], swapper: Swapper
) -> None:
    root, outside = layout
    before = _state(outside)
    leaks: list[str] = []
    succeeded: dict[str, int] = {}
    calls = 0
    deadline = time.monotonic() + SECONDS
    async with Client(build_server([root])) as client:
        for iteration in range(ITERATIONS):
            if time.monotonic() > deadline:
                break
            for tool, arguments in _calls(iteration):
                result = await client.call_tool(tool, arguments)
                calls += 1
                rendered = _rendered(result)
                # secret.txt exists only outside; a listing that shows it has walked through the symlink.
                if MARKER in rendered or (tool in ("list", "glob", "grep") and "secret.txt" in rendered):
                    leaks.append(f"{tool} {arguments}: {rendered[:300]}")
                if not result.is_error:
                    succeeded[tool] = succeeded.get(tool, 0) + 1
    swaps = swapper.stop()
    assert leaks == [], f"{len(leaks)} of {calls} calls escaped, e.g.\n" + "\n".join(leaks[:5])
    assert _state(outside) == before, "a file outside the root was changed, created or deleted"
    # The race really ran and the tools really worked in between it; otherwise the test would prove nothing.
    assert swaps > calls, (swaps, calls)
    assert {"read", "write", "edit", "delete", "list", "glob", "grep"} <= set(succeeded), succeeded
