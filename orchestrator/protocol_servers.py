"""The face's results for ``list_servers`` and ``list_models``: each MCP server's state, and the models Loom knows.

Part of the face's protocol like :mod:`orchestrator.protocol` (``docs/protocol.md`` lists them), kept in a
module of their own. Only pydantic is imported, so a client pays for nothing else.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

__all__ = ["ModelInfo", "ModelList", "ProfileRule", "ServerInfo", "ServerList"]


class ServerInfo(BaseModel):
    """One MCP server a session reaches: Loom's own (in-process) or one configured in ``mcpServers``."""

    name: str
    """The name its tools are namespaced by (``NAME__tool``)."""
    transport: str
    """``in-process`` (Loom's own), ``stdio``, ``http`` or ``sse``."""
    state: str
    """``starting``, ``ready``, ``degraded`` (answers, but slowly or with errors), ``failed`` (does not answer;
    restarted after a backoff) or ``stopped`` (closed, ``disabled`` in its config, or a built-in not started yet)."""
    built_in: bool = False
    """One of Loom's own servers (fs, shell, memory, loom, subagents)."""
    tools: int = 0
    """How many tools it lists (what the model can call of it)."""
    restarts: int = 0
    """How many times the session's supervisor has restarted it (0 for a probe)."""
    latency_ms: float | None = None
    """The last round trip to it, in milliseconds: a call or health check in a session, a ``tools/list`` in a probe."""
    last_error: str = ""
    """Why it failed last, in plain words (with the end of its stderr for a stdio server); empty if it never did."""
    since: float | None = None
    """When it entered ``state`` (Unix seconds), where known."""
    stderr_tail: str = ""
    """The end of what a stdio server wrote to stderr, where it failed."""


class ServerList(BaseModel):
    """The servers and their states: a session's live ones, or the configured ones probed afresh."""

    source: Literal["session", "probe"]
    """``session``: the live state of an open session's servers, as its supervisor sees them; ``probe``: no such
    session is open here, so each configured server was started on its own, listed and closed (bounded by its
    start-up timeout), and Loom's built-in servers were listed in-process."""
    session_id: str | None = None
    """The session asked about (with ``probe``: it was not open, or none was named)."""
    servers: list[ServerInfo]
    note: str = ""
    """What the caller should know about the listing (why it is a probe, say)."""


class ModelInfo(BaseModel):
    """A model Loom is configured with, has used, or defaults to, with what its profile says about it."""

    name: str
    """The spec to pass as ``model`` (``PROVIDER:NAME``)."""
    provider: str
    context_window: int
    """Tokens per request, input and output together (from the config's ``models``, else Loom's built-in table,
    else the conservative default)."""
    compact_threshold: float
    """The context ratio past which a session on it compacts."""
    default: bool = False
    """The model a new session gets when none is named."""
    sources: list[str] = []
    """Why it is listed: ``default``, ``config`` (the config's ``model``, an exact ``models`` key or the advisor's
    model), ``used`` (a session of this Loom runs on it)."""
    problem: str = ""
    """Why a session could not use it from this Loom now (a missing API key, say); empty when nothing is known."""


class ProfileRule(BaseModel):
    """A pattern of model specs and the context window models matching it get (the most specific pattern wins)."""

    pattern: str
    """Shell-style, matched against ``PROVIDER:NAME``."""
    context_window: int | None = None
    compact_threshold: float | None = None
    source: Literal["config", "built-in"]
    """``config``: an entry of the config's ``models``, which wins over Loom's ``built-in`` table."""


class ModelList(BaseModel):
    """What ``switch_model`` and ``create_session`` accept, as far as this Loom knows, with context windows."""

    providers: list[str]
    """Every spec is ``PROVIDER:NAME`` with one of these providers."""
    default: str
    """The model a new session gets when none is named."""
    models: list[str]
    """The names of ``profiles``: models configured, the default and those this Loom has seen used, the default
    first; others work too."""
    profiles: list[ModelInfo] = []
    """Each of ``models`` with its context window, whether it is the default and why it is listed."""
    rules: list[ProfileRule] = []
    """The patterns windows come from for any other model: the config's, then Loom's built-in ones."""
