"""The system prompt, assembled again only when something it is made of has changed.

Assembling the prompt (:mod:`orchestrator.context.assembly`) reads the instruction files and the skills, and
lists three memory namespaces through the hub: a few milliseconds on every run, most of a short run. What it
reads is fingerprinted instead: every path the file layers depend on (the project root as found now, each
candidate instruction file, the skills directories and each skill's ``SKILL.md``), and the memory database with
its write-ahead log, by device, inode, mode, size and modification and change times. Equal fingerprints mean the
same prompt.

A fingerprint is a few dozen ``stat`` calls, 50-75 µs on a local disk, less than handing them to a worker thread
and back (0.2-0.4 ms on a loaded machine, on every run). So where the last fingerprint of the same directory took
under :data:`INLINE_S`, the next is taken on the event loop's thread; the first, and any after one that took
longer (a slow or network file system), go to a worker thread, so that a slow disk never holds the loop for long.

Two things keep that exact:

- **Racy timestamps.** A file's times tick coarsely (a jiffy here, seconds on some filesystems), so a change
  made in the same tick as the fingerprint could keep it equal. A fingerprint in which anything changed less
  than a tick's worth ago (:data:`RACY_FINE_S`, or :data:`RACY_S` for times on a whole second) is never trusted:
  the next run reads again (git's "racy clean" rule).
- **Memory written anywhere.** Every write to the memory database, by this session, another session or another
  process, goes through its write-ahead log, whose size or times change. The memory listings are kept per process by
  namespace (the ``user`` one shared by every session, ``project`` by the project's), so a new session reuses
  what others listed; its own ``session`` namespace is known empty as of its creation (its id was just made),
  so a new session's first run need not connect its memory server at all.
"""

from __future__ import annotations

import os
import stat
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from orchestrator.context.assembly import (
    MEMORY_NAMESPACES,
    SystemPrompt,
    ToolCaller,
    base_prompt,
    list_memory,
    read_file_layers,
    render_memory_index,
)
from orchestrator.context.instructions import INSTRUCTION_NAMES, canonical, project_root
from orchestrator.context.skills import SKILL_FILE
from orchestrator.hub.outcomes import ToolOutcome

RACY_S = 2.0
"""A fingerprint with a modification time newer than this (seconds before it was taken) is not trusted, where the
filesystem keeps whole seconds (FAT, some network filesystems): a change within the same second may not show."""
RACY_FINE_S = 0.05
"""The same for a time with a sub-second part: the filesystem ticks in nanoseconds or jiffies (10 ms at most)."""
INLINE_S = 0.001
"""A fingerprint of a directory whose last one took less than this is taken on the event loop, without a thread hop."""
MEMORY_LISTINGS = 4096
"""Namespace listings kept per process (least recently used dropped first)."""

Signature = tuple[int, ...] | None
"""``(dev, ino, mode, size, mtime_ns, ctime_ns)`` of a path, ``()`` when it cannot be read, None when absent."""


def signature(path: Path | str) -> Signature:
    """What identifies ``path``'s current state (following symlinks), for a fingerprint."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return ()
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _racy(signatures: Sequence[Signature], now_ns: int) -> bool:
    # The modification time decides: a change that sets it back (a copy keeping times) still moves the change
    # time, which is part of the signature. A time on a whole second may come from a filesystem that keeps no
    # more, so it gets the longer window.
    fine, coarse = now_ns - int(RACY_FINE_S * 1e9), now_ns - int(RACY_S * 1e9)
    return any(s is not None and len(s) == 6 and s[4] > (fine if s[4] % 1_000_000_000 else coarse) for s in signatures)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The state of what a session's prompt is made of, at one moment."""

    files: tuple[object, ...]
    """The file layers' inputs: the project root and the signatures of every path they depend on."""
    memory: tuple[Signature, Signature] | None
    """The memory database and its write-ahead log; None when the session's memory is not fingerprinted."""
    racy: bool
    """Something changed too recently for equal fingerprints to prove nothing changed since."""


def _kind(path: str) -> int | None:
    """What kind of file ``path`` is (its ``S_IFMT`` bits), or None when absent or unreadable."""
    try:
        return stat.S_IFMT(os.stat(path).st_mode)
    except OSError:
        return None


