"""What a review looks at in a git working tree: the diff, the files it touches, the untracked files.

Git runs as a subprocess in a worker thread, each call bounded in time (:data:`GIT_TIMEOUT_S`) and in how much
of its output is read (:data:`MAX_GIT_BYTES`): a huge diff is cut, never held whole, and a hung git is killed.
The repository is treated as untrusted: its configuration may not run programs during a review (external diff
drivers, text conversion filters and the fsmonitor hook are switched off on the command line), and git never
takes the index lock or asks for a password.

Paths are those under the working directory, relative to it (``git diff --relative``): the reviewer's tools
reach that directory, so that is what it is shown.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path
from typing import cast

import anyio
import anyio.to_thread

__all__ = ["EMPTY_TREE", "GIT_TIMEOUT_S", "MAX_GIT_BYTES", "Change", "ReviewError", "collect_change"]

GIT_TIMEOUT_S = 20.0
"""The longest one git command may take before it is killed and the review refused, saying so."""
MAX_GIT_BYTES = 1_000_000
"""The most of one git command's output that is read; the rest is not (the process is stopped)."""
MAX_FILES = 500
"""The most changed or untracked files named."""
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""Git's empty tree: what a repository without a commit yet is compared with."""

_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.quotepath=off", "-c", "diff.external=", "--no-pager")
"""Options before every git command: nothing the repository configures runs, and paths are printed as they are."""
_DIFF = ("diff", "--no-color", "--no-ext-diff", "--no-textconv", "--relative")


class ReviewError(Exception):
    """There is nothing git can show for this target (no repository, a bad revision, git missing); says why."""


@dataclass(frozen=True, slots=True)
class Change:
    """The change a review looks at.

    Attributes:
        root: The working directory (resolved): findings' paths are relative to it.
        target: What was asked, as a person reads it (``the uncommitted changes``, ``main..HEAD``).
        diff: The diff's text, cut at :data:`MAX_GIT_BYTES` bytes.
        diff_cut: Whether the diff was longer than what was read.
        files: The files the diff touches (at most :data:`MAX_FILES`).
        untracked: New files git does not track yet, which the diff does not show.
        more_files: How many changed or untracked files were left out of those lists.
    """

    root: Path
    target: str
    diff: str
    diff_cut: bool = False
    files: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    more_files: int = 0

    @property
    def empty(self) -> bool:
        """Nothing changed: no diff and no untracked file."""
        return not self.diff.strip() and not self.files and not self.untracked


@dataclass(frozen=True, slots=True)
class _Output:
    code: int
    out: bytes
    err: str
    cut: bool


def _git(cwd: Path, args: list[str], limit: int = MAX_GIT_BYTES) -> _Output:
    """Run ``git ARGS`` in ``cwd``; at most ``limit`` bytes of its output are read. Blocking: call it in a thread.

    Raises:
        ReviewError: git is missing, or it did not finish within :data:`GIT_TIMEOUT_S`.
    """
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"}
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                ["git", *_SAFE, *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=env
            )
        except FileNotFoundError:
            raise ReviewError("git is not installed (or not on PATH); a review reads the change with git") from None
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(GIT_TIMEOUT_S, expire)  # the read below blocks; the timer ends a hung git
        timer.start()
        chunks: list[bytes] = []
        size = 0
        cut = False
        try:
            assert proc.stdout is not None
            stdout = cast(BufferedReader, proc.stdout)  # Popen gives a buffered reader for a pipe
            while chunk := stdout.read1(65536):
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    cut = True
                    proc.kill()  # the rest is not wanted: stop git rather than read what would be thrown away
                    break
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.stdout is not None:
                proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if expired.is_set() and not cut:
            raise ReviewError(f"git {args[0]} took longer than {GIT_TIMEOUT_S:g} s and was stopped")
        err.seek(0)
        message = err.read(2000).decode("utf-8", "replace").strip()
    return _Output(code, b"".join(chunks)[:limit], message, cut)


def _lines(out: bytes) -> list[str]:
    return [name for name in out.decode("utf-8", "replace").split("\0") if name]


def _verify(root: Path, rev: str) -> bool:
    return _git(root, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], 4096).code == 0


def _revisions(root: Path, target: str) -> tuple[list[str], bool]:
    """The diff arguments for a revision or range, and whether the working tree is one side of it.

    Raises:
        ReviewError: a side is not a commit of this repository.
    """
    sep = "..." if "..." in target else ".." if ".." in target else ""
    sides = target.split(sep, 1) if sep else [target]
    for side in sides:
        if side and not _verify(root, side):
            raise ReviewError(
                f"{target!r} is neither a path under {root} nor a git revision or range of its repository "
                "(such as main..HEAD or HEAD~3)"
            )
    return [target], not sep


def _is_path(path: Path) -> bool:
    try:
        return path.exists() or path.is_symlink()
    except OSError:  # a name too long for the file system is no path here: it may still be a revision
        return False


def _collect(cwd: Path, target: str) -> Change:
    if not cwd.is_dir():
        raise ReviewError(f"{str(cwd)[:300]} is not a directory; review an existing working directory")
    root = cwd.resolve()
    top = _git(root, ["rev-parse", "--show-toplevel"], 8192)
    if top.code != 0:
        raise ReviewError(
            f"{root} is not in a git repository, so there is no change to review; review a run instead "
            "(run_id / --run RUN_ID), or put the directory under git (git init)"
        )
    if target.startswith("-") or "\0" in target or len(target) > 4096:
        raise ReviewError(f"{target[:100]!r} is not a path or a revision range (a target may not start with '-')")
    base = "HEAD" if _verify(root, "HEAD") else EMPTY_TREE
    paths: list[str] = []
    worktree = True
    if not target:
        diff_args, shown = [base], "the uncommitted changes"
    elif _is_path(root / target):
        inside = os.path.realpath(root / target)
        if os.path.commonpath([inside, str(root)]) != str(root):
            raise ReviewError(f"{target!r} is outside {root}; review a path inside the working directory")
        diff_args, paths, shown = [base], [target], f"the uncommitted changes under {target}"
    else:
        diff_args, worktree = _revisions(root, target)
        shown = f"the changes since {target}" if worktree else f"the changes {target}"
    spec = ["--", *paths] if paths else []
    names = _git(root, [*_DIFF, "--name-only", "-z", *diff_args, *spec])
    if names.code != 0:
        raise ReviewError(f"git diff failed: {names.err or f'exit {names.code}'}")
    files = _lines(names.out)
    untracked: list[str] = []
    if worktree:
        found = _git(root, ["ls-files", "--others", "--exclude-standard", "-z", *spec])
        untracked = _lines(found.out) if found.code == 0 else []
    diff = _git(root, [*_DIFF, *diff_args, *spec])
    more = max(0, len(files) - MAX_FILES) + max(0, len(untracked) - MAX_FILES)
    text = diff.out.decode("utf-8", "replace")
    return Change(root, shown, text, diff.cut, files[:MAX_FILES], untracked[:MAX_FILES], more)


async def collect_change(cwd: Path, target: str = "") -> Change:
    """The change under ``cwd`` that ``target`` names.

    ``target`` is empty for the uncommitted change (``git diff HEAD`` and the untracked files), a path under ``cwd``
    for that part of it, or a revision or range (``main..HEAD``; a single revision is compared with the tree).

    Raises:
        ReviewError: ``cwd`` is not in a git repository, ``target`` is neither a path nor a revision, or git
            failed; the message says which and what to do.
    """
    return await anyio.to_thread.run_sync(_collect, cwd, target)
