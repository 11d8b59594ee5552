"""The face's tools that show what a session runs on: its MCP servers' states (``list_servers``) and the models.

``list_servers`` answers from an open session's hub when it can (the live states its supervisor keeps), and
otherwise probes the configured servers afresh (:mod:`orchestrator.face.server_probe`); the result says which.
``list_models`` names the models a session could be given, each with the context window its profile gives it
(:mod:`orchestrator.models.profiles`), the default first, as the Kimi orchestrator's ``list_models`` does.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from orchestrator.face.server_probe import hub_servers, probe_servers
from orchestrator.models import PROVIDERS, ModelSpecError, choose_model_spec, resolve_model
from orchestrator.models.credentials import missing_credentials
from orchestrator.models.profiles import KNOWN_WINDOWS, ProfileSettings, profile_for
from orchestrator.protocol_servers import ModelInfo, ModelList, ProfileRule, ServerList
from orchestrator.runtime.host import SessionHost

__all__ = ["add_server_tools", "known_models"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_PROBE = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=True)
"""A probe starts the configured servers' processes (and closes them): read-only, but it reaches outside Loom."""

LISTED_MODELS = 20
"""How many models ``list_models`` names: enough for a completion list."""

_GLOB = frozenset("*?[")


def add_server_tools(face: MCPServer, host: SessionHost) -> None:
    """Register ``list_servers`` and ``list_models`` on ``face``."""

    @face.tool(annotations=_PROBE)
    async def list_servers(session_id: str | None = None) -> ServerList:
        """Each MCP server's state, tool count, restarts, latency and last error (Loom's own and mcpServers').

        session_id: a session open in this Loom: its servers' live states, as its supervisor sees them
        (``source`` "session"). Without one, or for a session not open here, each configured server is started
        on a fresh connection, listed and closed, within its start-up timeout (``source`` "probe"); nothing is
        called and no session is opened.
        """
        if session_id:
            session = host.sessions.get(session_id)
            if session is not None:
                servers = hub_servers(session.hub)
                return ServerList(source="session", session_id=session_id, servers=servers)
        servers = await probe_servers(host.runtime)
        if session_id:
            note = f"session {session_id!r} is not open in this Loom, so the configured servers were probed afresh"
        else:
            note = "no session named: the configured servers were probed afresh (pass session_id for a session's)"
        return ServerList(source="probe", session_id=session_id, servers=servers, note=note)

    @face.tool(annotations=_READ_ONLY)
    async def list_models() -> ModelList:
        """The models a session can run on, with their context windows; the default first (others work too).

        Listed: the default, the config's model, its exact ``models`` entries and advisor model, and the models
        this Loom's sessions have used. ``rules`` are the patterns any other model's window comes from.
        """
        used = [r.model for r in await host.list_sessions(include_archived=True)]
        return await anyio.to_thread.run_sync(known_models, host, used)


def known_models(host: SessionHost, used: list[str]) -> ModelList:
    """The :class:`ModelList` of ``host``'s runtime, given the models its sessions used (newest first).

    Blocking: a provider's model is built to ask it about its credentials (the SDK reads its profiles).
    """
    runtime = host.runtime
    default = choose_model_spec(None, runtime.model)
    sources: dict[str, list[str]] = {default: ["default"]}
    configured = [runtime.model or "", *(p for p in runtime.profiles if not _GLOB & set(p))]
    if runtime.advisor is not None and runtime.advisor.model:
        configured.append(runtime.advisor.model)
    for spec, source in [*((c, "config") for c in configured), *((u, "used") for u in used)]:
        if spec and ":" in spec and source not in sources.setdefault(spec, []):
            sources[spec].append(source)
    listed = list(sources)[:LISTED_MODELS]
    profiles = [_model_info(spec, sources[spec], runtime.profiles, default) for spec in listed]
    rules = [
        ProfileRule(pattern=p, context_window=s.context_window, compact_threshold=s.compact_threshold, source="config")
        for p, s in runtime.profiles.items()
        if _GLOB & set(p)
    ]
    rules += [ProfileRule(pattern=p, context_window=w, source="built-in") for p, w in KNOWN_WINDOWS]
    return ModelList(providers=list(PROVIDERS), default=default, models=listed, profiles=profiles, rules=rules)


def _model_info(spec: str, sources: list[str], settings: dict[str, ProfileSettings], default: str) -> ModelInfo:
    profile = profile_for(spec, settings)
    provider = spec.partition(":")[0]
    return ModelInfo(
        name=spec,
        provider=provider,
        context_window=profile.context_window,
        compact_threshold=profile.compact_threshold,
        default=spec == default,
        sources=sources,
        problem=_problem(spec, provider),
    )


_PROBLEMS: dict[str, tuple[float, str]] = {}
"""``_problem`` by model spec, with when it was found: building a provider's model to ask it (the SDK's import, its
profiles) takes a second or more, and clients ask for the list each time a user starts typing a command."""
PROBLEM_TTL_S = 60.0
"""How long a found problem (or its absence) is trusted: a key set in the daemon's config shows within a minute."""


def _problem(spec: str, provider: str) -> str:
    """Why this process could not use ``spec`` now (its key is missing, say); empty where nothing is known."""
    now = time.monotonic()
    known = _PROBLEMS.get(spec)
    if known is not None and now - known[0] < PROBLEM_TTL_S:
        return known[1]
    problem = _find_problem(spec, provider)
    _PROBLEMS[spec] = (now, problem)
    return problem


def _find_problem(spec: str, provider: str) -> str:
    if provider not in ("anthropic", "openai"):
        return "" if provider in PROVIDERS else f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}"
    try:
        model = resolve_model(spec, base_dir=Path.cwd())
    except (ModelSpecError, ValueError) as exc:
        return str(exc)
    return missing_credentials(model) or ""
