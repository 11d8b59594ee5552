"""A child is never freer than its parent: the bounds of a child session, and how its calls are decided.

A session's *bounds* are what the policy engine needs (mode, rules, working directory, protected paths) plus what
it may reach at all: which servers, and which tools (allow-lists of globs over namespaced names). A child's bounds
are built from its parent's and a *request* (an agent definition's ``tools`` and mode, a spawn call's allow-list)
by :meth:`Bounds.narrow`, and they keep the parent as a link: :class:`Bounds` is a chain, root first.

**Enforcement is an intersection, by construction.** :meth:`Bounds.decide` asks every level of the chain, the
root first, with :func:`~orchestrator.policy.engine.decide`, and the strictest verdict wins (deny, then ask, then
allow), with the reason of the level that gave it (the outermost one among equals). So a child's allow rule, a
looser mode, a wider allow-list or a different protection cannot make any call freer than the parent would make
it: the parent's own verdict is always one of the candidates. A tool one level may not see is denied by that
level before any rule is read. Narrowing is transitive because a grandchild's chain holds the child's and the
root's levels too.

**Requests that ask for more are refused** (:class:`NarrowingError`), so that a spawn that would be cut down is
not silently started as something else: a mode freer than the parent's, an allow-list entry the parent cannot
use, a server the parent does not reach, a working directory outside the parent's.

**Modes, from strictest to freest** (:data:`STRICTNESS`): ``plan`` < ``ask`` < ``accept-edits`` < ``bypass``.
The engine's precedence makes this a total order, call by call: a matching deny rule denies in every mode, and a
call that cannot be checked against a deny rule asks in every mode; ``plan`` then denies anything not read-only,
and decides read-only calls exactly as ``ask`` does; ``accept-edits`` decides like ``ask`` except that workspace
edits and memory notes, which ``ask`` asks about, are allowed; ``bypass`` allows everything that reached it,
including writes to protected paths, which every other mode asks about. A child's mode is the stricter of its
parent's and its request's. A ``bypass`` child is only possible under a ``bypass`` parent, and even then its
deny rules (and its parent's) still hold.

A child inherits its parent's rules (its own level holds the parent's rules, then its request's), so the allow
rules a person gave the parent also let the child's calls through without asking; the request's own rules can
only narrow, since the parent's level still decides.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from orchestrator.hub.names import SEPARATOR, server_of
from orchestrator.policy.engine import MODES, Decision, Mode, Verdict, decide
from orchestrator.policy.paths import PATH_KEYS, realpath
from orchestrator.policy.protected import Protected
from orchestrator.policy.rules import Rule

if TYPE_CHECKING:  # annotations only, as in the engine: importing the MCP SDK is slow
    from mcp import types as mt

__all__ = [
    "ALWAYS_LISTED",
    "MAX_DEPTH",
    "STRICTNESS",
    "Bounds",
    "ChildRequest",
    "NarrowingError",
    "request_from_json",
    "request_to_json",
    "stricter",
    "visible_tools",
]

STRICTNESS: dict[Mode, int] = {"plan": 0, "ask": 1, "accept-edits": 2, "bypass": 3}
"""Each mode's freedom: a lower number is stricter (see the module docstring for why the order is total)."""
_RANK: dict[Verdict, int] = {"allow": 0, "ask": 1, "deny": 2}
ALWAYS_LISTED = frozenset({"loom__tool_output"})
"""Tools no allow-list hides: reading the full text of a result this session already got (its output was cut)
is part of reading that result, not a capability; an allow-list written for Claude Code does not know of it."""
MAX_DEPTH = 8
"""How many levels a chain may have (the root is level 1); deeper spawning is refused, not silently flattened."""
_GLOB = frozenset("*?[")