class FileInputs:
    """Every path the instruction and skill layers of one session's prompt read, and their signatures.

    The project root depends only on which markers (``.git``, ``.loom``) exist between the working directory and
    the user's home, so those are checked by kind alone (a repository's ``.git`` changes all the time, its
    existence does not), and the root, the candidate files and the skills directories are worked out again
    only when that changes. A symlinked directory retargeted in place is not noticed; a file's is.
    """

    def __init__(self, home: Path, cwd: Path) -> None:
        self.home = home
        self.cwd = cwd
        self._markers: list[str] | None = None
        self._layout: tuple[tuple[int | None, ...], Path, list[str], list[str]] | None = None
        self.held: tuple[tuple[object, ...], tuple[str, list[str]]] | None = None
        """The layers as last read (text, problems), with the inputs they were read at."""
        self.inline = False
        """The last fingerprint took under :data:`INLINE_S`: the next may be taken on the event loop."""

    def _walk(self) -> list[str]:
        """The markers project_root looks for, from the working directory up (resolved once)."""
        if self._markers is None:
            start = canonical(self.cwd)
            try:
                user_home: Path | None = canonical(Path.home())
            except (KeyError, RuntimeError):
                user_home = None
            markers: list[str] = []
            for directory in (start, *start.parents):
                markers.append(str(directory / ".git"))
                if directory == user_home:
                    break
                markers.append(str(directory / ".loom"))
            self._markers = markers
        return self._markers

    def _paths(self) -> tuple[tuple[int | None, ...], Path, list[str], list[str]]:
        kinds = tuple(_kind(m) for m in self._walk())
        if self._layout is None or self._layout[0] != kinds:
            root = project_root(self.cwd)
            layers = dict.fromkeys((canonical(self.home), root, canonical(self.cwd)))
            files = [str(layer / name) for layer in layers for name in INSTRUCTION_NAMES]
            skills = dict.fromkeys((canonical(self.home / "skills"), canonical(root / ".loom" / "skills")))
            self._layout = (kinds, root, files, [str(d) for d in skills])
        return self._layout

    def read(self) -> tuple[object, ...]:
        """The project root and the signatures of what the layers read, as of now (blocking)."""
        kinds, root, files, skill_dirs = self._paths()
        parts: list[object] = [kinds, root]
        parts.extend(signature(path) for path in files)
        for skills in skill_dirs:
            parts.append(signature(skills))
            try:
                entries = sorted(os.listdir(skills))
            except OSError:
                continue
            for name in entries:
                if not name.startswith("."):
                    entry = os.path.join(skills, name)
                    parts.extend((name, signature(entry), signature(os.path.join(entry, SKILL_FILE))))
        return tuple(parts)


def _written(path: str) -> Signature:
    """``path``'s signature with the change time left out (0): what a write moves, not what an open may."""
    found = signature(path)
    return found[:5] + (0,) if found else found


def memory_inputs(database: Path) -> tuple[Signature, Signature]:
    """The memory database's signature and its write-ahead log's (blocking).

    Without change times: SQLite run as root ``fchown``s the log to the database's owner each time a
    connection opens it, which moves only the change time, so every session's memory server opening would look
    like a write and no listing would be reused. A write moves the modification time (and the racy rule covers
    one in the same tick); a file replaced moves the inode.
    """
    return _written(str(database)), _written(f"{database}-wal")


def take_fingerprint(files_of: FileInputs, memory_db: Path | None) -> Fingerprint:
    """Fingerprint a session's prompt inputs now (blocking; see :func:`fingerprint_now` for where it runs)."""
    started = time.perf_counter()
    now_ns = time.time_ns()
    files = files_of.read()
    memory = memory_inputs(memory_db) if memory_db is not None else None
    # files[0] is the markers' kinds (a tuple too, but not a signature) and files[1] the root; then signatures,
    # and for each skill its name and two signatures.
    signatures: list[Signature] = [p for p in files[2:] if p is None or isinstance(p, tuple)]
    racy = _racy([*signatures, *(memory or ())], now_ns)
    files_of.inline = time.perf_counter() - started < INLINE_S
    return Fingerprint(files, memory, racy)


async def fingerprint_now(files_of: FileInputs, memory_db: Path | None) -> Fingerprint:
    """:func:`take_fingerprint` on the event loop where the last one was quick, else in a worker thread."""
    if files_of.inline:
        return take_fingerprint(files_of, memory_db)
    return await anyio.to_thread.run_sync(take_fingerprint, files_of, memory_db)


class MemoryListings:
    """One memory database's namespace listings, by namespace and owner, each with the state it was read at."""

    def __init__(self) -> None:
        self._held: OrderedDict[tuple[str, str], tuple[tuple[Signature, Signature], ToolOutcome]] = OrderedDict()

    def get(self, key: tuple[str, str], state: tuple[Signature, Signature]) -> ToolOutcome | None:
        """The listing of ``key`` (namespace, owner) if it was read at ``state``, else None."""
        held = self._held.get(key)
        if held is None or held[0] != state:
            return None
        self._held.move_to_end(key)
        return held[1]

    def put(self, key: tuple[str, str], state: tuple[Signature, Signature], outcome: ToolOutcome) -> None:
        """Keep a listing read while the database was at ``state`` (a trusted, not racy, fingerprint)."""
        self._held[key] = (state, outcome)
        self._held.move_to_end(key)
        while len(self._held) > MEMORY_LISTINGS:
            self._held.popitem(last=False)


_FILE_INPUTS: OrderedDict[tuple[Path, Path], FileInputs] = OrderedDict()
FILE_INPUTS = 256
"""(home, cwd) pairs whose file layers are kept per process (least recently used dropped first)."""


