"""Loom's own tools for the model, as an in-process MCP server named ``loom``.

They give the model what context assembly left out on purpose: the full output of a tool call whose
result was cut (:mod:`orchestrator.context.truncation`), read back from the store, and the body of a skill
whose name and description are in the system prompt (:mod:`orchestrator.context.skills`). Both are
read-only, so every policy mode lets them run. The server is built per session: a call id is looked
up in that session only, so the model cannot read another session's history. ``todo`` is the model's plan, the
session's own (:mod:`orchestrator.runtime.todo`).
"""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from orchestrator.context.skills import SkillError, find_skills, load_skill, read_skill_file
from orchestrator.runtime.todo import TODO_ANNOTATIONS, SessionPlan
from orchestrator.store.interface import Store
from servers._tools import Binding, DeferredServer
from servers._version import loom_version

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

MAX_PAGE = 50_000
"""The most characters one ``tool_output`` call returns: a page must itself fit in the context."""


class OutputPage(BaseModel):
    """A page of a tool call's full output as the store keeps it."""

    call_id: str
    tool: str
    offset: int
    total_chars: int
    text: str
    next_offset: int | None
    """Pass this as ``offset`` for the next page; null at the end."""
    is_error: bool


class SkillText(BaseModel):
    """A skill's instructions (and the files beside them)."""

    name: str
    description: str
    directory: str
    text: str


class SessionTools:
    """The ``loom`` tools of one session: what they may read is this object's, never another session's.

    Args:
        store: the session's store, where tool results are kept in full.
        session_id: the only session whose outputs may be read.
        home: Loom's home (user skills live in ``home/skills``).
        project: the project root (project skills live in ``project/.loom/skills``).
    """

    def __init__(self, store: Store, session_id: str, *, home: Path, project: Path) -> None:
        self._store = store
        self._session_id = session_id
        self._home = home
        self._project = project

    async def tool_output(
        self,
        call_id: str,
        offset: int = Field(0, ge=0, description="character offset to start from"),
        limit: int = Field(20_000, ge=1, le=MAX_PAGE, description="characters to return"),
    ) -> OutputPage:
        """The full output of an earlier tool call of this session, a page at a time.

        Use it when a result says Loom cut it: call_id is the id the note names.
        """
        found = await self._store.find_tool_result(self._session_id, call_id)
        if found is None:
            raise ToolError(f"no finished tool call {call_id!r} in this session; use the call_id from the cut note")
        content = found.content
        end = min(len(content), offset + limit)
        return OutputPage(
            call_id=call_id,
            tool=found.tool,
            offset=offset,
            total_chars=len(content),
            text=content[offset:end],
            next_offset=end if end < len(content) else None,
            is_error=found.is_error,
        )

    async def skill(
        self,
        name: str,
        file: str | None = Field(None, description="a file of the skill, as its file list names it; omit for SKILL.md"),
    ) -> SkillText:
        """Load a skill's instructions by name (the index in your instructions lists them), or one of its files."""
        skills, _problems = await anyio.to_thread.run_sync(find_skills, self._home, self._project)
        match = next((s for s in skills if s.name == name), None)
        if match is None:
            known = ", ".join(s.name for s in skills) or "none are installed"
            raise ToolError(f"no skill named {name!r}; the skills are: {known}")
        try:
            if file is None:
                text = await anyio.to_thread.run_sync(load_skill, match)
            else:
                text = await anyio.to_thread.run_sync(read_skill_file, match, file)
        except SkillError as exc:
            raise ToolError(str(exc)) from exc
        return SkillText(name=match.name, description=match.description, directory=str(match.path), text=text)


def build_session_tools(
    store: Store, session_id: str, *, home: Path, project: Path, plan: SessionPlan | None = None
) -> MCPServer:
    """The ``loom`` server for one session: ``tool_output``, ``skill`` and ``todo``.

    `prepare_session_tools` gives the same server, built on its first use.
    """
    return prepare_session_tools(store, session_id, home=home, project=project, plan=plan).build()


def prepare_session_tools(
    store: Store, session_id: str, *, home: Path, project: Path, plan: SessionPlan | None = None
) -> DeferredServer:
    """The ``loom`` server for one session: ``tool_output``, ``skill`` and ``todo``, built on first use.

    The tools' schemas are built once per process (:mod:`servers._tools`); each server binds them to its own
    `SessionTools`, so preparing one per session costs microseconds.

    Args:
        store: the session's store, where tool results are kept in full.
        session_id: the only session whose outputs may be read.
        home: Loom's home (user skills live in ``home/skills``).
        project: the project root (project skills live in ``project/.loom/skills``).
        plan: the session's plan, which ``todo`` writes (None: one that records nothing, for a server only listed).
    """
    tools = SessionTools(store, session_id, home=home, project=project)
    plan = plan if plan is not None else SessionPlan(session_id, None)

    def make(bound: list[Tool]) -> MCPServer:
        return MCPServer(
            "loom",
            version=loom_version(),
            instructions="Loom's own tools: the full output of a cut tool result, skill instructions, and your plan.",
            tools=bound,
            log_level="WARNING",
        )

    bindings = [
        Binding(tools.tool_output, "tool_output", annotations=_READ_ONLY),
        Binding(tools.skill, "skill", annotations=_READ_ONLY),
        Binding(plan.todo, "todo", annotations=TODO_ANNOTATIONS),
    ]
    return DeferredServer("loom", bindings, make)