class NarrowingError(ValueError):
    """A child's request asks for something its parent does not have; the message says what and what would work."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_T = TypeVar("_T", bound=_Named)


def stricter(a: Mode, b: Mode) -> Mode:
    """The stricter of two modes (``plan`` < ``ask`` < ``accept-edits`` < ``bypass``)."""
    return a if STRICTNESS[a] <= STRICTNESS[b] else b


@dataclass(frozen=True, slots=True)
class ChildRequest:
    """What a child asks for: every field narrows, and None means "as the parent".

    Attributes:
        label: How reasons and errors name the child (``child 'reviewer'``).
        mode: The mode asked for (an agent definition's), or None for the parent's.
        tools: An allow-list of globs over namespaced tool names from the agent definition, or None for all the
            parent's tools (an empty tuple: no tools at all).
        allow: The spawn call's allow-list, the same way; both lists apply.
        servers: The servers the child may reach, or None for all the parent's.
        rules: Rules of the child's own (an agent definition's ``disallowedTools`` become deny rules).
        headless: Nobody answers the child's approvals (Claude Code's ``dontAsk``): what would ask is denied.
        cwd: The child's working directory, which must be the parent's or inside it; None for the parent's.
        protected: The child's own protected paths; None for the parent's.
    """

    label: str
    mode: Mode | None = None
    tools: tuple[str, ...] | None = None
    allow: tuple[str, ...] | None = None
    servers: tuple[str, ...] | None = None
    rules: tuple[Rule, ...] = ()
    headless: bool = False
    cwd: str | None = None
    protected: Protected | None = None


@dataclass(frozen=True, slots=True)
class Bounds:
    """One session's bounds, and through ``parent`` the bounds of every session above it.

    Build a top-level session's with the constructor (``parent`` None) and a child's with :meth:`narrow`.

    Attributes:
        label: How reasons name this level (``the session``, ``child 'reviewer'``).
        mode: This level's mode (for a child made by :meth:`narrow`, already no freer than its parent's).
        rules: This level's rules.
        cwd: This level's working directory: its rules' relative paths and its workspace.
        protected: This level's protected paths, or None to check none (unresolvable paths are still asked about).
        allow_lists: This level's allow-lists; a tool must match a glob of each. Empty: no restriction here.
        servers: The servers this level reaches, or None for no restriction here. Give a top-level session the
            names of its hub's servers, so that a child asking for another one is refused.
        headless: Nobody answers this level's approvals.
        parent: The level above, or None at the top.
    """

    label: str
    mode: Mode
    rules: tuple[Rule, ...] = ()
    cwd: str = "."
    protected: Protected | None = None
    allow_lists: tuple[tuple[str, ...], ...] = ()
    servers: frozenset[str] | None = None
    headless: bool = False
    parent: Bounds | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown policy mode {self.mode!r}; expected one of {', '.join(MODES)}")

    @property
    def chain(self) -> tuple[Bounds, ...]:
        """Every level, the top-level session first and this one last."""
        levels: list[Bounds] = []
        level: Bounds | None = self
        while level is not None:
            levels.append(level)
            level = level.parent
        return tuple(reversed(levels))

    @property
    def depth(self) -> int:
        """How many levels the chain has (1 for a top-level session)."""
        return len(self.chain)

    @property
    def effective_mode(self) -> Mode:
        """The strictest mode in the chain: what this session may do at most."""
        mode = self.mode
        for level in self.chain:
            mode = stricter(mode, level.mode)
        return mode

    @property
    def deny_asks(self) -> bool:
        """Whether nobody can answer this session's approvals (any level is headless)."""
        return any(level.headless for level in self.chain)

    def reaches(self, server: str) -> bool:
        """Whether every level may reach ``server``."""
        return all(level.servers is None or server in level.servers for level in self.chain)

    def hidden(self, tool_name: str) -> str:
        """Why a level may not use ``tool_name`` at all, or ``""`` when every level may."""
        found = self._hiding(tool_name)
        return found[1] if found is not None else ""

    def _hiding(self, tool_name: str) -> tuple[Bounds, str] | None:
        """The first level, from the top, that may not use ``tool_name``, and why."""
        server = server_of(tool_name)
        for level in self.chain:
            if level.servers is not None and server not in level.servers:
                reach = ", ".join(sorted(level.servers)) or "none"
                return (
                    level,
                    f"{tool_name} is a tool of server {server!r}, which {level.label} does not reach ({reach})",
                )
            if tool_name in ALWAYS_LISTED:
                continue
            for globs in level.allow_lists:
                if not any(fnmatch.fnmatchcase(tool_name, glob) for glob in globs):
                    listed = ", ".join(globs) or "no tools"
                    return level, f"{tool_name} is not in the allow-list of {level.label} ({listed})"
        return None

    def sees(self, tool_name: str) -> bool:
        """Whether every level may use ``tool_name`` (the hub shows this session only those)."""
        return not self.hidden(tool_name)

    def decide(self, tool_name: str, annotations: mt.ToolAnnotations | None, arguments: Mapping[str, Any]) -> Decision:
        """Decide a call of this session by every level's policy; the strictest verdict wins.

        Args:
            tool_name: The namespaced tool name.
            annotations: The tool's MCP annotations, or None.
            arguments: The call's arguments, as this session's model gave them (relative paths are this
                session's: they are made absolute for a level whose working directory differs).

        Returns:
            The deciding level's decision; its reason names that level when it is not this one. ``protected``
            is set when any level that asked did so for Loom's own configuration.
        """
        hiding = self._hiding(tool_name)
        if hiding is not None:
            level, why = hiding
            tail = "" if level is self else "; a child is never freer than its parent"
            return Decision("deny", f"denied by policy: {why}{tail}")
        best: tuple[Bounds, Decision] | None = None
        protected = False
        for level in self.chain:
            seen = _as_seen_from(level.cwd, self.cwd, arguments)
            decision = decide(level.mode, tool_name, annotations, seen, level.rules, level.cwd, level.protected)
            if decision.verdict == "ask" and decision.protected:
                protected = True
            # The outermost level wins a tie: the parent's reason is why the child cannot, whatever it asked for.
            if best is None or _RANK[decision.verdict] > _RANK[best[1].verdict]:
                best = (level, decision)
        assert best is not None  # a chain has at least this level
        level, decision = best
        reason = decision.reason
        if level is not self:
            reason = f"{reason} (decided by the policy of {level.label}; a child is never freer than its parent)"
        return replace(decision, reason=reason, protected=protected and decision.verdict == "ask")

    def with_mode(self, mode: Mode) -> Bounds:
        """This level in another mode (a person's ``set_mode``), refused when freer than the levels above.

        Raises:
            NarrowingError: ``mode`` is freer than the parent's effective mode.
        """
        if self.parent is not None and STRICTNESS[mode] > STRICTNESS[self.parent.effective_mode]:
            raise NarrowingError(
                f"{self.label} cannot switch to mode {mode!r}: its parent, {self.parent.label}, is in "
                f"{self.parent.effective_mode!r}, and a child is never freer than its parent"
            )
        return replace(self, mode=mode)

    def rebased(self, parent: Bounds) -> Bounds:
        """This level under its parent's new bounds (after the parent's mode changed, say).

        Bounds are values: a child's chain holds its parent's bounds as they were when the child got them. Whoever
        changes a session's bounds gives each of its children (and theirs) ``child.rebased(new)``, so a parent
        that becomes stricter makes its running children stricter at once; one that becomes freer does not free
        them past what their own levels say.
        """
        return replace(self, parent=parent)

    def narrow(self, request: ChildRequest, *, available: Collection[str] | None = None) -> Bounds:
        """The bounds of a child of this session.

        Args:
            request: What the child asks for.
            available: The namespaced names of the tools this session's hub lists, when known: an allow-list
                entry must then match at least one of them that this session may use.

        Returns:
            The child's bounds, linked to these.

        Raises:
            NarrowingError: The request asks for more than this session has, or the chain would be deeper than
                :data:`MAX_DEPTH`.
        """
        if self.depth >= MAX_DEPTH:
            raise NarrowingError(
                f"{request.label} cannot be started: {self.label} is already {self.depth} levels deep, and a chain "
                f"of sessions may be at most {MAX_DEPTH} deep; do the work here instead"
            )
        mode = self.effective_mode
        if request.mode is not None:
            if request.mode not in MODES:
                raise NarrowingError(f"{request.label} asks for unknown mode {request.mode!r}")
            if STRICTNESS[request.mode] > STRICTNESS[mode]:
                allowed = ", ".join(
                    repr(m) for m in sorted(MODES, key=STRICTNESS.__getitem__) if STRICTNESS[m] <= STRICTNESS[mode]
                )
                raise NarrowingError(
                    f"{request.label} asks for mode {request.mode!r}, which is freer than {self.label}'s {mode!r}; "
                    f"a child is never freer than its parent: use one of {allowed}"
                )
            mode = request.mode
        servers = None
        if request.servers is not None:
            for server in request.servers:
                self._check_server(server, request.label, available)
            servers = frozenset(request.servers)
        lists: list[tuple[str, ...]] = []
        asked = (
            (request.tools, f"the tools of {request.label}'s definition"),
            (request.allow, f"the allow-list given to {request.label}"),
        )
        for globs, what in asked:
            if globs is None:
                continue
            for glob in globs:
                self._check_tool(glob, what, available)
            lists.append(tuple(globs))
        return Bounds(
            label=request.label,
            mode=mode,
            rules=(*self.rules, *request.rules),
            cwd=self._child_cwd(request),
            protected=request.protected if request.protected is not None else self.protected,
            allow_lists=tuple(lists),
            servers=servers,
            headless=request.headless or self.headless,
            parent=self,
        )

    def _check_server(self, server: str, who: str, available: Collection[str] | None) -> None:
        known = {server_of(name) for name in available} if available is not None else _declared(self.chain)
        if self.reaches(server) and (known is None or server in known):
            return
        has = sorted(s for s in known or () if self.reaches(s))
        raise NarrowingError(
            f"{who} asks for server {server!r}, which {self.label} does not have"
            + (f" (it has: {', '.join(has)})" if has else "")
            + "; a child reaches only its parent's servers"
        )

    def _check_tool(self, glob: str, what: str, available: Collection[str] | None) -> None:
        head, sep, _ = glob.partition(SEPARATOR)
        if sep and not _GLOB & set(head) and not self.reaches(head):
            raise NarrowingError(
                f"{what} names {glob!r}, but {self.label} does not reach server {head!r}; "
                "a child can use only tools its parent can"
            )
        if available is not None:
            usable = [name for name in available if self.sees(name)]
            if not any(fnmatch.fnmatchcase(name, glob) for name in usable):
                raise NarrowingError(
                    f"{what} names {glob!r}, but no tool {self.label} may use matches it; "
                    "a child can use only tools its parent can"
                )
        elif not _GLOB & set(glob) and not self.sees(glob):
            raise NarrowingError(f"{what} names {glob!r}, which {self.label} may not use: {self.hidden(glob)}")

    def _child_cwd(self, request: ChildRequest) -> str:
        if request.cwd is None:
            return self.cwd
        try:
            mine, theirs = realpath(self.cwd), realpath(os.path.join(self.cwd, request.cwd))
        except OSError as exc:
            raise NarrowingError(
                f"{request.label}'s working directory {request.cwd!r} cannot be resolved ({exc})"
            ) from None
        if theirs != mine and not theirs.startswith(mine.rstrip("/") + "/"):
            raise NarrowingError(
                f"{request.label}'s working directory {theirs} is outside {self.label}'s ({mine}); "
                "a child works inside its parent's directory"
            )
        return theirs


