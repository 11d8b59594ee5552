"""The runtime: it creates sessions over one event log and connects their tools.

Above it are the faces (the CLI and the MCP face); below it the sessions (:mod:`orchestrator.runtime.session`),
the agent loop, the hub and the store. A session's hub holds Loom's fs, shell and memory servers and
its ``loom`` tools, rooted at the session's directory, plus the configured external servers.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from orchestrator.config import ServerConfig, ShellOptions
from orchestrator.context.history import rebuild_history
from orchestrator.context.instructions import project_root
from orchestrator.context.plan import latest_plan
from orchestrator.context.prompt_cache import MemoryScope, seed_new_session
from orchestrator.events import (
    Event,
    Notice,
    RunFinished,
    ServerFailed,
    ServerStateChanged,
    SessionCreated,
)
from orchestrator.home import DB_NAME, MEMORY_DB_NAME
from orchestrator.hooks.attach import attached
from orchestrator.hooks.config import HooksConfig, load_hooks
from orchestrator.hub.client_caps import SessionClientHooks
from orchestrator.hub.pool import Hub
from orchestrator.hub.supervisor import ServerHealth
from orchestrator.hub.transports import DeferredServer
from orchestrator.loop.approvals import approved_for_session
from orchestrator.messages import Message
from orchestrator.models.base import Model
from orchestrator.models.profiles import ProfileSettings
from orchestrator.policy.narrowing import Bounds
from orchestrator.policy.protected import Protected
from orchestrator.policy.rules import Rule
from orchestrator.policy.server_reads import listing_gate
from orchestrator.runtime.lineage import Lineage
from orchestrator.runtime.owner import owner_alive
from orchestrator.runtime.questions import QuestionDesk
from orchestrator.runtime.runs import DEFAULT_MAX_STEPS, RunResult, new_id
from orchestrator.runtime.session import Session
from orchestrator.runtime.session_tools import prepare_session_tools
from orchestrator.runtime.todo import SessionPlan
from orchestrator.store.eventlog import EventLog
from orchestrator.store.interface import RunRecord
from orchestrator.store.snapshots import FileSnapshots
from orchestrator.trust import load_trusted_rules

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from orchestrator.config import AdvisorSettings, LoopSettings
    from orchestrator.engine.face import RemoteRuns
    from orchestrator.loop.advisor import Advisor
    from orchestrator.runtime.handoff import HandoffSeed

__all__ = ["DEFAULT_MAX_STEPS", "ChildOpening", "RunResult", "Runtime", "Session", "new_id"]


def secret_state(home: Path) -> list[Path]:
    """Files in Loom's home no tool may read, even where a workspace holds the home (Loom run in ``~``).

    The daemon's token lets whoever holds it drive the daemon and answer a run's own approvals; the databases
    hold every session's history and notes. Config and rules stay readable (writing them asks).
    """
    from orchestrator.daemon.auth import TOKEN_FILE
    from orchestrator.face.tasks import KEY_FILE  # task ids are derived with it
    from orchestrator.hooks.transcript import TRANSCRIPTS  # hooks' transcripts: every session's conversation

    databases = (DB_NAME, MEMORY_DB_NAME)
    names = [TOKEN_FILE, KEY_FILE, *(f"{db}{suffix}" for db in databases for suffix in ("", "-wal", "-shm"))]
    names.append(TRANSCRIPTS)
    return [home / name for name in names]


@dataclass(frozen=True, slots=True)
class _Placed:
    """What opening a session reads from the file system, in one worker thread (see ``open_session``)."""

    rules: list[Rule]
    warnings: list[str]
    """What the policy and hooks files left out (an untrusted project's allow rules and hooks)."""
    hooks: HooksConfig
    memory: MemoryScope
    protected: Protected
    internal: dict[str, DeferredServer]


@dataclass(frozen=True, slots=True)
class ChildOpening:
    """What opening a child session takes besides what every session does.

    Attributes:
        bounds: The child's bounds, narrowed from its parent's (they decide its calls).
        lineage: Its place in the tree.
        request: The narrowing request as JSON (:func:`~orchestrator.policy.narrowing.request_to_json`), recorded
            in its ``session_created`` event.
        advisor: Its parent's own advisor mode, which it runs with too (empty: as configured).
    """

    bounds: Bounds
    lineage: Lineage
    request: dict[str, Any] | None = None
    advisor: str = ""


class Runtime:
    """Creates sessions over one event log."""

    def __init__(
        self,
        log: EventLog,
        *,
        home: Path,
        servers: Sequence[ServerConfig] = (),
        tool_timeouts: Mapping[str, float] | None = None,
        shell: ShellOptions | None = None,
        profiles: Mapping[str, ProfileSettings] | None = None,
        warnings: Sequence[str] = (),
        model: str | None = None,
        advisor: AdvisorSettings | None = None,
        loop: LoopSettings | None = None,
    ) -> None:
        self.log = log
        self.loop = loop
        """The config's ``loop``: when a run repeating itself is told and stopped, in every session, children too
        (None: the defaults)."""
        self.advisor = advisor
        """The config's ``advisor``: whether a second model reviews tool calls before policy, in sessions that do
        not choose for themselves."""
        self.home = home
        self.model = model
        """The config's ``model``: what a session gets when neither its caller nor ``$LOOM_MODEL`` names one."""
        self.profiles = dict(profiles or {})
        """The config's ``models``: context windows and compaction thresholds by model pattern."""
        self.servers = tuple(servers)
        self.tool_timeouts = dict(tool_timeouts or {})
        """Per-call limits by namespaced tool or server name (the config's top-level ``toolTimeouts``)."""
        self.shell = shell or ShellOptions()
        self.warnings = tuple(warnings)
        """What the config left out (an untrusted project's servers, say): a warning in every session opened."""
        self.face: Callable[[], MCPServer] | None = None
        """Loom's own face over the host running these sessions (set by the host): a session's ``subagents`` tools
        start and drive children through it. None: sessions get no ``subagents`` server."""
        self.remote: RemoteRuns | None = None
        """The DBOS engine's queue when workers drive this runtime's runs (set by the engine; None: this process)."""
        self.questions = QuestionDesk(log)
        """What servers ask the users of its sessions (elicitation), answered through the face."""

    @contextlib.asynccontextmanager
    async def open_session(
        self,
        cwd: Path,
        model: Model,
        *,
        notice: str = "",
        mode: str = "bypass",
        session_id: str | None = None,
        headless: bool = False,
        rules: Sequence[Rule] | None = None,
        warnings: Sequence[str] = (),
        child: ChildOpening | None = None,
        advisor: str | None = None,
        handoff: HandoffSeed | None = None,
    ) -> AsyncIterator[Session]:
        """Create a session working in ``cwd`` (or reopen ``session_id`` from the store) and connect its tools.

        ``headless`` sessions have nobody to answer approvals: what policy would ask about is denied.
        ``rules`` already loaded by the caller spare a second read of the policy files; ``warnings`` are what that
        load left out (an untrusted project's allow rules), recorded as warnings like the ones found here.
        ``advisor`` is the session's own advisor mode (None: as configured; a reopened session keeps the one it was
        created with; a child gets its parent's, see :class:`ChildOpening`).
        ``child`` opens a child session: its bounds (narrowed from its parent's, which decide its calls instead of
        ``mode``, ``rules`` and ``headless``), its place in the tree and the request it was narrowed by (recorded
        when the child is created, so that a reopened child is bounded the same way).
        ``handoff`` starts a new session from another's handoff: its events go in the batch that creates the session
        (see :mod:`orchestrator.runtime.handoff`), and its history starts from them.
        The tools are disconnected when the context exits; the session itself stays in the store.
        """
        from servers import fs, mcp_access, shell, subagents
        from servers import memory as servers_memory

        history: list[Message] = []
        approved: set[str] = set()
        events: list[Event] = []
        fresh = session_id is None
        opening: list[Event] = []
        if child is not None and child.advisor:
            advisor = child.advisor
        if session_id is None:
            session_id = new_id("s")
            lineage = child.lineage if child is not None else None
            opening.append(
                SessionCreated(
                    session_id=session_id,
                    cwd=str(cwd),
                    model=model.name,
                    mode=mode,
                    headless=headless,
                    parent_session_id=lineage.parent_session_id if lineage else "",
                    parent_run_id=lineage.parent_run_id if lineage else "",
                    agent=lineage.agent if lineage else "",
                    request=child.request if child is not None else None,
                    advisor=advisor or "",
                    handoff_from=handoff.from_session_id if handoff is not None else "",
                )
            )
            if handoff is not None:  # one batch: the new session never exists without the handoff it starts from
                seeded = handoff.events(session_id)
                opening.extend(seeded)
                history = rebuild_history(e for e in seeded if e.session_id == session_id)
        else:
            events = await self.log.store.read_events(session_id)
            history = rebuild_history(events)
            created = events[0] if events and isinstance(events[0], SessionCreated) else None
            if created is not None:  # a reopened session keeps the advisor it was created with
                advisor = created.advisor or None
            approved = approved_for_session(events)
        adviser = self._advisor(model, cwd, advisor)  # AdvisorError (an unknown mode) before anything is recorded

        async def on_failure(server: str, error: str) -> None:
            await self.log.append(ServerFailed(session_id=session_id, server=server, error=error))

        async def on_state(health: ServerHealth, reason: str) -> None:
            await self.log.append(
                ServerStateChanged(
                    session_id=session_id,
                    server=health.name,
                    state=health.state,
                    reason=reason,
                    stderr_tail=health.stderr_tail,
                    restarts=health.restarts,
                    tools=health.tools if health.state == "ready" else None,
                )
            )

        snapshots = FileSnapshots(self.log.store, session_id)
        plan = SessionPlan(session_id, self.log, latest_plan(events or opening), run_id=lambda: snapshots.run_id)

        def place(session: str) -> _Placed:
            # Blocking, in one worker thread (one hand-off, a few hundred microseconds on a busy loop, where four
            # cost a delegated session a millisecond and more): the policy and hooks files (PolicyError and
            # ConfigError before anything is recorded), then the project's root, the memory scope, the protected
            # paths and the built-in servers' state, which read the file system (resolving roots, probing the
            # sandbox).
            loaded, left_out = load_trusted_rules(self.home, cwd) if rules is None else (list(rules), [])
            hooked, unhooked = load_hooks(self.home, cwd)
            project = project_root(cwd)
            scope = MemoryScope(self.home / MEMORY_DB_NAME, str(project), session)
            if fresh:
                seed_new_session(scope)  # its prompt's first run need not wake its memory server to learn that
            protected = Protected.for_session(self.home, cwd, project)
            internal: dict[str, DeferredServer] = {
                "fs": fs.prepare_server([cwd], before_change=snapshots.before_change, hidden=secret_state(self.home)),
                "shell": shell.prepare_server(
                    cwd,
                    sandbox=self.shell.sandbox,
                    network=self.shell.network,
                    env_pass=self.shell.env,
                    protect=protected.mount_points(),  # read-only in the sandbox, whatever the policy allowed
                    # Not even readable: the daemon's token there would let a command answer its own approvals.
                    hide=[self.home],
                ),
                # One memory file for everything; project and session notes are scoped to this project and session.
                "memory": servers_memory.prepare_server(scope.database, project=scope.project, session=session),
                "loom": prepare_session_tools(self.log.store, session, home=self.home, project=project, plan=plan),
            }
            if self.face is not None:
                internal["subagents"] = subagents.prepare_server(
                    subagents.in_process(self.face), session_id=session, cwd=cwd, home=self.home, project=project
                )
            return _Placed(loaded, [*left_out, *unhooked], hooked, scope, protected, internal)

        placed = await anyio.to_thread.run_sync(place, session_id)
        rules, hooked, memory, protected, internal = (
            placed.rules,
            placed.hooks,
            placed.memory,
            placed.protected,
            placed.internal,
        )
        if notice:
            opening.append(Notice(session_id=session_id, text=notice))
        opening.extend(
            Notice(session_id=session_id, level="warning", text=text)
            for text in [*self.warnings, *warnings, *placed.warnings]
        )
        if opening:
            await self.log.append(*opening)  # the session's record and what its user should know: one batch
        bounds = child.bounds if child is not None else None
        # Other servers' resources and prompts, for the model: worth four more tools in every request only when the
        # session has servers other than Loom's own, whose tools already give what their resources would.
        access = mcp_access.prepare_server() if any(not s.disabled for s in self.servers) else None
        if access is not None:
            internal[mcp_access.NAME] = access
        sees = bounds.sees if bounds is not None else None
        hooks = SessionClientHooks(self.log, self.questions, cwd=cwd, log_dir=self.home / "logs")
        hub = Hub(
            internal,
            self.servers,
            log_dir=self.home / "logs",
            on_failure=on_failure,
            on_state=on_state,
            timeouts=self.tool_timeouts,
            visible=access.visible(sees) if access is not None else sees,
            client_hooks=hooks,
        )
        if access is not None:
            levels = [level.rules for level in bounds.chain] if bounds is not None else [rules]
            access.bind(hub, sees=sees, own=frozenset(internal), gate=listing_gate(levels, str(cwd)))
        async with hub:
            session = Session(
                session_id,
                cwd,
                model,
                hub,
                self.log,
                mode=mode,
                history=history,
                rules=rules,
                headless=headless,
                home=self.home,
                protected=protected,
                profiles=self.profiles,
                memory=memory,
                bounds=bounds,
                lineage=child.lineage if child is not None else None,
                advisor=adviser,
                advisor_mode=advisor,
                plan=plan,
                loop=self.loop,
            )
            session.approvals.allowed_tools |= approved
            hooks.bind(session)
            session.snapshots = snapshots
            session.reopened_events = events or None
            async with attached(session, hooked, fresh=fresh):
                yield session

    def _advisor(self, model: Model, cwd: Path, mode: str | None) -> Advisor | None:
        from orchestrator.loop.advisor import advisor_for
        from orchestrator.models import resolve_model

        return advisor_for(self.advisor, lambda spec: resolve_model(spec, base_dir=cwd), model, cwd=str(cwd), mode=mode)

    async def mark_interrupted(self) -> list[str]:
        """Record runs the store shows as running, whose process is gone, as ``interrupted`` (after a crash).

        A run killed while it was being resumed counts too: ``run_resumed`` set it running again in the
        store, under the resuming process.

        Returns:
            The ids of the runs marked.
        """
        marked: list[tuple[RunRecord, str]] = []
        for run in await self.log.store.list_runs_with_status("running"):
            if owner_alive(run.owner):
                continue  # another live process (an embedded `loom mcp`, say) is driving it
            marked.append((run, "Loom stopped during this run (crash or kill); its events up to then are kept"))
        for run in await self.log.store.list_runs_with_status("queued"):
            if not owner_alive(run.owner):
                marked.append((run, "Loom stopped while this run was queued; nothing of it ran; resume it to run it"))
        for run, reason in marked:
            await self.log.append(
                RunFinished(
                    session_id=run.session_id,
                    run_id=run.id,
                    status="interrupted",
                    reason=reason,
                    final_text="",
                    steps=0,
                )
            )
        return [run.id for run, _ in marked]