def file_inputs(home: Path, cwd: Path) -> FileInputs:
    """This process's :class:`FileInputs` for sessions in ``cwd`` (call it on the event loop's thread)."""
    key = (home, cwd)
    found = _FILE_INPUTS.get(key)
    if found is None:
        found = _FILE_INPUTS[key] = FileInputs(home, cwd)
        while len(_FILE_INPUTS) > FILE_INPUTS:
            _FILE_INPUTS.popitem(last=False)
    _FILE_INPUTS.move_to_end(key)
    return found


_EMPTY = ToolOutcome("", False, structured={"notes": []})
_LISTINGS: dict[Path, MemoryListings] = {}


def listings(database: Path) -> MemoryListings:
    """This process's listings of the memory database at ``database``."""
    found = _LISTINGS.get(database)
    if found is None:
        found = _LISTINGS[database] = MemoryListings()
    return found


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Which memory a session's prompt indexes: the database file and the owners of its namespaces."""

    database: Path
    project: str
    session: str

    def owner(self, namespace: str) -> str:
        """Whose notes ``namespace`` holds for this session (the user's are everyone's)."""
        return {"project": self.project, "session": self.session}.get(namespace, "")


def seed_new_session(scope: MemoryScope) -> None:
    """Record that a session just created (its id made a moment ago) has no session notes (blocking).

    Nothing can have written notes for an id nobody knew; the record holds until the database changes.
    """
    state = memory_inputs(scope.database)
    if not _racy(list(state), time.time_ns()):
        listings(scope.database).put(("session", scope.session), state, _EMPTY)


class PromptCache:
    """One session's system prompt, kept while its fingerprint stays the same."""

    def __init__(self, cwd: Path, home: Path, memory: MemoryScope | None = None) -> None:
        """A cache for a session in ``cwd``; ``memory`` fingerprints its memory (None: listed on every run)."""
        self.cwd = cwd
        self.home = home
        self.memory = memory
        self._inputs: FileInputs | None = None
        self._prompt: tuple[Fingerprint, SystemPrompt] | None = None

    def clear(self) -> None:
        """Forget the prompt: the next :meth:`prompt` assembles it afresh."""
        self._prompt = None
        if self._inputs is not None:
            self._inputs.held = None

    async def prompt(self, tools: ToolCaller | None) -> SystemPrompt:
        """The system prompt as of now (see the module's docstring for when it is read again)."""
        database = self.memory.database if self.memory is not None else None
        if self._inputs is None:
            self._inputs = file_inputs(self.home, self.cwd)
        fingerprint = await fingerprint_now(self._inputs, database)
        held = self._prompt
        if held is not None and held[0] == fingerprint and not fingerprint.racy:
            return held[1]
        layered, problems = await self._layers(self._inputs, fingerprint)
        memory, complete = await self._memory_index(tools, fingerprint) if tools is not None else ("", True)
        text = "\n\n".join(p for p in (base_prompt(self.cwd), layered, memory) if p)
        prompt = SystemPrompt(text, list(problems))
        # Kept only if the same fingerprint proves the same prompt: not racy, the memory fingerprinted, every
        # namespace listed (a memory server that failed now may answer next time).
        trusted = not fingerprint.racy and fingerprint.memory is not None and complete
        self._prompt = (fingerprint, prompt) if trusted else None
        return prompt

    async def _layers(self, inputs: FileInputs, fingerprint: Fingerprint) -> tuple[str, list[str]]:
        held = inputs.held  # shared by the sessions of this process in the same directory
        if held is not None and held[0] == fingerprint.files and not fingerprint.racy:
            return held[1]
        layers = await anyio.to_thread.run_sync(read_file_layers, self.cwd, self.home)
        inputs.held = None if fingerprint.racy else (fingerprint.files, layers)
        return layers

    async def _memory_index(self, tools: ToolCaller, fingerprint: Fingerprint) -> tuple[str, bool]:
        """The memory section, and whether every namespace was listed."""
        state, scope = fingerprint.memory, self.memory
        if state is None or scope is None or fingerprint.racy:
            listed = await list_memory(tools, MEMORY_NAMESPACES)
            return render_memory_index(MEMORY_NAMESPACES, listed), all(_listed(o) for o in listed)
        held = listings(scope.database)
        outcomes = [held.get((ns, scope.owner(ns)), state) for ns in MEMORY_NAMESPACES]
        missing = [ns for ns, outcome in zip(MEMORY_NAMESPACES, outcomes, strict=True) if outcome is None]
        if missing:
            found = dict(zip(missing, await list_memory(tools, missing), strict=True))
            for ns, outcome in found.items():
                if outcome is not None and _listed(outcome):
                    held.put((ns, scope.owner(ns)), state, outcome)
            outcomes = [found.get(ns, o) for ns, o in zip(MEMORY_NAMESPACES, outcomes, strict=True)]
        return render_memory_index(MEMORY_NAMESPACES, outcomes), all(_listed(o) for o in outcomes)


def _listed(outcome: ToolOutcome | None) -> bool:
    return outcome is not None and not outcome.is_error and outcome.structured is not None