def _declared(chain: Sequence[Bounds]) -> set[str] | None:
    """The servers the top-most level that names any reaches, for error messages."""
    return next((set(level.servers) for level in chain if level.servers is not None), None)


def _as_seen_from(level_cwd: str, call_cwd: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """The call's arguments as a level working in ``level_cwd`` must read them.

    Relative paths are the calling session's; a level elsewhere (a parent whose child works in a subdirectory)
    would resolve them against its own directory and check the wrong file. So for such a level path arguments
    are made absolute, and a shell-style call (one with a ``command``) gets the ``cwd`` it will run in.
    """
    if level_cwd == call_cwd:
        return arguments
    seen = dict(arguments)
    for key, value in arguments.items():
        if key in PATH_KEYS or key.endswith("_path"):
            seen[key] = (
                [_absolute(v, call_cwd) for v in value] if isinstance(value, list) else _absolute(value, call_cwd)
            )
    if isinstance(arguments.get("command"), str):
        seen["cwd"] = _absolute(arguments.get("cwd", "."), call_cwd)
    return seen


def _absolute(value: object, cwd: str) -> object:
    # Anything but a string is left for the engine to ignore, as it would in the calling session.
    return os.path.join(cwd, os.path.expanduser(value)) if isinstance(value, str) else value


def request_to_json(request: ChildRequest) -> dict[str, Any]:
    """A request as JSON, for the child's ``session_created`` event.

    The request's own protected paths are not kept: a child reopened from the store is given its parent's, as
    every child is today.
    """
    return {
        "label": request.label,
        "mode": request.mode,
        "tools": list(request.tools) if request.tools is not None else None,
        "allow": list(request.allow) if request.allow is not None else None,
        "servers": list(request.servers) if request.servers is not None else None,
        "rules": [
            {"action": r.action, "tool": r.tool, "command": r.command, "path": r.path, "source": r.source}
            for r in request.rules
        ],
        "headless": request.headless,
        "cwd": request.cwd,
    }


def request_from_json(data: Mapping[str, Any]) -> ChildRequest:
    """The request :func:`request_to_json` stored.

    Raises:
        NarrowingError: the stored request cannot be read (a store written by other code).
    """

    def globs(key: str) -> tuple[str, ...] | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise NarrowingError(f"the stored request of a child has an unreadable {key!r}: {value!r}")
        return tuple(value)

    mode = data.get("mode")
    if mode is not None and mode not in MODES:
        raise NarrowingError(f"the stored request of a child asks for unknown mode {mode!r}")
    try:
        rules = tuple(Rule(**rule) for rule in data.get("rules") or ())
        return ChildRequest(
            label=str(data.get("label") or "a child"),
            mode=mode,
            tools=globs("tools"),
            allow=globs("allow"),
            servers=globs("servers"),
            rules=rules,
            headless=bool(data.get("headless", False)),
            cwd=data.get("cwd") if isinstance(data.get("cwd"), str) else None,
        )
    except (TypeError, ValueError) as exc:
        raise NarrowingError(f"the stored request of a child cannot be read: {exc}") from exc


def visible_tools(bounds: Bounds, tools: Iterable[_T]) -> list[_T]:
    """The tools (hub tools, or anything with a ``name``) a session with ``bounds`` may use, in order."""
    return [tool for tool in tools if bounds.sees(tool.name)]
